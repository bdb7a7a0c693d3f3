"""`mjrl kernels [--tasks T ...] [--num-envs N] [--device D] [--compile off|step|update|all]`:
count the kernels an env step, a rollout step and a PPO minibatch step launch (`mjrl.tools.kernels`)."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import ClassVar, Literal

from mjrl.cli.common import parse_flags, run_command


@dataclasses.dataclass(frozen=True)
class KernelsConfig:
    """Count the kernels launched per env step, per rollout step (env and policy) and per PPO
    minibatch step, whoever launches them (torch, Warp, inductor's C++, the GPU's graphs): one
    JSON line per task and phase. Outside the physics each small kernel costs a launch, which at
    thousands of envs bounds the loop (docs/benchmarks.md, "Kernels per step")."""

    tasks: tuple[str, ...] = ()
    """Tasks to count (default: every registered task)."""
    num_envs: int = 64
    """Envs per task."""
    device: str = "cpu"
    """cpu counts torch's dispatched operations and Warp's launches; cuda uses torch's profiler
    (CUPTI), which sees every launch."""
    steps: int = 24
    """Env steps counted per phase (one rollout)."""
    top: int = 0
    """Also give the N most frequent kernels of each phase."""
    compile: Literal["off", "step", "update", "all"] = "off"
    """As `--runner.compile`: compiled code is counted through torch's profiler."""

    bounds: ClassVar[dict] = {"num_envs": ">= 1", "steps": ">= 1", "top": ">= 0"}
    """Ranges of the numeric fields (see `mjrl.config.check_numbers`)."""


def _kernels(argv: list[str]) -> int:
    import torch

    from mjrl.config import check_numbers
    from mjrl.tasks import load_task, task_names
    from mjrl.tools.kernels import measure

    cfg = parse_flags(KernelsConfig, KernelsConfig(), argv, "mjrl kernels", KernelsConfig.__doc__ or "")
    check_numbers(cfg)
    tasks = cfg.tasks or tuple(task_names())
    for name in tasks:
        load_task(name)  # an unknown task is refused before any counting
    torch.set_num_threads(1)
    if cfg.compile != "off":
        from torch._inductor import config as inductor_config

        inductor_config.cpp.enable_kernel_profile = True  # the profiler sees each C++ kernel
    for name in tasks:
        for line in measure(name, cfg.num_envs, cfg.device, cfg.steps, cfg.top, cfg.compile):
            print(json.dumps(line), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command("mjrl kernels", _kernels, argv)


if __name__ == "__main__":
    sys.exit(main())
