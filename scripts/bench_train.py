"""Training throughput vs bare MuJoCo-Warp physics, measured in one process.

    python scripts/bench_train.py [--task Mjrl-Cartpole-Balance] [--num-envs 256 [1024 ...]] [--iterations 10]
        [--device cuda] [--no-graph] [--settings fp32:off bf16:all ...]
        [--cuda-graphs on] [--collectives off forced] [--profile-envs 4096 --profile-out FILE]

Per number of envs and setting, a JSON line: the bare and the replayed physics rates, the training
loop's env steps/s and its share of the replayed physics, peak memory, and a digest of what it
learned. `--profile-envs N`: the operators of a few profiled iterations. The fields:
docs/benchmarks.md, "How the scripts measure".
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

from mjrl.metrics_file import learned_figures, read_metrics
from mjrl.tools.commands import newest_run

if TYPE_CHECKING:
    from mjrl.envs import Task
    from mjrl.runner.config import TrainConfig

PRECISIONS, COMPILE_MODES = ("fp32", "tf32", "bf16"), ("off", "step", "update", "all")


def physics_rates(task: Task, num_envs: int, steps: int, device: str) -> tuple[float, float]:
    """World-steps/s of a loop of bare `mujoco_warp.step` calls and of mjrl's replayed substep
    loop (the bare loop's again when the task's config does not capture)."""
    import mujoco_warp as mjw
    import warp as wp

    from mjrl.sim import Simulation  # first: it quiets Warp before mujoco_warp starts it

    sim = Simulation(task.build(task.env_cfg).scene.build()[0], num_envs, device, task.env_cfg.sim)
    env_steps = max(1, steps // sim.cfg.decimation)

    def timed(step, count: int) -> float:
        wp.synchronize_device(sim.wp_device)  # a GPU runs behind the host
        start = time.perf_counter()
        for _ in range(count):
            step()
        wp.synchronize_device(sim.wp_device)
        return time.perf_counter() - start

    with wp.ScopedDevice(sim.wp_device):
        for _ in range(20):
            mjw.step(sim.model, sim.data)
        bare = steps * num_envs / timed(lambda: mjw.step(sim.model, sim.data), steps)
        sim.step()  # a first replay of the loop the simulation captured when it was built
        replayed = env_steps * sim.cfg.decimation * num_envs / timed(sim.step, env_steps)
    return bare, replayed


def train_config(task: Task, num_envs: int, log_root: str, args: argparse.Namespace, precision: str = "fp32",
                 compile_: str = "off", iterations: int | None = None) -> TrainConfig:  # fmt: skip
    """The task's training config for a benchmark: no checkpoints, evaluations or logger."""
    from mjrl.runner.config import TrainConfig

    defaults = TrainConfig.for_task(task)
    iterations = iterations or args.iterations + warm_up(args.cuda_graphs)
    runner = dataclasses.replace(defaults.runner, max_iterations=iterations, save_interval=10**6, eval_interval=0,
                                 cuda_graphs=args.cuda_graphs, compile=compile_)  # fmt: skip
    return dataclasses.replace(
        defaults, env=dataclasses.replace(task.env_cfg, num_envs=num_envs), runner=runner, device=args.device,
        policy=dataclasses.replace(defaults.policy, precision=precision), logger="none", log_root=log_root,
    )  # fmt: skip


def training_rate(task: Task, cfg: TrainConfig) -> dict:
    """The loop's env steps/s and median phase times after its warm-up, and what it learned."""
    from mjrl.distributed.context import shutdown_distributed, single_process
    from mjrl.runner.start import train

    try:
        train(task, cfg, single_process(cfg.device, collectives=cfg.force_collectives))
    finally:
        shutdown_distributed()  # the group of one of --force-collectives
    run_dir = newest_run(Path(cfg.log_root), task.name)
    metrics = read_metrics(run_dir)[warm_up(cfg.runner.cuda_graphs) :]
    steps = len(metrics) * cfg.env.num_envs * cfg.runner.num_steps_per_env
    return {
        "training_env_steps_per_s": steps / sum(m["collection_s"] + m["learning_s"] for m in metrics),
        "collection_s": statistics.median(m["collection_s"] for m in metrics),
        "learning_s": statistics.median(m["learning_s"] for m in metrics),
        "learned_sha256": hashlib.sha256(json.dumps(learned_figures(run_dir), sort_keys=True).encode()).hexdigest(),
    }


