"""`train TASK [--preset NAME] [--config RUN/config.yaml] [flags]`: train a policy with PPO."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from mjrl.cli.common import load_preset, parse_flags, pop_option, preset_names, read_yaml, run_command
from mjrl.errors import SharedUsageError, UsageError

USAGE = """usage: train TASK [--preset NAME] [--config FILE] [flags]

Train a policy with PPO on MuJoCo-Warp worlds. `train TASK --help` lists every flag.

tasks:
{tasks}

presets (configs/): {presets}
--config FILE feeds a run's own config.yaml back in, to reproduce that run.
"""


def parse_train_args(argv: list[str]) -> tuple[Any, Any]:
    """argv -> (task, TrainConfig). Order of precedence: task defaults < --preset < --config < flags."""
    from mjrl.tasks import describe_tasks, load_task

    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE.format(tasks=describe_tasks(), presets=", ".join(preset_names())))
        raise SystemExit(0 if args else 2)
    preset = pop_option(args, "--preset")
    config_file = pop_option(args, "--config")
    saved = read_yaml(Path(config_file), "config file") if config_file else None
    if args and not args[0].startswith("-"):
        task_name = args.pop(0)
    elif saved is not None and "task" in saved:
        task_name = saved["task"]
    else:
        raise UsageError("the first argument must be a task name; `train --help` lists them")
    task = load_task(task_name)

    from mjrl.runner.config import TrainConfig, apply_dict

    cfg = TrainConfig(env=task.env_cfg, agent=task.agent_cfg)
    if preset is not None:
        cfg = apply_dict(cfg, load_preset(preset))
    if saved is not None:
        saved_task = saved.pop("task", task_name)
        if saved_task != task_name:
            raise UsageError(f"--config {config_file} is a config of {saved_task}, not {task_name}")
        cfg = apply_dict(cfg, saved)
    cfg = parse_flags(TrainConfig[type(task.env_cfg)], cfg, args, f"train {task_name}", f"Train {task_name} with PPO.")
    return task, cfg


def _train(argv: list[str]) -> int:
    task, cfg = parse_train_args(argv)

    from mjrl.distributed.context import launcher_env
    from mjrl.runner.config import validate

    validate(cfg)
    under_launcher = launcher_env() is not None
    if cfg.nproc_per_node:
        if under_launcher:
            raise UsageError("already running under a launcher (RANK etc. are set): drop --nproc-per-node")
        return _launch(task.name, cfg)
    from mjrl.runner.preemption import Preempted

    try:
        if cfg.distributed:
            summary = _distributed_worker(task, cfg)
        else:
            if under_launcher:
                raise UsageError("started by a launcher (RANK etc. are set) but --distributed True is missing")
            from mjrl.distributed.context import single_process
            from mjrl.runner.preemption import StopFlag
            from mjrl.runner.runner import train

            _set_threads(cfg)
            summary = train(task, cfg, single_process(cfg.device), StopFlag().install())
    except Preempted as stop:
        if stop.checkpoint is not None:
            print(
                f"train: {stop}; wrote {stop.checkpoint}; continue with --resume-dir {stop.run_dir}",
                file=sys.stderr,
                flush=True,
            )
        return stop.exit_code
    if summary["rank"] == 0:
        print(json.dumps({k: summary[k] for k in ("run_dir", "iterations", "env_steps", "checkpoint")}))
    return 0


def _distributed_worker(task: Any, cfg: Any, given: Any = None) -> dict:
    """One rank of a distributed job: join the process group, train, leave the group."""
    from mjrl.distributed.context import init_distributed, shutdown_distributed
    from mjrl.runner.preemption import Preempted, StopFlag
    from mjrl.runner.runner import train

    _set_threads(cfg)
    stop = StopFlag().install()
    ctx = init_distributed(cfg.device, cfg.collective_timeout_s, cfg.hang_timeout_s)
    ctx.watchdog.start()
    try:
        summary = train(task, cfg, ctx, stop, given)
    except Preempted:
        ctx.watchdog.finish()
        shutdown_distributed()
        raise
    except UsageError as exc:
        # Stop this rank's watchdog first: an abort seen now would turn this exit 2 into 75.
        ctx.watchdog.stop()
        if not isinstance(exc, SharedUsageError):  # the others do not know yet
            ctx.watchdog.abort(f"rank {ctx.rank}: {exc}")
        # Leave the process group before exiting: torch's threads still running at interpreter
        # exit abort the process (SIGABRT instead of exit code 2).
        shutdown_distributed()
        raise
    except BaseException as exc:
        _leave_after_failure(ctx, exc)
        raise
    ctx.watchdog.finish()
    shutdown_distributed()
    return summary


def _leave_after_failure(ctx: Any, exc: BaseException) -> None:
    """Tell the other ranks (on every node) at once, instead of leaving them blocked in a
    collective with this one until it times out, then leave the process group, as the other
    exits do. A rank whose error only followed another rank's failure (a collective broken by
    that rank leaving) ends as its watchdog would have, with that rank's reason."""
    from mjrl.distributed.context import shutdown_distributed

    # This rank's watchdog first: seeing the abort posted below, it would end this process in
    # the middle of leaving the group.
    ctx.watchdog.stop()
    posted = ctx.watchdog.posted_abort()
    if posted is None:
        ctx.watchdog.abort(f"rank {ctx.rank} failed: {type(exc).__name__}: {exc}")
    with contextlib.suppress(Exception):  # a failure to leave must not hide the error
        shutdown_distributed()
    if posted is not None:
        ctx.watchdog.exit_for_abort(posted)


