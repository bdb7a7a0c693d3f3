"""A training job from a parsed config: one process, one rank started by torchrun, or mjrl's own
launcher and its workers. `run_job` is what `train` does once it has parsed its arguments."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections.abc import Callable
from typing import Any

from mjrl.distributed.context import launcher_env
from mjrl.distributed.preemption import Preempted, StopFlag
from mjrl.envs import Task
from mjrl.errors import UsageError
from mjrl.runner.config import TrainConfig, validate

TaskLoader = Callable[[str], Task]
"""Task name -> Task (the registry, `mjrl.tasks.load_task`): the launcher's workers are fresh
processes, which rebuild the task from its name."""


def run_job(task: Task, cfg: TrainConfig, load_task: TaskLoader) -> int:
    """Train `task` as `cfg` says; prints the outcome and returns the process's exit code."""
    validate(cfg)
    under_launcher = launcher_env() is not None
    if cfg.launch.nproc_per_node:
        if under_launcher:
            raise UsageError("already running under a launcher (RANK etc. are set): drop --nproc-per-node")
        return _launch(task.name, cfg, load_task)
    try:
        if cfg.distributed:
            summary = rank_worker(task, cfg)
        else:
            if under_launcher:
                raise UsageError("started by a launcher (RANK etc. are set) but --distributed True is missing")
            from mjrl.distributed.context import shutdown_distributed, single_process
            from mjrl.runner.start import train

            set_torch_threads(cfg)
            ctx = single_process(cfg.device, collectives=cfg.force_collectives)
            if ctx.forced_collectives:
                print(f"collectives: forced, in a process group of one on {ctx.device}", flush=True)
            try:
                summary = train(task, cfg, ctx, StopFlag().install())
            finally:
                shutdown_distributed()  # the group of one of --force-collectives
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


def rank_worker(task: Task, cfg: TrainConfig, given: TrainConfig | None = None) -> dict[str, Any]:
    """One rank of a distributed job (torchrun's or the built-in launcher's): join the process
    group, train, leave the group. `given`: the config as the user gave it (for config.yaml)."""
    from mjrl.distributed.worker import run_rank
    from mjrl.runner.start import train

    set_torch_threads(cfg)
    return run_rank(
        lambda ctx, stop: train(task, cfg, ctx, stop, given),
        cfg.device,
        cfg.collective_timeout_s,
        cfg.hang_timeout_s,
        cfg.force_collectives,
    )


def launched_worker(load_task: TaskLoader, task_name: str, cfg: TrainConfig, given: TrainConfig) -> dict[str, Any]:
    """Entry point of the built-in launcher's workers (module level, for the spawn start
    method). Bad input ends the worker with exit code 2 and one line, as in the CLI."""
    from mjrl.distributed.worker import exit_as_a_command
    from mjrl.plugins import import_plugins

    def work() -> dict[str, Any]:
        import_plugins(cfg.plugins)  # a spawned process: what the run's plugins register, registered again
        return rank_worker(load_task(task_name), cfg, given)

    return exit_as_a_command("train", work)


def _launch(task_name: str, cfg: TrainConfig, load_task: TaskLoader) -> int:
    from mjrl.distributed.devices import check_node_devices
    from mjrl.distributed.report import JobEnded, launch_job

    check_node_devices(cfg.device, cfg.launch.nproc_per_node)
    worker_cfg = dataclasses.replace(cfg, distributed=True, launch=dataclasses.replace(cfg.launch, nproc_per_node=0))
    try:
        results = launch_job(cfg.launch, launched_worker, load_task, task_name, worker_cfg, cfg)
    except JobEnded as ended:
        return ended.exit_code
    summary = results.get(0) or next(iter(results.values()))
    ranks = {str(r): _rank_summary(results[r]) for r in sorted(results)}
    for rank, info in ranks.items():
        # A resume of a finished run trains no iteration: it has no return or speed to report.
        ret, speed = _figure(info["mean_episode_return"], ".2f"), _figure(info["steps_per_second"], ",.0f")
        print(
            f"rank {rank}: {info['iterations']} iterations | return {ret} | "
            f"{speed} steps/s | parameters {info['parameters_sha256'][:12]}"
        )
    keys = ("run_dir", "iterations", "env_steps", "checkpoint")
    print(json.dumps(_finite({**{k: summary[k] for k in keys}, "ranks": ranks})))
    return 0


def _figure(value: float | None, spec: str) -> str:
    return format(value, spec) if value is not None and math.isfinite(value) else "-"


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


def _finite(value: Any) -> Any:
    """NaN and infinities are not JSON: they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def set_torch_threads(cfg: TrainConfig) -> None:
    import torch

    if cfg.torch_threads > 0:
        torch.set_num_threads(cfg.torch_threads)
    elif cfg.device == "cpu" or (cfg.device == "auto" and not torch.cuda.is_available()):
        torch.set_num_threads(1)  # the runner raises it for the update (see TrainConfig.torch_threads)
