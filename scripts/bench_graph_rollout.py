"""Can a whole rollout (policy, env steps, buffer writes) run as one CUDA graph, and what
does it save? An experiment for a GPU: the training loop there is bound by the host's kernel
launches (docs/benchmarks.md, "On a GPU"), about 200 small torch ops per env step.

    python scripts/bench_graph_rollout.py --device cuda [--task Mjrl-Velocity-Flat-Quadruped]
        [--num-envs 4096] [--rollouts 10] [--deterministic]

Builds the task's env and PPO as training does and times `Runner.collect()` as training runs it
(eager). Then, for each way of putting the physics into a torch CUDA graph, it captures one
rollout with `torch.cuda.graph` and times its replay:

  inline           the substep kernels launched inside torch's capture, Warp told of it
                   (`wp.ScopedCapture(external=True)` on the simulation's own stream object), so
                   mujoco_warp's solver loop becomes a conditional node of the same graph;
  inline-unrolled  the same with mujoco_warp's `opt.graph_conditional` off: every solver
                   iteration launched, no conditional node (Warp pauses and resumes a capture
                   around each conditional node, which torch's allocator may not follow);

(mjrl's captured substep loop inserted as a child graph node was tried too, and refused on an
H100: "Child graph contains an unsupported operation (memory allocation)"; docs/benchmarks.md.)

Each way is checked against an eager twin (same seed, same rollouts before it) over three
replays, each followed by the twin's eager rollout: the largest difference of every buffer
field. The first replay repeats the capture's own Python decisions and inputs, so only the
later ones show env state kept outside the graph (a tensor rebound instead of written in
place, a Python counter) or memory reused under the graph. Only with `--deterministic`
(mujoco_warp's deterministic physics) can the replay equal its twin bit for bit on a GPU.
Prints one JSON line; on the CPU only the eager time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import torch
from common import build_runner, train_config

if TYPE_CHECKING:
    from mjrl.envs import Task
    from mjrl.rl.storage import Rollout
    from mjrl.runner.runner import Runner

Mode = Literal["inline", "inline-unrolled"]
MODES: tuple[Mode, ...] = ("inline", "inline-unrolled")
FIELDS = ("actor_obs", "critic_obs", "actions", "log_probs", "values", "rewards", "dones")
REPLAYS_CHECKED = 3


def build(task: Task, args: argparse.Namespace, mode: Mode | None, log_root: str) -> Runner:
    """A warm runner for `mode` (None: training's own configuration)."""
    sim = dataclasses.replace(task.env_cfg.sim, graph=mode is None, deterministic=args.deterministic)
    task = dataclasses.replace(task, env_cfg=dataclasses.replace(task.env_cfg, sim=sim))
    cfg = dataclasses.replace(train_config(task, args.num_envs, 1, log_root, args.device), seed=args.seed)
    torch.manual_seed(args.seed)
    runner = build_runner(task, cfg)
    if mode == "inline-unrolled":
        runner.env.sim.model.opt.graph_conditional = False
    return runner


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def eager_rollout(runner: Runner) -> None:
    runner.collect()
    runner.algorithm.storage.step.zero_()  # the next rollout writes the buffer again (no update)


def seconds_per_rollout(rollout: Callable[[], None], device: torch.device, rollouts: int) -> float:
    synchronize(device)
    start = time.perf_counter()
    for _ in range(rollouts):
        rollout()
    synchronize(device)
    return (time.perf_counter() - start) / rollouts


def capture_rollout(runner: Runner, mode: Mode) -> Callable[[], None]:
    """One rollout captured with torch.cuda.graph; returns its replay. The env's observations
    are the graph's input and output (`env.obs`, written in place)."""
    import warp as wp

    env, device = runner.env, runner.env.device

    def rollout() -> None:
        runner.collect()  # from and into `env.obs`, which the env writes in place
        runner.algorithm.storage.step.zero_()

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
    with torch.cuda.graph(graph):  # torch begins the capture in its "global" mode
        stream = env.sim.warp_stream()  # the object the steps' ScopedStream makes current
        mode_of_torch = wp.CaptureMode.GLOBAL
        with wp.ScopedCapture(device=env.sim.wp_device, stream=stream, external=True, capture_mode=mode_of_torch):
            rollout()
    return graph.replay


def largest_differences(a: Rollout, b: Rollout, so_far: dict[str, float]) -> dict[str, float]:
    out = {}
    for name in FIELDS:
        difference = (getattr(a, name) - getattr(b, name)).abs().max().item()
        out[name] = difference if math.isnan(difference) else max(difference, so_far.get(name, 0.0))
    return out


def error_text(exc: BaseException) -> str:
    """The error, and the one it followed: torch reports a failed capture as "operation failed
    due to a previous error during capture", the previous error being the one that tells."""
    text = f"{type(exc).__name__}: {exc}"
    cause = exc.__cause__ or exc.__context__
    if cause is not None:
        text += f" (after {type(cause).__name__}: {cause})"
    return text[:600]


def try_mode(task: Task, args: argparse.Namespace, mode: Mode, eager_s: float, log_root: str) -> dict:
    device = torch.device(args.device)
    try:
        graphed, twin = build(task, args, mode, log_root), build(task, args, mode, log_root)
        replay = capture_rollout(graphed, mode)  # ran the twin's second rollout
        eager_rollout(twin)
        differences: dict[str, float] = {}
        for _ in range(REPLAYS_CHECKED):
            replay()
            eager_rollout(twin)
            synchronize(device)
            differences = largest_differences(graphed.algorithm.storage, twin.algorithm.storage, differences)
        replay_s = seconds_per_rollout(replay, device, args.rollouts)
        return {
            "seconds_per_rollout": round(replay_s, 4),
            "speedup": round(eager_s / replay_s, 2),
            "max_difference_from_eager": {k: v if math.isfinite(v) else str(v) for k, v in differences.items()},
        }
    except Exception as exc:  # an experiment: report why this way failed and try the next
        return {"error": error_text(exc)}


def main() -> None:
    from mjrl.tasks import load_task

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="Mjrl-Velocity-Flat-Quadruped")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--rollouts", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--deterministic",
        action="store_true",
        help="mujoco_warp's deterministic mode: without it a GPU's contacts come in a varying order, so no "
        "replay equals its eager twin bit for bit",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    task = load_task(args.task)
    with tempfile.TemporaryDirectory() as log_root:
        runner = build(task, args, None, log_root)
        eager_s = seconds_per_rollout(lambda: eager_rollout(runner), runner.env.device, args.rollouts)
        steps = args.num_envs * runner.cfg.runner.num_steps_per_env
        result = {
            "task": args.task,
            "device": args.device,
            "num_envs": args.num_envs,
            "deterministic": args.deterministic,
            "eager": {"seconds_per_rollout": round(eager_s, 4), "env_steps_per_s": round(steps / eager_s)},
        }
        if runner.env.device.type == "cuda":
            del runner
            for mode in MODES:
                result[mode] = try_mode(task, args, mode, eager_s, log_root)
                print(json.dumps({mode: result[mode]}), flush=True)  # what came before a crash stays
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
