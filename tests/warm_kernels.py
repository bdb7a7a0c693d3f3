"""Compile the Warp kernels of the tasks the suite trains, each task once, before its workers
start (`scripts/test.sh`).

From a cold kernel cache every process that builds a task compiles its kernels, and the suite's
first tests are its multi-process ones: two workers each starting two ranks of the cart-pole
compiled the same kernels four times over on two cores. Built here, one process per task and as
many at a time as there are workers, each is compiled once; a warm cache makes this a few seconds.

    python tests/warm_kernels.py [--jobs N] [TASK ...]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import subprocess
import sys
import time

# Longest first, so that the last one to start is a short one. Both cart-poles share one model,
# the tracking humanoid the humanoid's kernels.
TASKS = (
    "Mjrl-Velocity-Flat-Humanoid",
    "Mjrl-Velocity-Rough-Quadruped",
    "Mjrl-Velocity-Flat-Quadruped",
    "Mjrl-Cartpole-Balance",
    "Mjrl-Tracking-Flat-Humanoid",
    "Mjrl-Velocity-Flat-Mule",
)

BUILD = """
import dataclasses, sys, torch
from mjrl.envs import VecEnv
from mjrl.tasks import load_task
task = load_task(sys.argv[1])
cfg = dataclasses.replace(task.env_cfg, num_envs=2)
env = VecEnv(cfg, task.build(cfg), torch.device("cpu"), seed=0)
env.step(torch.zeros(2, env.num_actions))
"""


def build(task: str) -> tuple[str, float, str]:
    """Build `task`'s env in a process of its own and step it once; (task, seconds, errors)."""
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", BUILD, task], capture_output=True, text=True, timeout=600)
    return task, time.perf_counter() - start, result.stderr[-2000:] if result.returncode else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="processes at a time (the suite's workers)")
    parser.add_argument("tasks", nargs="*", default=TASKS)
    args = parser.parse_args()
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(build, args.tasks))
    for task, seconds, errors in results:
        if errors:  # the tests that build it will fail and say why; this only warms the cache
            print(f"warm_kernels: {task} failed after {seconds:.0f} s:\n{errors}", file=sys.stderr)
    times = ", ".join(f"{task} {seconds:.0f} s" for task, seconds, _ in results)
    print(f"warm_kernels: {len(results)} tasks in {time.perf_counter() - start:.0f} s ({times})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
