"""Physics launched kernel by kernel (`--env.sim.graph False`, or a GPU without graph support):
what the solver's loop costs with mujoco_warp's `opt.graph_conditional` on (its `capture_while`
runs only the iterations needed, reading a flag back to the host after each) and off (every
one of `opt.iterations` iterations launched, nothing read back).

    python scripts/bench_solver_loop.py [--device cuda] [--num-worlds 4096] [--steps 20]

Prints milliseconds per env step (all substeps) for both settings and the solver iterations
actually used. mjrl keeps the flag on when it does not capture; this checks that choice on a GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch
import warp as wp

from mjrl.sim import Simulation
from mjrl.tasks import load_task


def ms_per_step(sim: Simulation, steps: int) -> float:
    for _ in range(3):  # compiles the kernels
        sim.step()
    if sim.device.type == "cuda":
        torch.cuda.synchronize(sim.device)
    start = time.perf_counter()
    for _ in range(steps):
        sim.step()
    if sim.device.type == "cuda":
        torch.cuda.synchronize(sim.device)
    return 1e3 * (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="Mjrl-Velocity-Flat-Quadruped")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--num-worlds", type=int, default=16)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    task = load_task(args.task)
    spec = task.build(task.env_cfg)
    cfg = dataclasses.replace(task.env_cfg.sim, graph=False)
    for conditional in (True, False):
        sim = Simulation(spec.scene.build()[0], args.num_worlds, args.device, cfg)
        sim.model.opt.graph_conditional = conditional
        ms = ms_per_step(sim, args.steps)
        used = wp.to_torch(sim.data.solver_niter).float().mean().item()
        print(
            f"graph_conditional {conditional!s:5}: {ms:8.2f} ms per env step "
            f"({sim.cfg.decimation} substeps, solver iterations used {used:.1f} of {sim.model.opt.iterations})"
        )


if __name__ == "__main__":
    main()
