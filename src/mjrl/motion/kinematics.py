"""Joint angles to a full motion, by MuJoCo's forward kinematics on the CPU.

A robot's generalised positions over time (`qpos`: the free joint's position and quaternion,
then its hinge and slide joints) become every body's world pose by `mj_kinematics`, frame by
frame; velocities are finite differences (central inside the clip, one-sided at its ends), of
rotations through the quaternion that carries one frame's orientation to the next's.
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np

from mjrl.compat import MOVED_ROBOT_FILES
from mjrl.envs.robot import OWN_ROBOT, robot_file
from mjrl.errors import UsageError
from mjrl.motion.file import Motion


def robot_spec(robot: str) -> str:
    """How a robot is named in a motion file: one of mjrl's robots by its name (`humanoid` ->
    `mjrl:robots/humanoid.xml`), anything else as the MJCF path given."""
    if "/" not in robot and not robot.endswith(".xml"):
        return f"mjrl:robots/{robot}.xml"
    if robot.startswith(OWN_ROBOT):  # an older name of one of mjrl's robots: its name now
        name = robot.removeprefix(OWN_ROBOT)
        return OWN_ROBOT + MOVED_ROBOT_FILES.get(name, name)
    return robot


class RobotKinematics:
    """A robot's model for motions: which qpos columns are its root and its joints, and its
    bodies' poses for any qpos."""

    def __init__(self, robot: str) -> None:
        self.robot = robot_spec(robot)
        path = robot_file(self.robot)
        if not Path(path).is_file():
            raise UsageError(f"robot {robot!r}: no MJCF file {path}; name one of mjrl's robots or an .xml file")
        try:
            self.model = mujoco.MjModel.from_xml_path(str(path))
        except ValueError as exc:
            raise UsageError(f"robot {robot!r}: MuJoCo cannot load {path}: {str(exc).splitlines()[0]}") from None
        self.data = mujoco.MjData(self.model)
        m = self.model
        kinds = m.jnt_type.tolist()
        FREE, BALL = int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_BALL)
        MOVABLE = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
        free = [j for j in range(m.njnt) if kinds[j] == FREE]
        self.free_qpos = int(m.jnt_qposadr[free[0]]) if free else None
        """qpos address of the root's free joint; None for a fixed base."""
        if len(free) > 1 or (free and free[0] != 0) or BALL in kinds:
            raise UsageError(f"robot {robot!r}: motions take one free joint at the root and hinge or slide joints")
        movable = [j for j in range(m.njnt) if kinds[j] in MOVABLE]
        self.joint_names = tuple(m.joint(j).name for j in movable)
        self.joint_qpos = np.array([m.jnt_qposadr[j] for j in movable], dtype=np.int64)
        self.body_names = tuple(m.body(b).name for b in range(1, m.nbody))
        home = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "home")
        self.home_qpos = m.key_qpos[home].copy() if home >= 0 else m.qpos0.copy()
        """The standing pose (the `home` keyframe, else the model's reference pose)."""

    def qpos(self, root_pos: np.ndarray | None, root_quat: np.ndarray | None, joint_pos: np.ndarray) -> np.ndarray:
        """(F, nq) generalised positions from the root's position and w-x-y-z quaternion (None for
        a fixed base) and the joints' positions in `joint_names` order."""
        qpos = np.tile(self.home_qpos, (joint_pos.shape[0], 1))
        if self.free_qpos is not None:
            quat = root_quat / np.linalg.norm(root_quat, axis=1, keepdims=True)
            qpos[:, self.free_qpos : self.free_qpos + 7] = np.concatenate([root_pos, quat], axis=1)
        qpos[:, self.joint_qpos] = joint_pos
        return qpos

    def motion(self, qpos: np.ndarray, fps: float) -> Motion:
        """The motion whose frames are the rows of `qpos`, `fps` frames per second."""
        frames = qpos.shape[0]
        body_pos = np.empty((frames, self.model.nbody - 1, 3))
        body_quat = np.empty((frames, self.model.nbody - 1, 4))
        for i in range(frames):
            self.data.qpos[:] = qpos[i]
            mujoco.mj_kinematics(self.model, self.data)
            body_pos[i], body_quat[i] = self.data.xpos[1:], self.data.xquat[1:]
        body_quat = continuous_quaternions(body_quat)
        joint_pos = qpos[:, self.joint_qpos]
        dt = 1.0 / fps
        return Motion(
            fps=float(fps),
            robot=self.robot,
            joint_names=self.joint_names,
            body_names=self.body_names,
            joint_pos=joint_pos,
            joint_vel=np.gradient(joint_pos, dt, axis=0),
            body_pos=body_pos,
            body_quat=body_quat,
            body_lin_vel=np.gradient(body_pos, dt, axis=0),
            body_ang_vel=angular_velocity(body_quat, dt),
        ).validate()


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton products of w-x-y-z quaternions, broadcast over leading axes."""
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_conj(q: np.ndarray) -> np.ndarray:
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def continuous_quaternions(quat: np.ndarray) -> np.ndarray:
    """Each frame's quaternion (axis 0 is time) with the sign nearest the previous frame's: q and
    -q are the same rotation, and differences and interpolation need the near one."""
    out = quat.copy()
    for i in range(1, out.shape[0]):
        flip = (out[i] * out[i - 1]).sum(-1, keepdims=True) < 0
        out[i] = np.where(flip, -out[i], out[i])
    return out


def rotation_vector(q: np.ndarray) -> np.ndarray:
    """The axis times the angle (in (-pi, pi]) of w-x-y-z unit quaternions."""
    q = np.where(q[..., :1] < 0, -q, q)
    sin_half = np.linalg.norm(q[..., 1:], axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(sin_half, q[..., :1])
    scale = np.where(sin_half > 1e-12, angle / np.maximum(sin_half, 1e-12), 2.0)
    return q[..., 1:] * scale


def angular_velocity(quat: np.ndarray, dt: float) -> np.ndarray:
    """World angular velocities of orientations sampled every `dt` (axis 0 is time): central
    differences inside, one-sided at the ends, as `np.gradient` does for positions."""
    omega = np.empty((*quat.shape[:-1], 3))
    central = quat_mul(quat[2:], quat_conj(quat[:-2]))
    omega[1:-1] = rotation_vector(central) / (2.0 * dt)
    omega[0] = rotation_vector(quat_mul(quat[1], quat_conj(quat[0]))) / dt
    omega[-1] = rotation_vector(quat_mul(quat[-1], quat_conj(quat[-2]))) / dt
    return omega


def slerp(q0: np.ndarray, q1: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Spherical interpolation between rows of unit quaternions, `t` in [0, 1] per row."""
    dot = (q0 * q1).sum(-1, keepdims=True)
    q1 = np.where(dot < 0, -q1, q1)
    dot = np.abs(dot).clip(max=1.0)
    theta = np.arccos(dot)
    t = t[:, None]
    small = theta < 1e-6
    sin_theta = np.where(small, 1.0, np.sin(theta))
    w0 = np.where(small, 1.0 - t, np.sin((1.0 - t) * theta) / sin_theta)
    w1 = np.where(small, t, np.sin(t * theta) / sin_theta)
    out = w0 * q0 + w1 * q1
    return out / np.linalg.norm(out, axis=-1, keepdims=True)


def resample_qpos(qpos: np.ndarray, fps_in: float, fps_out: float, free_qpos: int | None) -> np.ndarray:
    """`qpos` sampled at `fps_in` resampled at `fps_out` over the same span (its last frame at or
    before the input's last): positions and joint angles linearly, the root's rotation by slerp."""
    if fps_in == fps_out:
        return qpos.copy()
    duration = (qpos.shape[0] - 1) / fps_in
    times = np.arange(int(np.floor(duration * fps_out + 1e-9)) + 1) / fps_out
    position = times * fps_in
    low = np.minimum(np.floor(position + 1e-9).astype(np.int64), qpos.shape[0] - 1)
    high = np.minimum(low + 1, qpos.shape[0] - 1)
    frac = np.clip(position - low, 0.0, 1.0)
    out = qpos[low] + (qpos[high] - qpos[low]) * frac[:, None]
    if free_qpos is not None:
        quat = slice(free_qpos + 3, free_qpos + 7)
        out[:, quat] = slerp(qpos[low, quat], qpos[high, quat], frac)
    return out