def profile(task: Task, num_envs: int, args: argparse.Namespace, iterations: int = 3) -> None:
    """Write the operators with the most host and device time of `iterations` rounds of collection
    and update, after a first round, of a runner `train`'s `build_run` builds."""
    from torch.profiler import ProfilerActivity

    from mjrl.distributed.context import single_process
    from mjrl.runner.start import build_run

    with tempfile.TemporaryDirectory() as log_root:
        cfg = train_config(task, num_envs, log_root, args, iterations=iterations)
        runner = build_run(task, cfg, single_process(cfg.device))
        runner.collect()
        runner.algorithm.update()
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
    with open(args.profile_out, "w") as f:
        f.write(f"# {task.name}, {num_envs} envs, {args.device}: {iterations} iterations (collect + update)\n")
        for key, what in sections:
            f.write(f"\n## by self {what} time\n")
            f.write(averages.table(sort_by=key, row_limit=30, max_name_column_width=70))


def measure(task: Task, num_envs: int, args: argparse.Namespace) -> None:
    """A JSON line per setting and collectives setting at `num_envs` (the physics measured once)."""
    cuda = args.device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    bare, replayed = physics_rates(task, num_envs, args.physics_steps, args.device)
    decimation = task.env_cfg.sim.decimation
    for setting, collectives in itertools.product(args.settings, args.collectives):
        precision, compile_ = setting.split(":")
        with tempfile.TemporaryDirectory() as log_root:
            cfg = train_config(task, num_envs, log_root, args, precision, compile_)
            rates = training_rate(task, dataclasses.replace(cfg, force_collectives=collectives == "forced"))
        trained, collection_s = rates["training_env_steps_per_s"], rates["collection_s"]
        rollout_steps = num_envs * task.agent_cfg.runner.num_steps_per_env
        line = {
            "task": args.task, "device": args.device, "graph": task.env_cfg.sim.graph,
            "deterministic": task.env_cfg.sim.deterministic, "cuda_graphs": args.cuda_graphs,
            "forced_collectives": collectives == "forced", "precision": precision, "compile": compile_,
            "num_envs": num_envs, "bare_physics_steps_per_s": round(bare),
            "replayed_physics_steps_per_s": round(replayed),
            "physics_bare_env_steps_per_s": round(bare / decimation),
            "physics_replayed_env_steps_per_s": round(replayed / decimation),
            "training_env_steps_per_s": round(trained),
            "share_of_replayed_physics": round(trained * decimation / replayed, 3),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),  # the process's so far
            "collection_s": round(collection_s, 3), "learning_s": round(rates["learning_s"], 3),
            "collection_share_of_replayed_physics": round(rollout_steps * decimation / replayed / collection_s, 3),
            "learned_sha256": rates["learned_sha256"],
            **({"peak_torch_gpu_mb": round(torch.cuda.max_memory_allocated() / 2**20)} if cuda else {}),
        }  # fmt: skip
        print(json.dumps(line), flush=True)


def warm_up(cuda_graphs: str) -> int:
    """Iterations left out of the rates: the warm-up, and with the loop's graphs their capture."""
    return 1 if cuda_graphs == "off" else 2


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
    parser.add_argument("--cuda-graphs", default="off", choices=("off", "on", "auto"), help="the loop as graphs")
    parser.add_argument("--deterministic", action="store_true", help="`--env.sim.deterministic True`")
    pairs = [f"{precision}:{compile_}" for precision, compile_ in itertools.product(PRECISIONS, COMPILE_MODES)]
    parser.add_argument("--settings", nargs="+", default=["fp32:off"], choices=pairs, metavar="PRECISION:COMPILE",
                        help="`--policy.precision` and `--runner.compile` pairs, each run in turn")  # fmt: skip
    parser.add_argument("--collectives", nargs="+", default=["off"], choices=("off", "forced"),
                        help="forced: `--force-collectives True`, the one process issues its collectives")  # fmt: skip
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
        profile(task, args.profile_envs, args)


if __name__ == "__main__":
    main()
