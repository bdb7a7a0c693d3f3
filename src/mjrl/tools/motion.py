"""A trained policy's play recorded as a motion (`mjrl motion record`), and what a motion file
holds (`mjrl motion info`).

A recording is the first env's state at each control step of the deterministic policy, from a
reset, mapped onto the robot's own MJCF (joints the task locked stay at their home angles) and
made a full motion by forward kinematics.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mjrl.errors import UsageError
from mjrl.motion import Motion, RobotKinematics

if TYPE_CHECKING:
    from mjrl.envs import VecEnv


def record_motion(env: VecEnv, policy, seconds: float) -> Motion:
    """`seconds` of env 0 under the deterministic `policy`, from a reset, as a motion of the
    robot's MJCF. An episode that ends before is refused: a reset would teleport the robot."""
    from mjrl.tools.video import record_states

    if env.task.robot is None:
        raise UsageError("this task has no robot config: only a robot's play is recorded as a motion")
    kinematics = RobotKinematics(env.task.robot.mjcf)
    columns = _qpos_columns(env, kinematics)
    steps = max(2, round(seconds / env.step_dt) + 1)
    # The video's states begin with qpos (a task's ghost, if any, follows it).
    states = record_states(env, policy, steps, until_episode_end=True)[:, : env.sim.qpos.shape[1]]
    if len(states) < steps:
        raise UsageError(
            f"the episode ended after {len(states) * env.step_dt:.2f} s of the {seconds:g} s asked for; "
            "record a shorter motion, or with commands the policy follows"
        )
    sim_qpos = states.astype(np.float64)
    qpos = np.tile(kinematics.home_qpos, (steps, 1))
    qpos[:, columns[1]] = sim_qpos[:, columns[0]]
    return kinematics.motion(qpos, 1.0 / env.step_dt)


def _qpos_columns(env: VecEnv, kinematics: RobotKinematics) -> tuple[np.ndarray, np.ndarray]:
    """Which columns of the env's qpos go to which of the robot's own, by joint name."""
    import mujoco

    model, own = env.sim.mj_model, kinematics.model
    source, target = [], []
    for j in range(model.njnt):
        name = model.joint(j).name
        k = mujoco.mj_name2id(own, mujoco.mjtObj.mjOBJ_JOINT, name)
        if k < 0:
            raise UsageError(f"the task's joint {name!r} is not in {kinematics.robot}")
        width = {int(mujoco.mjtJoint.mjJNT_FREE): 7, int(mujoco.mjtJoint.mjJNT_BALL): 4}.get(int(model.jnt_type[j]), 1)
        source += range(model.jnt_qposadr[j], model.jnt_qposadr[j] + width)
        target += range(own.jnt_qposadr[k], own.jnt_qposadr[k] + width)
    return np.array(source), np.array(target)


def describe_motion(motion: Motion, path: Path) -> str:
    """What `mjrl motion info` prints: length, rate, the robot it fits, its joints and bodies,
    and how far and how low its root goes."""
    root = motion.body_pos[:, 0]
    travel = np.linalg.norm(root[-1, :2] - root[0, :2])
    lines = [
        f"{path}: {motion.num_frames} frames at {motion.fps:g} fps = {motion.duration_s:.2f} s",
        f"robot: {motion.robot}",
        f"joints ({len(motion.joint_names)}): {', '.join(motion.joint_names)}",
        f"bodies ({len(motion.body_names)}): {', '.join(motion.body_names)}",
        f"root ({motion.body_names[0]}): height {root[:, 2].min():.3f} to {root[:, 2].max():.3f} m, "
        f"{travel:.2f} m from start to end in the plane",
        f"joint speed: up to {np.abs(motion.joint_vel).max():.2f} (rad or m)/s",
    ]
    return "\n".join(lines)
