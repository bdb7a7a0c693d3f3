"""Reward terms of the tracking task: exponential kernels exp(-error² / std²) of the anchor's
error in the world and of the bodies' errors relative to the anchor (BeyondMimic's)."""

from __future__ import annotations

import torch

from mjrl.envs import VecEnv
from mjrl.envs.terms import quat_angle
from mjrl.tasks.tracking.reference import (
    library,
    reference,
    reference_anchor,
    relative_reference,
    robot_anchor,
    robot_bodies,
)


def _kernel(squared_error: torch.Tensor, std: float) -> torch.Tensor:
    return torch.exp(-squared_error / (std * std))


def anchor_pos(env: VecEnv, std: float) -> torch.Tensor:
    robot_pos, _ = env.cached(robot_anchor)
    ref_pos, _ = env.cached(reference_anchor)
    return _kernel(((ref_pos - robot_pos) ** 2).sum(dim=1), std)


def anchor_ori(env: VecEnv, std: float) -> torch.Tensor:
    _, robot_quat = env.cached(robot_anchor)
    _, ref_quat = env.cached(reference_anchor)
    return _kernel(quat_angle(ref_quat, robot_quat) ** 2, std)


def body_pos(env: VecEnv, std: float) -> torch.Tensor:
    target, _ = env.cached(relative_reference)
    pos, _ = env.cached(robot_bodies)
    return _kernel(((target - pos) ** 2).sum(dim=2).mean(dim=1), std)


def body_ori(env: VecEnv, std: float) -> torch.Tensor:
    _, target = env.cached(relative_reference)
    _, quat = env.cached(robot_bodies)
    return _kernel((quat_angle(target, quat) ** 2).mean(dim=1), std)


def body_lin_vel(env: VecEnv, std: float) -> torch.Tensor:
    error = reference(env).body_lin_vel - library(env).body_lin_vel
    return _kernel((error**2).sum(dim=2).mean(dim=1), std)


def body_ang_vel(env: VecEnv, std: float) -> torch.Tensor:
    error = reference(env).body_ang_vel - library(env).body_ang_vel
    return _kernel((error**2).sum(dim=2).mean(dim=1), std)
