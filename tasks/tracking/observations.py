"""Observation terms of the tracking task: the reference the policy follows (its joints, and
where its anchor is from the robot's), and, for the critic, the robot's bodies relative to its
anchor (BeyondMimic's)."""

from __future__ import annotations

import torch

from mjrl.envs import VecEnv
from mjrl.envs.terms import quat_apply_inverse, quat_conj, quat_mul, rotation_columns
from mjrl.tasks.tracking.reference import reference, reference_anchor, robot_anchor, robot_bodies


def motion_command(env: VecEnv) -> torch.Tensor:
    """The reference's joint positions and velocities at this step: what a deployed policy is
    given each step."""
    ref = reference(env)
    return torch.cat([ref.joint_pos, ref.joint_vel], dim=1)


def anchor_pos_error(env: VecEnv) -> torch.Tensor:
    """Where the reference's anchor is, in the robot's anchor frame (m)."""
    robot_pos, robot_quat = env.cached(robot_anchor)
    ref_pos, _ = env.cached(reference_anchor)
    return quat_apply_inverse(robot_quat, ref_pos - robot_pos)


def anchor_ori_error(env: VecEnv) -> torch.Tensor:
    """The reference anchor's orientation in the robot's anchor frame, as two matrix columns."""
    _, robot_quat = env.cached(robot_anchor)
    _, ref_quat = env.cached(reference_anchor)
    return rotation_columns(quat_mul(quat_conj(robot_quat), ref_quat))


def body_positions(env: VecEnv) -> torch.Tensor:
    """The robot's tracked bodies in its anchor frame (m), flattened."""
    pos, _ = env.cached(robot_bodies)
    anchor_pos, anchor_quat = env.cached(robot_anchor)
    bodies = pos.shape[1]
    local = quat_apply_inverse(anchor_quat.unsqueeze(1).expand(-1, bodies, -1), pos - anchor_pos.unsqueeze(1))
    return local.flatten(1)


def body_orientations(env: VecEnv) -> torch.Tensor:
    """The robot's tracked bodies' orientations in its anchor frame, two matrix columns each."""
    _, quat = env.cached(robot_bodies)
    _, anchor_quat = env.cached(robot_anchor)
    relative = quat_mul(quat_conj(anchor_quat).unsqueeze(1).expand_as(quat), quat)
    return rotation_columns(relative).flatten(1)