def launched_worker(task_name: str, cfg: Any, given: Any = None) -> dict:
    """Entry point of the built-in launcher's workers (module level, for the spawn start
    method). `given` is the config the user gave the launcher (for config.yaml). Bad input ends
    the worker with exit code 2 and one line, as in the CLI."""
    from mjrl.runner.preemption import Preempted
    from mjrl.tasks import load_task

    try:
        return _distributed_worker(load_task(task_name), cfg, given)
    except UsageError as exc:
        # Every rank knows a shared error: one line per node, from its local rank 0.
        if not isinstance(exc, SharedUsageError) or os.environ.get("LOCAL_RANK", "0") == "0":
            print(f"train: error: {exc}", file=sys.stderr, flush=True)
        sys.exit(2)
    except Preempted as stop:
        sys.exit(stop.exit_code)


def _launch(task_name: str, cfg: Any) -> int:
    import dataclasses

    from torch.distributed import DistNetworkError, DistStoreError
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous.api import RendezvousError

    from mjrl.distributed.context import check_node_devices
    from mjrl.distributed.launch import LaunchOptions, launch

    check_node_devices(cfg.device, cfg.nproc_per_node)
    # torch's agent logs a traceback of its own for every worker that exits non-zero and a
    # warning for each one it stops; the workers and `_report_failure` say what failed, and bad
    # input must stay one line.
    for name in ("torch.distributed.elastic.multiprocessing.api", "torch.multiprocessing.spawn"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    opts = LaunchOptions(
        nproc_per_node=cfg.nproc_per_node,
        nnodes=cfg.nnodes,
        node_rank=cfg.node_rank,
        rdzv_endpoint=cfg.rdzv_endpoint,
        rdzv_id=cfg.rdzv_id,
        max_restarts=cfg.max_restarts,
        rdzv_timeout_s=cfg.rdzv_timeout_s,
    )
    worker_cfg = dataclasses.replace(cfg, distributed=True, nproc_per_node=0)
    try:
        results = launch(opts, launched_worker, task_name, worker_cfg, cfg)
    except ChildFailedError as exc:
        return _report_failure(exc)
    except SignalException as exc:
        # The agent has already passed the signal on: rank 0 checkpointed before exiting.
        print(
            f"train: stopped by {exc.sigval.name}; continue with --resume True (or the same --rdzv-id)",
            file=sys.stderr,
            flush=True,
        )
        return 128 + int(exc.sigval)
    except (RendezvousError, DistNetworkError, DistStoreError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(
            f"no rendezvous at {cfg.rdzv_endpoint or 'localhost'} within {cfg.rdzv_timeout_s:g} s ({first}); "
            "check --rdzv-endpoint and that every node was started"
        ) from None
    summary = results.get(0) or next(iter(results.values()))
    ranks = {str(r): _rank_summary(results[r]) for r in sorted(results)}
    for rank, info in ranks.items():
        ret = info["mean_episode_return"]
        ret_text = f"{ret:.2f}" if ret is not None and math.isfinite(ret) else "-"
        print(
            f"rank {rank}: {info['iterations']} iterations | return {ret_text} | "
            f"{info['steps_per_second']:,.0f} steps/s | parameters {info['parameters_sha256'][:12]}"
        )
    print(
        json.dumps(
            _finite(
                {
                    "run_dir": summary["run_dir"],
                    "iterations": summary["iterations"],
                    "env_steps": summary["env_steps"],
                    "checkpoint": summary["checkpoint"],
                    "ranks": ranks,
                }
            )
        )
    )
    return 0


def _rank_summary(result: dict) -> dict:
    """What each rank reports back to the launcher."""
    m = result["final_metrics"]
    keys = ("mean_episode_return", "mean_episode_length", "steps_per_second", "collection_s", "learning_s")
    return {
        "iterations": result["iterations"],
        "checkpoint": result["checkpoint"],
        "parameters_sha256": result["parameters_sha256"],
        **{k: m.get(k) for k in keys},
    }


WATCHDOG_EXIT = 75  # mjrl.distributed.watchdog.EXIT_CODE, without importing torch here


def _report_failure(exc: Any) -> int:
    """The launcher's last lines: which rank failed, on which node, and why; the root cause
    first. Exit code 2 when the root cause is bad input (a worker's UsageError), else 1."""
    failures = exc.failures
    # Workers signalled directly (SLURM signals every process of a job step), not through this
    # launcher: they agreed to stop and rank 0 checkpointed, so this is a preemption.
    stop_codes = {128 + signal.SIGTERM, 128 + signal.SIGINT}
    if all(f.exitcode in stop_codes for f in failures.values()):
        code = max(f.exitcode for f in failures.values())
        print(
            f"train: stopped by {signal.Signals(code - 128).name}; continue with --resume True (or the same --rdzv-id)",
            file=sys.stderr,
            flush=True,
        )
        return code
    # A rank stopped by its watchdog only reacted to another rank's failure.
    roots = [r for r, f in failures.items() if f.exitcode != WATCHDOG_EXIT] or list(failures)
    root = min(roots, key=lambda r: (failures[r].timestamp, r))
    if failures[root].exitcode == 2:
        return 2  # bad input: the worker printed its one line already
    for rank in sorted(failures, key=lambda r: (r != root, r)):
        failure = failures[rank]
        label = " (first failure)" if rank == root and len(failures) > 1 else ""
        print(
            f"train: rank {rank}{label} (local rank {failure.local_rank}, node {socket.gethostname()}, "
            f"pid {failure.pid}) failed: {_failure_cause(failure)}",
            file=sys.stderr,
        )
    return 2 if failures[root].exitcode == 2 else 1


def _failure_cause(failure: Any) -> str:
    if failure.exitcode < 0:
        return f"killed by signal {failure.signal_name()}"
    message = failure.message if isinstance(failure.message, str) else failure.message.get("message", "")
    message = "" if message.startswith("To enable traceback") else message.strip().splitlines()[-1:]
    message = message[0] if message else ""
    if failure.exitcode == WATCHDOG_EXIT:
        return f"stopped by its watchdog: {message}" if message else "stopped by its watchdog"
    return f"exit code {failure.exitcode}" + (f": {message}" if message else "")


def _finite(value: Any) -> Any:
    """NaN and infinities are not JSON: they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def _set_threads(cfg: Any) -> None:
    import torch

    if cfg.torch_threads > 0:
        torch.set_num_threads(cfg.torch_threads)
    elif cfg.device == "cpu" or (cfg.device == "auto" and not torch.cuda.is_available()):
        torch.set_num_threads(1)  # the runner raises it for the update (see TrainConfig.torch_threads)


def main(argv: list[str] | None = None) -> int:
    return run_command("train", _train, argv)


if __name__ == "__main__":
    sys.exit(main())
