"""Can a whole rollout (policy, env steps, buffer writes) run as one CUDA graph, and what
does it save? An experiment for a GPU: the training loop there is bound by the host's kernel
launches (docs/benchmarks.md, "On a GPU"), about 200 small torch ops per env step.

    python scripts/bench_graph_rollout.py --device cuda [--task Mjrl-Velocity-Flat-Quadruped]
        [--num-envs 4096] [--rollouts 10]

Builds the task's env and PPO as training does and times `Runner.collect()` as training runs it
(eager). Then, for each way of putting the physics into a torch CUDA graph, it captures one
rollout with `torch.cuda.graph` and times its replay:

  child   mjrl's captured substep loop (a Warp graph) inserted as a child graph node;
  inline  the substep kernels launched inside torch's capture, Warp told of it
          (`wp.ScopedCapture(external=True)`), so mujoco_warp's solver loop becomes a
          conditional node of the same graph.

Each replayed rollout is checked against an eager twin (same seed, same rollouts before it):
the largest difference of every buffer field. A field that differs by more than rounding
means the env keeps some state outside the graph (a tensor rebound instead of written in
place, a Python counter), which a captured rollout would freeze. Prints one JSON line; on the
CPU only the eager time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

FIELDS = ("actor_obs", "critic_obs", "actions", "log_probs", "values", "rewards", "dones")


def build(task, num_envs: int, device: str, seed: int, graph_physics: bool, log_root: str):
    """A runner whose env and PPO are built as `train` builds them, after one rollout and
    update (kernels compiled, allocator warm)."""
    from mjrl.distributed.context import single_process
    from mjrl.distributed.preemption import StopFlag
    from mjrl.envs import VecEnv
    from mjrl.rl import make_algorithm
    from mjrl.runner.config import TrainConfig
    from mjrl.runner.runner import Runner
    from mjrl.runner.state import TrainingState

    sim = dataclasses.replace(task.env_cfg.sim, graph=graph_physics)
    defaults = TrainConfig.for_task(task)
    cfg = dataclasses.replace(
        defaults, env=dataclasses.replace(task.env_cfg, num_envs=num_envs, sim=sim), device=device, seed=seed
    )
    ctx = single_process(device)
    torch.manual_seed(seed)
    env = VecEnv(cfg.env, task.build(cfg.env), ctx.device, seed=seed)
    algorithm = make_algorithm(cfg, env, cfg.runner.num_steps_per_env, ctx, seed=seed)
    runner = Runner(task, cfg, ctx, env, algorithm, Path(log_root), TrainingState(), False, StopFlag())
    runner.collect()
    algorithm.update()
    return runner


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def eager_rollout(runner) -> None:
    runner.collect()
    runner.algorithm.storage.step = 0  # the next rollout writes the buffer again (no update)


def seconds_per_rollout(rollout: Callable[[], None], device: torch.device, rollouts: int) -> float:
    synchronize(device)
    start = time.perf_counter()
    for _ in range(rollouts):
        rollout()
    synchronize(device)
    return (time.perf_counter() - start) / rollouts


def insert_physics_as_child_graph(sim) -> None:
    """Make `sim.step` insert its Warp graph into a capturing stream (a launch elsewhere)."""
    import warp as wp
    import warp._src.context as warp_context

    def step() -> None:
        sim.physics_version += 1
        stream = wp.stream_from_torch(torch.cuda.current_stream(sim.device))
        if torch.cuda.is_current_stream_capturing():
            core = warp_context.runtime.core
            if not core.wp_cuda_graph_insert_child_graph(sim.wp_device.context, stream.cuda_stream, sim._graph.graph):
                raise RuntimeError(f"child graph: {warp_context.runtime.get_error_string()}")
        else:
            wp.capture_launch(sim._graph, stream=stream)

    sim.step = step


def capture_rollout(runner, mode: str) -> Callable[[], None]:
    """One rollout captured with torch.cuda.graph; returns its replay. The env's observation
    is the graph's input and output: the rollout starts from a fixed tensor and copies its last
    observation back into it."""
    import warp as wp

    env, device = runner.env, runner.env.device
    if mode == "child":
        insert_physics_as_child_graph(env.sim)
    start_obs = {group: obs.clone() for group, obs in env.obs.items()}

    def rollout() -> None:
        env.obs = start_obs
        runner.collect()
        for group, obs in env.obs.items():
            start_obs[group].copy_(obs)
        runner.algorithm.storage.step = 0

    # A rollout on a side stream first, as torch asks before a capture (it is one of the twin's).
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        rollout()
    torch.cuda.current_stream(device).wait_stream(side)
    synchronize(device)

    graph = torch.cuda.CUDAGraph()
    for generator in (env.generator, runner.algorithm.generator):
        if hasattr(graph, "register_generator_state"):
            graph.register_generator_state(generator)
    with torch.cuda.graph(graph):
        if mode == "inline":
            stream = wp.stream_from_torch(torch.cuda.current_stream(device))
            with wp.ScopedCapture(device=env.sim.wp_device, stream=stream, external=True):
                rollout()
        else:
            rollout()
    env.obs = start_obs
    return graph.replay


def buffer_differences(a, b) -> dict[str, float]:
    return {name: (getattr(a, name) - getattr(b, name)).abs().max().item() for name in FIELDS}


def try_mode(task, args, mode: str, eager_s: float, log_root: str) -> dict:
    device = torch.device(args.device)
    try:
        graphed = build(task, args.num_envs, args.device, args.seed, mode == "child", log_root)
        twin = build(task, args.num_envs, args.device, args.seed, mode == "child", log_root)
        replay = capture_rollout(graphed, mode)  # ran the twin's second rollout
        eager_rollout(twin)
        replay()
        eager_rollout(twin)
        synchronize(device)
        differences = buffer_differences(graphed.algorithm.storage, twin.algorithm.storage)
        replay_s = seconds_per_rollout(replay, device, args.rollouts)
        return {
            "seconds_per_rollout": round(replay_s, 4),
            "speedup": round(eager_s / replay_s, 2),
            "max_difference_from_eager": {k: float(f"{v:.3g}") for k, v in differences.items()},
            "finite": all(torch.isfinite(getattr(graphed.algorithm.storage, f)).all().item() for f in FIELDS),
        }
    except Exception as exc:  # an experiment: report why this way failed and try the next
        return {"error": f"{type(exc).__name__}: {exc}"[:400]}


def main() -> None:
    from mjrl.tasks import load_task

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="Mjrl-Velocity-Flat-Quadruped")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--rollouts", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    task = load_task(args.task)
    with tempfile.TemporaryDirectory() as log_root:
        runner = build(task, args.num_envs, args.device, args.seed, True, log_root)
        eager_s = seconds_per_rollout(lambda: eager_rollout(runner), runner.env.device, args.rollouts)
        steps = args.num_envs * runner.cfg.runner.num_steps_per_env
        result = {
            "task": args.task,
            "device": args.device,
            "num_envs": args.num_envs,
            "eager": {"seconds_per_rollout": round(eager_s, 4), "env_steps_per_s": round(steps / eager_s)},
        }
        if runner.env.device.type == "cuda":
            for mode in ("child", "inline"):
                result[mode] = try_mode(task, args, mode, eager_s, log_root)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
