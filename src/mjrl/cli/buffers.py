"""`mjrl buffers TASK [--num-envs 64] [--steps 500] [--env.* ...]`: the most contacts and
constraint rows the task's worlds hold, against the buffers it allocates (`mjrl.tools.buffers`)."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import ClassVar, Generic, TypeVar

from mjrl.cli.common import parse_flags, pop_task, run_command

EnvT = TypeVar("EnvT")
USAGE = "usage: mjrl buffers TASK [--num-envs N] [--steps STEPS] [--env.* ...]"


@dataclasses.dataclass(frozen=True)
class BuffersConfig(Generic[EnvT]):
    """Measure the contact and constraint buffers a task needs, on the CPU: the peaks over
    `--steps` env steps of random actions, and with every robot thrown onto the ground (an upper
    bound), against the task's `nconmax` (contacts per world, pooled over all worlds) and `njmax`
    (constraint rows in any one world). Exit code 1 when random actions overflow the task's buffers
    (a training would drop contacts); a thrown robot's overflow is reported, not failed."""

    env: EnvT
    """The task's env; `--env.sim.nconmax N --env.sim.njmax M` try other buffer sizes."""
    num_envs: int = 64
    """Worlds stepped side by side."""
    steps: int = 500
    """Env steps measured in each of the two settings."""
    seed: int = 0
    """Seed of the random actions, poses and resets."""

    bounds: ClassVar[dict] = {"num_envs": ">= 1", "steps": ">= 1"}
    """Ranges of the numeric fields (see `mjrl.config.check_numbers`)."""


def _buffers(argv: list[str]) -> int:
    args = list(argv)
    task = pop_task(args, USAGE)
    if task is None:
        return 0 if args else 2
    prog = f"mjrl buffers {task.name}"
    cfg = parse_flags(BuffersConfig[type(task.env_cfg)], BuffersConfig(env=task.env_cfg), args, prog,
                      BuffersConfig.__doc__ or "")  # fmt: skip
    from mjrl.config import check_numbers

    check_numbers(cfg)
    import torch

    from mjrl.tools.buffers import buffer_use, probe_sizes, verdict

    torch.set_num_threads(1)
    sim, env_cfg = cfg.env.sim, dataclasses.replace(cfg.env, num_envs=cfg.num_envs)
    probe = dict(zip(("nconmax", "njmax"), probe_sizes(sim), strict=True))
    line = {"task": task.name, "num_envs": cfg.num_envs, "steps": cfg.steps, "nconmax": sim.nconmax,
            "njmax": sim.njmax, "measured_with": probe}  # fmt: skip
    for name, tumble in (("random_actions", False), ("thrown", True)):
        peaks = buffer_use(task, env_cfg, cfg.steps, tumble, cfg.seed)
        line[name] = peaks and {**peaks, **verdict(peaks, sim)}
        print(_summary(name, line[name], sim))
    print(json.dumps(line), flush=True)
    random_actions = line["random_actions"]
    return 1 if False in (random_actions["contacts_fit"], random_actions["rows_fit"]) else 0


def _summary(name: str, peaks: dict | None, sim) -> str:
    what = name.replace("_", " ")
    if peaks is None:
        return f"{what}: no free base to throw"
    fits = {True: "fits", False: "OVERFLOWS", None: "sized by mujoco_warp"}
    whole = "" if peaks["measured_whole"] else " (the measuring buffers overflowed too: lower bounds)"
    return (
        f"{what}: {peaks['max_contacts_per_world_on_average']} contacts per world on average "
        f"(nconmax {sim.nconmax}: {fits[peaks['contacts_fit']]}), {peaks['max_contacts_in_a_world']} in one world; "
        f"{peaks['max_constraint_rows_in_a_world']} constraint rows in one world "
        f"(njmax {sim.njmax}: {fits[peaks['rows_fit']]}){whole}"
    )


def main(argv: list[str] | None = None) -> int:
    return run_command("mjrl buffers", _buffers, argv)


if __name__ == "__main__":
    sys.exit(main())
