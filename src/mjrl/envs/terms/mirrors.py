"""Mirror images of observations and actions (symmetry): columns that swap or change sign."""

from __future__ import annotations

import torch

from mjrl.envs.env import VecEnv
from mjrl.envs.spec import MirrorFn
from mjrl.mirror import ColumnMirror

# A term declares how its columns mirror when the robot is reflected in its x-z plane (left and
# right swap); see `ObsTerm.mirror`. A mirror function returns None when this robot cannot be
# mirrored (its config names no symmetry), and the task then has none.


def unchanged(env: VecEnv, width: int) -> ColumnMirror:
    """Columns that mirroring leaves alone: heights, masses, friction, forward quantities."""
    return ColumnMirror.identity(width)


def mirror_signs(*signs: float) -> MirrorFn:
    """Columns that stay in place and are multiplied by `signs`."""

    def mirror(env: VecEnv, width: int) -> ColumnMirror:
        return ColumnMirror(torch.arange(len(signs)), torch.tensor(signs, dtype=torch.float32))

    return mirror


POLAR_VECTOR = mirror_signs(1, -1, 1)
"""A velocity or direction in the base frame: its lateral component flips."""
AXIAL_VECTOR = mirror_signs(-1, 1, -1)
"""An angular velocity in the base frame: roll and yaw rates flip, the pitch rate stays."""


def mirror_joints(env: VecEnv, width: int) -> ColumnMirror | None:
    """Per-joint columns in action order: left and right swap, joints turning about x or z flip."""
    return env.robot.joint_mirror


def mirror_feet(env: VecEnv, width: int) -> ColumnMirror | None:
    """Per-foot columns: left and right feet swap."""
    return env.robot.foot_mirror
