"""What the tracking terms share, each computed once per state (`env.cached`): the motion
library, the robot's tracked bodies, and the reference bodies carried over to the robot.

BeyondMimic's relative reference: the reference's bodies are moved so that its anchor stands
where the robot's anchor stands (horizontally; at the reference's own height) and turned by the
difference of their headings. Body poses are then tracked relative to the robot's anchor, so a
robot that drifted a little in the world is not paid less for the right pose; the anchor itself
is tracked in the world.
"""

from __future__ import annotations

import torch

from mjrl.envs import VecEnv
from mjrl.envs.terms import quat_apply, quat_conj, quat_mul, yaw_quat
from mjrl.tasks.tracking.library import MotionLibrary, Reference

MOTION = "motion"
"""The library's name among the env's components."""


def library(env: VecEnv) -> MotionLibrary:
    return env.components[MOTION]


def reference(env: VecEnv) -> Reference:
    """The reference at each env's current frame."""
    return library(env).reference


def robot_bodies(env: VecEnv) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, bodies, 3) world positions and (n, bodies, 4) orientations of the tracked bodies."""
    ids = library(env).body_ids
    return env.sim.xpos.index_select(1, ids), env.sim.xquat.index_select(1, ids)


def robot_anchor(env: VecEnv) -> tuple[torch.Tensor, torch.Tensor]:
    """The robot's anchor body: (n, 3) position and (n, 4) orientation."""
    pos, quat = env.cached(robot_bodies)
    anchor = library(env).anchor
    return pos[:, anchor], quat[:, anchor]


def reference_anchor(env: VecEnv) -> tuple[torch.Tensor, torch.Tensor]:
    ref, anchor = reference(env), library(env).anchor
    return ref.body_pos[:, anchor], ref.body_quat[:, anchor]


def relative_reference(env: VecEnv) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference's bodies carried over to the robot's anchor: (n, bodies, 3) positions and
    (n, bodies, 4) orientations in the world."""
    ref = reference(env)
    robot_pos, robot_quat = env.cached(robot_anchor)
    ref_pos, ref_quat = env.cached(reference_anchor)
    turn = yaw_quat(quat_mul(robot_quat, quat_conj(ref_quat))).unsqueeze(1)
    origin = torch.cat([robot_pos[:, :2], ref_pos[:, 2:]], dim=1).unsqueeze(1)
    bodies = ref.body_pos.shape[1]
    turn = turn.expand(-1, bodies, -1)
    positions = origin + quat_apply(turn, ref.body_pos - ref_pos.unsqueeze(1))
    return positions, quat_mul(turn, ref.body_quat)


def reference_qpos(env: VecEnv) -> torch.Tensor:
    """(n, nq) the robot's position coordinates with the reference's root pose and joints at
    each env's frame: the ghost a video draws over the robot (`TaskSpec.video_ghost`)."""
    lib, base = library(env), env.robot.base_qpos
    qpos = env.sim.qpos.clone()
    qpos[:, base : base + 3] = lib.frames["root_pos"][lib.frame]
    qpos[:, base + 3 : base + 7] = lib.frames["root_quat"][lib.frame]
    qpos[:, env.robot.joint_qpos] = lib.reference.joint_pos
    return qpos
