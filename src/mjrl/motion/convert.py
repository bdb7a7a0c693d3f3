"""Retargeted mocap to a motion file: one CSV row per frame, the root's position (x y z, m) and
quaternion (x y z w by default, `quat_order="wxyz"` for the other convention), then the robot's
joint angles; a fixed-base robot's rows are its joint angles alone. A first row that is not
numbers is taken as a header and skipped."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mjrl.errors import UsageError
from mjrl.motion.file import Motion
from mjrl.motion.kinematics import RobotKinematics, resample_qpos


def read_rows(path: Path) -> np.ndarray:
    """The CSV's numbers, (frames, columns); an empty, ragged or non-numeric file is a UsageError."""
    if path.is_dir():
        raise UsageError(f"{path} is a folder; give the CSV file (one row per frame)")
    if not path.is_file():
        raise UsageError(f"{path} does not exist")
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    rows = []
    for number, line in enumerate(lines, start=1):
        try:
            rows.append([float(cell) for cell in line.split(",")])
        except ValueError:
            if number == 1:
                continue  # a header
            raise UsageError(f"{path}:{number}: not a row of numbers separated by commas") from None
    if not rows:
        raise UsageError(f"{path} has no rows of numbers; write one row per frame")
    widths = {len(row) for row in rows}
    if len(widths) > 1:
        raise UsageError(f"{path}: rows of {sorted(widths)} columns; every row needs the same columns")
    values = np.array(rows)
    if not np.isfinite(values).all():
        row, column = np.argwhere(~np.isfinite(values))[0]
        raise UsageError(f"{path}: row {row + 1}, column {column + 1} is not finite")
    return values


def csv_to_motion(
    path: Path,
    kinematics: RobotKinematics,
    fps: float,
    out_fps: float,
    quat_order: str = "xyzw",
    joints: tuple[str, ...] = (),
) -> Motion:
    """The motion a CSV describes, resampled from `fps` to `out_fps`. `joints` names the CSV's
    joint columns in their order (the robot's joints not named stay at the home pose); empty:
    every joint of the robot, in the model's order."""
    for name, rate in (("--fps", fps), ("--out-fps", out_fps)):
        if not (np.isfinite(rate) and rate > 0):
            raise UsageError(f"{name} is {rate}; give frames per second > 0")
    if quat_order not in ("xyzw", "wxyz"):
        raise UsageError(f"--quat-order {quat_order!r}: give xyzw or wxyz")
    order = joints or kinematics.joint_names
    if twice := sorted({name for name in order if order.count(name) > 1}):
        raise UsageError(f"--joints names {twice[0]!r} twice; name each of the CSV's joint columns once")
    if unknown := [name for name in order if name not in kinematics.joint_names]:
        raise UsageError(
            f"--joints: {kinematics.robot} has no joint {unknown[0]!r}; it has {', '.join(kinematics.joint_names)}"
        )
    rows = read_rows(path)
    root = 7 if kinematics.free_qpos is not None else 0
    if rows.shape[1] != root + len(order):
        layout = "3 root position + 4 root quaternion + " if root else ""
        raise UsageError(
            f"{path} has {rows.shape[1]} columns; rows for {kinematics.robot} are {layout}{len(order)} joint angles "
            f"= {root + len(order)} (name the CSV's joints with --joints)"
        )
    if rows.shape[0] < 2:
        raise UsageError(f"{path} has one frame; a motion needs at least 2")
    duration = (rows.shape[0] - 1) / fps
    if duration * out_fps < 1 - 1e-9:
        raise UsageError(
            f"{path}: {rows.shape[0]} rows at {fps:g} fps last {duration:.3g} s, under two frames at --out-fps "
            f"{out_fps:g}; give a longer clip"
        )
    check_joint_ranges(path, kinematics, order, rows[:, root:])
    joint_pos = np.tile(kinematics.home_qpos[kinematics.joint_qpos], (rows.shape[0], 1))
    joint_pos[:, [kinematics.joint_names.index(name) for name in order]] = rows[:, root:]
    root_pos = root_quat = None
    if root:
        root_pos, quat = rows[:, :3], rows[:, 3:7]
        root_quat = quat[:, [3, 0, 1, 2]] if quat_order == "xyzw" else quat
        if (np.linalg.norm(root_quat, axis=1) < 1e-6).any():
            raise UsageError(f"{path}: a root quaternion is zero; check the columns and --quat-order")
    qpos = kinematics.qpos(root_pos, root_quat, joint_pos)
    return kinematics.motion(resample_qpos(qpos, fps, out_fps, kinematics.free_qpos), out_fps)


RANGE_MARGIN = 0.2
"""How far (rad, or m for a slide joint) a CSV's joint may go beyond the joint's range in the
robot's MJCF before the conversion is refused: retargeting overshoots a little; a CSV in degrees
overshoots by far."""


def check_joint_ranges(path: Path, kinematics: RobotKinematics, order: tuple[str, ...], angles: np.ndarray) -> None:
    """A UsageError for the first joint column outside its limited joint's range by more than
    `RANGE_MARGIN` (a hint about degrees when the values would fit in radians)."""
    m = kinematics.model
    for column, name in enumerate(order):
        joint = m.joint(name).id
        if not m.jnt_limited[joint]:
            continue
        low, high = m.jnt_range[joint]
        values = angles[:, column]
        outside = (values < low - RANGE_MARGIN) | (values > high + RANGE_MARGIN)
        if outside.any():
            row = int(np.argmax(outside))
            in_radians = np.deg2rad(values)
            degrees = ((in_radians >= low - RANGE_MARGIN) & (in_radians <= high + RANGE_MARGIN)).all()
            hint = "; the column looks like degrees: give radians" if degrees else ""
            raise UsageError(
                f"{path}: joint {name} is {values[row]:.4g} in row {row + 1} of numbers, outside its range "
                f"[{low:.3g}, {high:.3g}] by more than {RANGE_MARGIN}{hint}"
            )


def motion_to_csv(motion: Motion, kinematics: RobotKinematics, path: Path) -> None:
    """The CSV `csv_to_motion` reads back (root x y z, quaternion x y z w, joints), for a motion of
    this robot: to edit one in a spreadsheet, or to check a round trip."""
    columns = [motion.joint_pos]
    if kinematics.free_qpos is not None:
        root_quat = motion.body_quat[:, 0]
        columns = [motion.body_pos[:, 0], root_quat[:, [1, 2, 3, 0]], motion.joint_pos]
    np.savetxt(path, np.concatenate(columns, axis=1), delimiter=",", fmt="%.9g")
