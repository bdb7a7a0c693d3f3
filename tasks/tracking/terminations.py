"""Termination terms of the tracking task: the robot strayed from the reference (BeyondMimic's
bounds), or its clip ended (a time-out)."""

from __future__ import annotations

import torch

from mjrl.envs import VecEnv
from mjrl.tasks.tracking.reference import library, reference, reference_anchor, robot_anchor, robot_bodies


def motion_end(env: VecEnv) -> torch.Tensor:
    """The reference reached its clip's last frame."""
    lib = library(env)
    return lib.frame >= lib.last


def anchor_height(env: VecEnv, bound: float) -> torch.Tensor:
    robot_pos, _ = env.cached(robot_anchor)
    ref_pos, _ = env.cached(reference_anchor)
    return (ref_pos[:, 2] - robot_pos[:, 2]).abs() > bound


def _gravity_z(quat: torch.Tensor) -> torch.Tensor:
    """The z component of the unit gravity vector (0, 0, -1) seen from the frame `quat`: minus
    the rotation matrix's bottom-right entry, 1 - 2 (x² + y²)."""
    return 2.0 * (quat[:, 1] ** 2 + quat[:, 2] ** 2) - 1.0


def anchor_tilt(env: VecEnv, bound: float) -> torch.Tensor:
    """The z component of gravity seen from the anchor differs from the reference's by more."""
    _, robot_quat = env.cached(robot_anchor)
    _, ref_quat = env.cached(reference_anchor)
    return (_gravity_z(ref_quat) - _gravity_z(robot_quat)).abs() > bound


def end_effector_height(env: VecEnv, bound: float) -> torch.Tensor:
    """An end effector's height differs from the reference's by more (the relative reference
    keeps the reference's heights)."""
    effectors = library(env).end_effectors
    pos, _ = env.cached(robot_bodies)
    ref = reference(env).body_pos
    return ((ref[:, effectors, 2] - pos[:, effectors, 2]).abs() > bound).any(dim=1)
