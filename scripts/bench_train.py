"""Training throughput vs bare MuJoCo-Warp physics, measured in one process.

    python scripts/bench_train.py [--task Mjrl-Cartpole-Balance] [--num-envs 256 [1024 ...]] [--iterations 10]
        [--device cuda] [--no-graph] [--precision fp32 bf16] [--compile off all] [--settings bf16:all ...]
        [--cuda-graphs on] [--collectives off forced] [--profile-envs 4096 --profile-out FILE]

For each number of envs (in one process: the kernels compile once), prints one JSON line: the
bare physics rate (a loop of `mujoco_warp.step`, `bare_physics_steps_per_s`) and the rate of
the substep loop mjrl replays instead (`replayed_physics_steps_per_s`, faster than the bare
loop on the CPU too), both as the env steps/s they would allow (divided by the task's
decimation: `physics_bare_env_steps_per_s`, `physics_replayed_env_steps_per_s`), the full
training loop's env steps/s (collection plus PPO update), and peak resident memory. The
share of the training loop's time the physics takes is `share_of_replayed_physics` (training
env steps/s over `physics_replayed_env_steps_per_s`): everything else is overhead left to
remove. (Until 2026-11-28 a field `ratio` divided by the bare loop's rate instead, which read
2.28 where the share was 0.21.)

Each line also carries `learned_sha256`, a digest of what the run logged except its timings:
two lines with the same one learned bit for bit alike (`--collectives forced` against off,
the loop's graphs against eager). `--settings PRECISION:COMPILE ...` names the pairs to run
instead of every precision with every compile mode (each compile mode compiles again at each
number of envs).

`--profile-envs N` then trains a few iterations at N envs under `torch.profiler` and writes the
operators that take the most host and device time to `--profile-out`: where that overhead goes.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
import json
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from common import build_runner, learned_figures, newest_run, read_metrics, train_config

if TYPE_CHECKING:
    from mjrl.envs import Task
    from mjrl.runner.config import TrainConfig


def physics_rates(task: Task, num_envs: int, steps: int, device: str) -> tuple[float, float]:
    """World-steps/s of (a loop of bare `mujoco_warp.step` calls, mjrl's replayed substep loop;
    the bare loop's rate again when the task's config does not capture)."""
    import mujoco_warp as mjw
    import warp as wp

    from mjrl.sim import Simulation  # first: it quiets Warp before mujoco_warp starts it

    spec = task.build(task.env_cfg)
    sim = Simulation(spec.scene.build()[0], num_envs, device, task.env_cfg.sim)
    with wp.ScopedDevice(sim.wp_device):
        for _ in range(20):
            mjw.step(sim.model, sim.data)
        wp.synchronize_device(sim.wp_device)  # a GPU runs behind the host
        start = time.perf_counter()
        for _ in range(steps):
            mjw.step(sim.model, sim.data)
        wp.synchronize_device(sim.wp_device)
        bare = steps * num_envs / (time.perf_counter() - start)
        env_steps = max(1, steps // sim.cfg.decimation)
        sim.step()  # a first replay of the loop the simulation captured when it was built
        wp.synchronize_device(sim.wp_device)
        start = time.perf_counter()
        for _ in range(env_steps):
            sim.step()
        wp.synchronize_device(sim.wp_device)
    replayed = env_steps * sim.cfg.decimation * num_envs / (time.perf_counter() - start)
    return bare, replayed


def training_rate(task: Task, cfg: TrainConfig, skip: int) -> tuple[float, float, float, str]:
    """(env steps/s of the whole loop, median collection s, median learning s per iteration,
    the digest of what it learned), the first `skip` iterations left out of the rates."""
    from mjrl.distributed.context import shutdown_distributed, single_process
    from mjrl.runner.start import train

    try:
        train(task, cfg, single_process(cfg.device, collectives=cfg.force_collectives))
    finally:
        shutdown_distributed()  # the group of one of --force-collectives
    run_dir = newest_run(Path(cfg.log_root), task.name)
    metrics = read_metrics(run_dir)[skip:]
    steps = len(metrics) * cfg.env.num_envs * cfg.runner.num_steps_per_env
    seconds = sum(m["collection_s"] + m["learning_s"] for m in metrics)
    median = statistics.median
    learned = hashlib.sha256(json.dumps(learned_figures(run_dir), sort_keys=True).encode()).hexdigest()
    collection_s, learning_s = median(m["collection_s"] for m in metrics), median(m["learning_s"] for m in metrics)
    return steps / seconds, collection_s, learning_s, learned


def profile(task: Task, num_envs: int, device: str, out: str, iterations: int = 3) -> None:
    """Collect and update `iterations` times under torch.profiler (after `build_runner`'s round);
    write the operators with the most self time on the host and on the device."""
    from torch.profiler import ProfilerActivity

    with tempfile.TemporaryDirectory() as log_root:
        runner = build_runner(task, train_config(task, num_envs, iterations, log_root, device))
        cuda = runner.env.device.type == "cuda"
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(iterations):
                with torch.profiler.record_function("mjrl.collect"):
                    runner.collect()
                with torch.profiler.record_function("mjrl.update"):
                    runner.algorithm.update()
            if cuda:
                torch.cuda.synchronize(runner.env.device)
    averages = prof.key_averages()
    sections = [("self_cpu_time_total", "host")] + ([("self_device_time_total", "device")] if cuda else [])
    with open(out, "w") as f:
        f.write(f"# {task.name}, {num_envs} envs, {device}: {iterations} iterations (collect + update)\n")
        for key, what in sections:
            f.write(f"\n## by self {what} time\n")
            f.write(averages.table(sort_by=key, row_limit=30, max_name_column_width=70))


def measure(task: Task, num_envs: int, args: argparse.Namespace) -> None:
    """Print the figures of one number of envs as a JSON line per precision of `args.precision`
    and setting of `args.compile` (the physics measured once)."""
    cuda = args.device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    physics, replayed = physics_rates(task, num_envs, args.physics_steps, args.device)
    for (precision, compile_), collectives in itertools.product(settings(args), args.collectives):
        with tempfile.TemporaryDirectory() as log_root:
            cfg = train_config(
                task, num_envs, args.iterations + warm_up(args), log_root, args.device, args.cuda_graphs,
                precision, compile_,
            )  # fmt: skip
            cfg = dataclasses.replace(cfg, force_collectives=collectives == "forced")
            rates = training_rate(task, cfg, warm_up(args))
        report(task, num_envs, args, (precision, compile_, collectives), physics, replayed, *rates)


PRECISIONS, COMPILE_MODES = ("fp32", "tf32", "bf16"), ("off", "step", "update", "all")


def setting_pair(text: str) -> tuple[str, str]:
    """`--settings`' PRECISION:COMPILE, checked."""
    precision, _, compile_ = text.partition(":")
    if precision not in PRECISIONS or compile_ not in COMPILE_MODES:
        raise argparse.ArgumentTypeError(f"{text!r}: expected PRECISION:COMPILE from {PRECISIONS} and {COMPILE_MODES}")
    return precision, compile_


def settings(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(precision, compile mode) pairs: `--settings`, else every precision with every mode."""
    if args.settings:
        return args.settings
    return [(precision, compile_) for precision in args.precision for compile_ in args.compile]


def warm_up(args: argparse.Namespace) -> int:
    """Iterations left out of the rates: the first (warm-up) and, with the loop's graphs, the
    second (their capture)."""
    return 1 if args.cuda_graphs == "off" else 2


def report(
    task: Task,
    num_envs: int,
    args: argparse.Namespace,
    setting: tuple[str, str, str],
    physics: float,
    replayed: float,
    trained: float,
    collection_s: float,
    learning_s: float,
    learned: str,
) -> None:
    """Print one measurement as a JSON line."""
    cuda = args.device.startswith("cuda")
    ceiling = physics / task.env_cfg.sim.decimation
    replayed_ceiling = replayed / task.env_cfg.sim.decimation
    rollout_steps = num_envs * task.agent_cfg.runner.num_steps_per_env
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # the process's so far
    # torch's allocations on the GPU (Warp's own arrays are not counted)
    gpu = {"peak_torch_gpu_mb": round(torch.cuda.max_memory_allocated() / 2**20)} if cuda else {}
    print(
        json.dumps(
            {
                "task": args.task,
                "device": args.device,
                "graph": task.env_cfg.sim.graph,
                "deterministic": task.env_cfg.sim.deterministic,
                "cuda_graphs": args.cuda_graphs,
                "forced_collectives": setting[2] == "forced",
                "precision": setting[0],
                "compile": setting[1],
                "num_envs": num_envs,
                "bare_physics_steps_per_s": round(physics),
                "replayed_physics_steps_per_s": round(replayed),
                # The env-step rates the physics alone would allow: its bare `mujoco_warp.step`
                # loop and the substep loop mjrl replays (what training steps through).
                "physics_bare_env_steps_per_s": round(ceiling),
                "physics_replayed_env_steps_per_s": round(replayed_ceiling),
                "training_env_steps_per_s": round(trained),
                "share_of_replayed_physics": round(trained / replayed_ceiling, 3),
                "peak_rss_mb": round(peak_mb),
                "collection_s": round(collection_s, 3),
                "learning_s": round(learning_s, 3),
                "collection_share_of_replayed_physics": round(rollout_steps / replayed_ceiling / collection_s, 3),
                "learned_sha256": learned,
                **gpu,
            }
        ),
        flush=True,
    )


def main() -> None:
    from mjrl.tasks import load_task

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="Mjrl-Cartpole-Balance")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[256])
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--physics-steps", type=int, default=500)
    parser.add_argument("--torch-threads", type=int, default=1, help="as `train --torch-threads` (1 on the CPU)")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (cuda:0)")
    parser.add_argument("--no-graph", action="store_true", help="launch every kernel (`--env.sim.graph False`)")
    parser.add_argument(
        "--cuda-graphs", default="off", choices=("off", "on", "auto"), help="`--runner.cuda-graphs`: the loop as graphs"
    )
    parser.add_argument(
        "--deterministic", action="store_true", help="mujoco_warp's deterministic mode (`--env.sim.deterministic True`)"
    )
    parser.add_argument(
        "--precision", nargs="+", default=["fp32"], choices=PRECISIONS, help="`--policy.precision`, each"
    )
    parser.add_argument("--compile", nargs="+", default=["off"], choices=COMPILE_MODES, help="as --runner.compile")
    parser.add_argument(
        "--settings", nargs="+", default=[], type=setting_pair, help="PRECISION:COMPILE pairs, instead of every pair"
    )
    parser.add_argument(
        "--collectives", nargs="+", default=["off"], choices=("off", "forced"),
        help="forced: `--force-collectives True`, the one process issues its collectives; each",
    )  # fmt: skip
    parser.add_argument("--profile-envs", type=int, default=0, help="profile a few iterations at this many envs")
    parser.add_argument("--profile-out", default="profile.txt")
    args = parser.parse_args()
    torch.set_num_threads(args.torch_threads)
    task = load_task(args.task)
    sim = dataclasses.replace(task.env_cfg.sim, graph=not args.no_graph, deterministic=args.deterministic)
    task = dataclasses.replace(task, env_cfg=dataclasses.replace(task.env_cfg, sim=sim))
    for num_envs in args.num_envs:
        measure(task, num_envs, args)
    if args.profile_envs:
        profile(task, args.profile_envs, args.device, args.profile_out)


if __name__ == "__main__":
    main()
