"""The motion file: one NPZ of a robot's joints and bodies at a fixed rate.

Keys (F frames, J joints, B bodies; float32 unless said):
    format          int, `FORMAT_VERSION`
    fps             frames per second (> 0)
    robot           the MJCF it was made for, as a robot config names it (`mjrl:robots/humanoid.xml`)
    joint_names     (J,) str: the robot's hinge and slide joints, in the model's order
    body_names      (B,) str: the robot's bodies in the model's order (the world excluded), so the
                    first is the root of a floating robot
    joint_pos       (F, J) rad or m
    joint_vel       (F, J) rad/s or m/s
    body_pos        (F, B, 3) world positions, m
    body_quat       (F, B, 4) world orientations, w x y z (MuJoCo's order)
    body_lin_vel    (F, B, 3) world linear velocities, m/s
    body_ang_vel    (F, B, 3) world angular velocities, rad/s

mjlab's and BeyondMimic's files hold the same arrays (`body_pos_w` and so on), without the names.
"""

from __future__ import annotations

import dataclasses
import os
import zipfile
import zlib
from pathlib import Path

import numpy as np

from mjrl.envs.robot import robot_file
from mjrl.errors import UsageError
from mjrl.files import atomic_target, make_dirs

FORMAT_VERSION = 1
ARRAYS = ("joint_pos", "joint_vel", "body_pos", "body_quat", "body_lin_vel", "body_ang_vel")


@dataclasses.dataclass(frozen=True)
class Motion:
    """A motion in memory: the file's arrays (numpy), checked by `validate`."""

    fps: float
    robot: str
    joint_names: tuple[str, ...]
    body_names: tuple[str, ...]
    joint_pos: np.ndarray
    joint_vel: np.ndarray
    body_pos: np.ndarray
    body_quat: np.ndarray
    body_lin_vel: np.ndarray
    body_ang_vel: np.ndarray

    @property
    def num_frames(self) -> int:
        return int(self.joint_pos.shape[0])

    @property
    def duration_s(self) -> float:
        """From the first frame to the last."""
        return (self.num_frames - 1) / self.fps

    def validate(self, source: str = "motion") -> Motion:
        """Itself, or a UsageError naming what is wrong."""
        frames, joints, bodies = self.num_frames, len(self.joint_names), len(self.body_names)
        if not (np.isfinite(self.fps) and self.fps > 0):
            raise UsageError(f"{source}: fps is {self.fps}; it must be a number > 0")
        if frames < 2:
            raise UsageError(f"{source}: {frames} frame(s); a motion needs at least 2")
        for names, kind in ((self.joint_names, "joint"), (self.body_names, "body")):
            if len(set(names)) != len(names):
                raise UsageError(f"{source}: a {kind} name appears twice")
        shapes = {
            "joint_pos": (frames, joints),
            "joint_vel": (frames, joints),
            "body_pos": (frames, bodies, 3),
            "body_quat": (frames, bodies, 4),
            "body_lin_vel": (frames, bodies, 3),
            "body_ang_vel": (frames, bodies, 3),
        }
        for key, shape in shapes.items():
            value = getattr(self, key)
            if value.shape != shape:
                raise UsageError(f"{source}: {key} has shape {value.shape}, expected {shape}")
            if not np.isfinite(value).all():
                frame = int(np.argwhere(~np.isfinite(value))[0][0])
                raise UsageError(f"{source}: {key} is not finite at frame {frame}")
        # Orientations are unit quaternions: a scaled one would train the tracking task on
        # orientations no body can take.
        norms = np.linalg.norm(self.body_quat, axis=-1)
        if bodies and np.abs(norms - 1.0).max() > QUAT_NORM_TOLERANCE:
            frame, body = (int(i) for i in np.argwhere(np.abs(norms - 1.0) > QUAT_NORM_TOLERANCE)[0])
            raise UsageError(
                f"{source}: body_quat of {self.body_names[body]} at frame {frame} has norm {norms[frame, body]:.4g}, "
                "not 1; body orientations must be unit quaternions (w, x, y, z)"
            )
        return self


QUAT_NORM_TOLERANCE = 1e-3
"""How far from 1 a body quaternion's norm may be (float32 rounding is about 1e-7)."""


def save_motion(motion: Motion, path: Path) -> None:
    """Write `motion` to `path` atomically (no half-written file is left behind)."""
    motion.validate(str(path))
    arrays = {key: np.asarray(getattr(motion, key), dtype=np.float32) for key in ARRAYS}
    path = Path(path)
    make_dirs(path.parent)
    with atomic_target(path) as tmp, open(tmp, "wb") as f:
        np.savez_compressed(
            f,
            format=np.int64(FORMAT_VERSION),
            fps=np.float64(motion.fps),
            robot=np.str_(motion.robot),
            joint_names=np.array(motion.joint_names, dtype=np.str_),
            body_names=np.array(motion.body_names, dtype=np.str_),
            **arrays,
        )


def motion_file(name: str | os.PathLike) -> Path:
    """The file a motion is named by: `mjrl:motions/NAME.npz` is one of mjrl's own (shipped in
    `tasks/motions/`, wherever mjrl is installed), anything else a path."""
    return robot_file(str(name))  # `mjrl:NAME` resolves alike for robots and motions


def load_motion(name: str | os.PathLike) -> Motion:
    """Read and check a motion file (`motion_file` names); a missing, unreadable or malformed one
    is a UsageError."""
    path = motion_file(name)
    if path.is_dir():
        raise UsageError(f"motion file {path} is a directory; give an .npz file made by mjrl motion convert")
    if not path.is_file():
        raise UsageError(f"motion file {path} does not exist")
    if path.stat().st_size == 0:
        raise UsageError(f"motion file {path} is empty; make it again with mjrl motion convert")
    try:
        with _npz(path) as data:
            missing = [k for k in ("format", "fps", "robot", "joint_names", "body_names", *ARRAYS) if k not in data]
            if missing:
                raise UsageError(
                    f"{path}: not an mjrl motion file (no {', '.join(missing)}); make one with mjrl motion convert"
                )
            if int(data["format"]) > FORMAT_VERSION:
                raise UsageError(f"{path}: motion format {int(data['format'])} is newer than this mjrl's; upgrade mjrl")
            fields = {key: np.asarray(data[key], dtype=np.float32) for key in ARRAYS}
            motion = Motion(
                fps=float(data["fps"]),
                robot=str(data["robot"]),
                joint_names=tuple(str(n) for n in data["joint_names"]),
                body_names=tuple(str(n) for n in data["body_names"]),
                **fields,
            )
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as exc:  # damaged on disk
        raise UsageError(f"{path}: not a readable motion file ({type(exc).__name__}: {exc})") from None
    return motion.validate(str(path))


def _npz(path: Path) -> np.lib.npyio.NpzFile:
    """The archive at `path`; a UsageError for a file NumPy reads as something else (an .npy
    array, a pickle refused)."""
    data = np.load(path, allow_pickle=False)
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise UsageError(
            f"{path}: one NumPy array, not an mjrl motion file (an .npz archive); make one with mjrl motion convert"
        )
    return data
