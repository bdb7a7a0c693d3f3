"""Task registry: task name -> the module attribute that defines it, and a one-line summary.

Tasks are imported only when asked for, so listing them (and rejecting an unknown name) costs
no simulator import.
"""

from __future__ import annotations

import importlib

from mjrl.errors import UsageError

TASKS: dict[str, tuple[str, str]] = {
    "Mjrl-Cartpole-Balance": ("mjrl.tasks.cartpole:BALANCE", "keep a pole upright on a cart (dm_control reward)"),
    "Mjrl-Cartpole-Swingup": ("mjrl.tasks.cartpole:SWINGUP", "swing a hanging pole up, then balance it"),
    "Mjrl-Velocity-Flat-Quadruped": ("mjrl.tasks.velocity.go1:VELOCITY_FLAT", "Go1-class quadruped, velocity tracking"),
    "Mjrl-Velocity-Flat-Mule": ("mjrl.tasks.velocity.mule:VELOCITY_FLAT_MULE", "44 kg quadruped, velocity tracking"),
    "Mjrl-Velocity-Rough-Quadruped": (
        "mjrl.tasks.velocity.go1:VELOCITY_ROUGH",
        "Go1-class quadruped on stairs, slopes and rough ground, with a terrain curriculum",
    ),
    "Mjrl-Velocity-Rough-Mule": ("mjrl.tasks.velocity.mule:VELOCITY_ROUGH_MULE", "44 kg quadruped on the same terrain"),
    "Mjrl-Velocity-Flat-Humanoid": (
        "mjrl.tasks.velocity.humanoid:VELOCITY_FLAT_HUMANOID",
        "G1-class 23-DoF humanoid, velocity tracking (CPU preset: configs/cpu-humanoid.yaml, legs only)",
    ),
    "Mjrl-Velocity-Flat-Quadruped-Student": (
        "mjrl.tasks.velocity.go1:VELOCITY_FLAT_STUDENT",
        "the flat Go1 without base velocity, distilled from a trained teacher (--distillation.teacher RUN)",
    ),
}


def task_names() -> list[str]:
    return sorted(TASKS)


def describe_tasks() -> str:
    width = max(map(len, TASKS))
    return "\n".join(f"  {name:<{width}}  {TASKS[name][1]}" for name in task_names())


def load_task(name: str):
    """The `mjrl.tasks.base.Task` registered as `name`; a UsageError names the valid ones."""
    if name not in TASKS:
        raise UsageError(f"unknown task {name!r}; valid tasks: {', '.join(task_names())}")
    module, attr = TASKS[name][0].split(":")
    return getattr(importlib.import_module(module), attr)
