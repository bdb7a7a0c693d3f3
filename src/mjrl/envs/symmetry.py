"""Left-right symmetry of a task: whether its observations and actions can be mirrored
(`symmetry_problem`, from its spec), and the column mirrors of a built env (`env_mirrors`),
which symmetry augmentation and the mirror loss apply."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from mjrl.envs.robot import Robot
from mjrl.envs.spec import TaskSpec
from mjrl.mirror import ColumnMirror

if TYPE_CHECKING:
    from mjrl.envs.env import VecEnv


def symmetry_problem(spec: TaskSpec) -> str | None:
    """Why the task cannot be mirrored left-right, or None if it can: every observation term and
    the actions must say how they mirror, and a robot must name its left and right parts."""
    terms = [f"{group}.{name}" for group, ts in spec.observations.items() for name, t in ts.items() if t.mirror is None]
    if spec.action_mirror is None or terms:
        return f"it does not say how {', '.join(terms) or 'its actions'} mirror"
    if spec.robot is not None:
        if not spec.robot.mirror_names:
            return "its robot config has no mirror_names"
        model, _ = spec.scene.build()
        return Robot.resolve(model, spec.robot, torch.device("cpu")).mirror_error
    return None


def env_mirrors(env: VecEnv) -> tuple[dict[str, ColumnMirror] | None, str | None]:
    """How each observation group and the actions ("actions") of `env` mirror, None when the
    task does not declare it for every term or the robot is not symmetric; and why a declared
    mirror does not hold (only a run with symmetry needs them: it is told), else None."""
    task = env.task
    # (name, mirror function, width, history) of the actions and of each group's terms.
    parts = {"actions": [("the actions", task.action_mirror, env.num_actions, 1)]}
    for group, terms in task.observations.items():
        parts[group] = [
            (f"observation {group}.{name}", t.mirror, env.cached(t.func).shape[-1], t.history)
            for name, t in terms.items()
        ]
    mirrors = {}
    for key, entries in parts.items():
        pieces = []
        for what, mirror_fn, width, history in entries:
            if mirror_fn is None:
                return None, None
            try:
                mirror = mirror_fn(env, width)
                if mirror is None:  # this robot is not symmetric
                    return None, None
                if mirror.width != width:
                    raise ValueError(f"{what}: a mirror of {mirror.width} columns for {width}")
                mirror.check(what)
            except ValueError as exc:
                return None, str(exc)
            pieces.append(mirror.repeat(history))
        mirrors[key] = ColumnMirror.concat(pieces).to(env.device)
    return mirrors, None
