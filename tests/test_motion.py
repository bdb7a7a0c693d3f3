"""Motion files (`mjrl motion convert | record | info`): body poses against MuJoCo's own
kinematics, a recorded policy's round trip through CSV, and bad input."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest
from conftest import run_main

from mjrl.envs.robot import robot_file
from mjrl.motion import load_motion
from mjrl.motion.convert import motion_to_csv
from mjrl.motion.kinematics import RobotKinematics

RUNS = Path(__file__).resolve().parent.parent / "runs"
MILLIMETRE = 1e-3
YAW_RATE = 0.4  # rad/s of the known trajectories' root


def known_trajectories(fps: float, seconds: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """Root position, root quaternion (w x y z) and the humanoid's 23 joint angles on known
    smooth curves, sampled at `fps`: the CSV's columns (quaternion w x y z) and the times."""
    model = mujoco.MjModel.from_xml_path(str(robot_file("mjrl:robots/humanoid.xml")))
    t = np.arange(round(seconds * fps) + 1) / fps
    hinges = model.njnt - 1
    home = model.key_qpos[0][7:]
    joints = home + 0.3 * np.sin(np.pi * t[:, None] + np.arange(hinges)[None, :])
    root = np.stack([0.3 * t, 0.1 * np.sin(t), 0.75 + 0.02 * np.cos(3 * t)], axis=1)
    yaw = YAW_RATE * t
    quat = np.stack([np.cos(yaw / 2), 0 * yaw, 0 * yaw, np.sin(yaw / 2)], axis=1)
    return np.concatenate([root, quat, joints], axis=1), t


def mujoco_body_poses(qpos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every body's world position and quaternion for each row of `qpos`, by `mj_kinematics`."""
    model = mujoco.MjModel.from_xml_path(str(robot_file("mjrl:robots/humanoid.xml")))
    data = mujoco.MjData(model)
    positions, quats = [], []
    for row in qpos:
        data.qpos[:] = row
        mujoco.mj_kinematics(model, data)
        positions.append(data.xpos[1:].copy())
        quats.append(data.xquat[1:].copy())
    return np.array(positions), np.array(quats)


def write_csv(path: Path, qpos: np.ndarray, order: str = "xyzw", header: bool = False) -> Path:
    quat = qpos[:, 3:7] if order == "wxyz" else qpos[:, [4, 5, 6, 3]]
    rows = np.concatenate([qpos[:, :3], quat, qpos[:, 7:]], axis=1)
    text = "x,y,z,q1,q2,q3,q4," + ",".join(f"j{i}" for i in range(qpos.shape[1] - 7)) + "\n" if header else ""
    path.write_text(text + "\n".join(",".join(f"{v:.10g}" for v in row) for row in rows) + "\n")
    return path


def convert(csv: Path, out: Path, *flags: str):
    return run_main("mjrl", "motion", "convert", str(csv), "--robot", "humanoid", "--out", str(out), *flags)


def assert_same_rotations(a: np.ndarray, b: np.ndarray, tolerance: float = 1e-5) -> None:
    """Quaternions equal up to sign: |<a, b>| = 1."""
    assert np.abs((a * b).sum(-1)).min() > 1.0 - tolerance


def test_a_csv_of_known_trajectories_converts_to_mujocos_body_poses(tmp_path):
    qpos, t = known_trajectories(50.0)
    positions, quats = mujoco_body_poses(qpos)
    for order, header in (("xyzw", False), ("wxyz", True)):
        out = tmp_path / f"{order}.npz"
        result = convert(
            write_csv(tmp_path / f"{order}.csv", qpos, order, header), out, "--fps", "50", "--quat-order", order
        )
        assert result.returncode == 0, result.stderr
        motion = load_motion(out)
        assert (motion.fps, motion.num_frames, motion.robot) == (50.0, len(t), "mjrl:robots/humanoid.xml")
        assert motion.body_names[0] == "pelvis" and len(motion.joint_names) == 23
        assert np.abs(motion.body_pos - positions).max() < MILLIMETRE
        assert_same_rotations(motion.body_quat, quats)
        assert np.abs(motion.joint_pos - qpos[:, 7:]).max() < 1e-5
    # Velocities by finite differences, against the curves' own derivatives.
    inside = slice(1, -1)
    joint_speed = 0.3 * np.pi * np.cos(np.pi * t[:, None] + np.arange(23)[None, :])
    assert np.abs(motion.joint_vel[inside] - joint_speed[inside]).max() < 0.01
    assert np.abs(motion.body_ang_vel[:, 0] - [0.0, 0.0, YAW_RATE]).max() < 1e-4
    assert np.abs(motion.body_lin_vel[inside, 0, 0] - 0.3).max() < 1e-4


def test_a_csv_at_another_rate_is_resampled_to_the_control_rate(tmp_path):
    """30 fps to 50 fps: every 0.1 s both have a frame, where the resampled motion must be
    MuJoCo's pose of the original frame (slerp and linear interpolation meet the samples)."""
    qpos, _ = known_trajectories(30.0)
    out = tmp_path / "m.npz"
    assert convert(write_csv(tmp_path / "m.csv", qpos), out, "--fps", "30").returncode == 0
    motion = load_motion(out)
    assert motion.fps == 50.0 and motion.num_frames == 101
    positions, quats = mujoco_body_poses(qpos[::3])
    assert np.abs(motion.body_pos[::5] - positions).max() < MILLIMETRE
    assert_same_rotations(motion.body_quat[::5], quats)
    # Between shared frames the interpolation stays close to the true curves.
    fine, _ = known_trajectories(50.0)
    assert np.abs(motion.body_pos - mujoco_body_poses(fine)[0]).max() < 0.01


def test_a_recorded_walk_round_trips_through_csv(tmp_path):
    """The kept humanoid walks a second on a forward command; written as CSV and converted back,
    its motion is the same within a millimetre."""
    recorded = tmp_path / "walk.npz"
    result = run_main(
        "mjrl", "motion", "record", "Mjrl-Velocity-Flat-Humanoid", "--run-dir", str(RUNS / "humanoid-h"),
        "--seconds", "1", "--out", str(recorded), "--env.commands.lin-vel-x", "0.6", "0.6",
        "--env.commands.lin-vel-y", "0", "0", "--env.commands.yaw-rate", "0", "0",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    walk = load_motion(recorded)
    assert walk.num_frames == 51 and walk.fps == 50.0 and walk.robot == "mjrl:robots/humanoid.xml"
    kinematics = RobotKinematics("humanoid")
    # The checkpoint was trained with the waist and arms locked: they hold their home angles.
    home = kinematics.home_qpos[kinematics.joint_qpos]
    waist = walk.joint_names.index("waist_yaw_joint")
    assert np.allclose(walk.joint_pos[:, waist], home[waist])
    knee = walk.joint_names.index("left_knee_joint")
    assert np.ptp(walk.joint_pos[:, knee]) > 0.1  # it walks
    assert walk.body_pos[-1, 0, 0] - walk.body_pos[0, 0, 0] > 0.1

    csv = tmp_path / "walk.csv"
    motion_to_csv(walk, kinematics, csv)
    assert convert(csv, tmp_path / "again.npz", "--fps", "50").returncode == 0
    again = load_motion(tmp_path / "again.npz")
    assert again.num_frames == walk.num_frames
    assert np.abs(again.body_pos - walk.body_pos).max() < MILLIMETRE
    assert_same_rotations(again.body_quat, walk.body_quat)

    info = run_main("mjrl", "motion", "info", str(recorded))
    assert info.returncode == 0
    assert "51 frames at 50 fps" in info.stdout and "mjrl:robots/humanoid.xml" in info.stdout


def bad_csvs(tmp_path: Path) -> dict[str, tuple[Path, tuple[str, ...], str]]:
    qpos, _ = known_trajectories(50.0, seconds=0.2)
    good = write_csv(tmp_path / "good.csv", qpos)
    lines = good.read_text().splitlines()
    short = tmp_path / "short.csv"
    short.write_text("\n".join(",".join(line.split(",")[:-1]) for line in lines))
    nan = tmp_path / "nan.csv"
    nan.write_text("\n".join([lines[0], lines[1].replace(lines[1].split(",")[9], "nan", 1), *lines[2:]]))
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    words = tmp_path / "words.csv"
    words.write_text(lines[0] + "\nnot,numbers\n")
    degrees = qpos.copy()
    degrees[:, 7:] = np.rad2deg(degrees[:, 7:])
    in_degrees = write_csv(tmp_path / "degrees.csv", degrees)
    two_rows = write_csv(tmp_path / "two_rows.csv", qpos[:2])
    names = ",".join(["left_hip_pitch_joint"] * 2)
    (tmp_path / "frames").mkdir()
    (tmp_path / "broken.xml").write_text("<mujoco><worldbody>")
    (tmp_path / "folder.xml").mkdir()
    return {
        "columns": (short, ("--fps", "50"), "has 29 columns"),
        "joint": (good, ("--fps", "50", "--joints", "no_such_joint"), "no joint 'no_such_joint'"),
        "nonfinite": (nan, ("--fps", "50"), "row 2, column 10 is not finite"),
        "rate": (good, ("--fps", "0"), "--fps is 0"),
        "empty": (empty, ("--fps", "50"), "has no rows"),
        "words": (words, ("--fps", "50"), "not a row of numbers"),
        "missing": (tmp_path / "nope.csv", ("--fps", "50"), "does not exist"),
        "joint-twice": (good, ("--fps", "50", "--joints", *names.split(",")), "names 'left_hip_pitch_joint' twice"),
        "degrees": (in_degrees, ("--fps", "50"), "the column looks like degrees: give radians"),
        # two rows at 50 fps last 0.02 s: under two frames at 10 fps (np.gradient's traceback before)
        "too-short": (two_rows, ("--fps", "50", "--out-fps", "10"), "under two frames at --out-fps 10"),
        # Found by trying the command adversarially (issue 61): a folder was said not to exist.
        "folder": (tmp_path / "frames", ("--fps", "50"), "is a folder; give the CSV file"),
        "mjcf-damaged": (good, ("--fps", "50", "--robot", str(tmp_path / "broken.xml")), "MuJoCo cannot load"),
        "mjcf-a-folder": (good, ("--fps", "50", "--robot", str(tmp_path / "folder.xml")), "no MJCF file"),
        "rate-not-a-number": (good, ("--fps", "nan"), "--fps is nan"),
    }


CONVERT_CASES = ["columns", "joint", "nonfinite", "rate", "empty", "words", "missing", "joint-twice", "degrees",
                 "too-short", "folder", "mjcf-damaged", "mjcf-a-folder", "rate-not-a-number"]  # fmt: skip


@pytest.mark.parametrize("case", CONVERT_CASES)
def test_bad_input_to_convert_gets_one_line_and_no_file(tmp_path, case):
    csv, flags, message = bad_csvs(tmp_path)[case]
    out = tmp_path / "out.npz"
    result = convert(csv, out, *flags)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not out.exists() and not list(tmp_path.glob(".out.npz*"))


@pytest.mark.parametrize(
    ("out", "message"),
    [("a-file/out.npz", "a file stands where a folder must be"), ("out.txt", "a motion file's name ends in .npz"),
     (".", "a motion file's name ends in .npz")],
)  # fmt: skip
def test_a_motion_file_that_cannot_be_written_there_is_refused_before_any_work(tmp_path, out, message):
    qpos, _ = known_trajectories(50.0, seconds=0.2)
    good = write_csv(tmp_path / "good.csv", qpos)
    (tmp_path / "a-file").write_text("")
    before = sorted(tmp_path.rglob("*"))
    result = convert(good, tmp_path / out, "--fps", "50")
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and sorted(tmp_path.rglob("*")) == before


def test_info_refuses_what_is_not_a_motion(tmp_path):
    """Each one line, exit 2: another NPZ, a missing file, a lone NumPy array, an empty file, a
    folder, an archive cut short, and an mjrl motion whose body quaternions are not unit (the
    tracking task would train on orientations no body can take)."""
    other = tmp_path / "other.npz"
    np.savez(other, x=np.zeros(3))
    np.save(tmp_path / "array.npy", np.zeros(3))
    (tmp_path / "empty.npz").write_bytes(b"")
    (tmp_path / "folder.npz").mkdir()
    shipped = robot_file("mjrl:motions/humanoid_walk.npz")
    (tmp_path / "cut.npz").write_bytes(shipped.read_bytes()[:3000])
    with np.load(shipped) as data:
        arrays = {key: data[key] for key in data.files}
    arrays["body_quat"] = arrays["body_quat"] * 1.5
    np.savez(tmp_path / "scaled.npz", **arrays)
    cases = {
        other: "not an mjrl motion file",
        tmp_path / "none.npz": "does not exist",
        tmp_path / "array.npy": "one NumPy array, not an mjrl motion file",
        tmp_path / "empty.npz": "is empty",
        tmp_path / "folder.npz": "is a directory",
        tmp_path / "cut.npz": "not a readable motion file",
        tmp_path / "scaled.npz": "has norm 1.5, not 1",
    }
    for path, message in cases.items():
        result = run_main("mjrl", "motion", "info", str(path))
        assert result.returncode == 2 and message in result.stderr and len(result.stderr.splitlines()) == 1, (
            path.name,
            result.stderr,
        )


def test_the_shipped_motions_fit_the_humanoid_and_the_squat_moves_what_walking_does_not():
    """`mjrl motion make`'s files: the humanoid's joints and bodies; the squat lowers the
    torso by at least 0.15 m and swings the arms with the feet planted, the walk goes forward."""
    kinematics = RobotKinematics("humanoid")
    squat, walk = load_motion("mjrl:motions/humanoid_squat_reach.npz"), load_motion("mjrl:motions/humanoid_walk.npz")
    for motion in (squat, walk):
        assert motion.joint_names == kinematics.joint_names and motion.body_names == kinematics.body_names
        assert motion.fps == 50.0 and motion.duration_s >= 5.0
    torso, feet = squat.body_names.index("torso"), [squat.body_names.index(f"{s}_foot") for s in ("left", "right")]
    assert squat.body_pos[0, torso, 2] - squat.body_pos[:, torso, 2].min() >= 0.15
    assert np.abs(squat.body_pos[:, feet] - squat.body_pos[:1, feet]).max() < MILLIMETRE
    shoulder = squat.joint_names.index("left_shoulder_pitch_joint")
    assert np.ptp(squat.joint_pos[:, shoulder]) > 1.0
    assert walk.body_pos[-1, 0, 0] - walk.body_pos[0, 0, 0] > 1.5


def test_mjrl_motion_make_makes_the_shipped_squat_again_and_checks_its_input_first(tmp_path):
    """`mjrl motion make` (formerly scripts/make_motions.py) reproduces the shipped squat-reach
    from its keyframes, to float32's precision; a walk without its run is refused in one line,
    before anything is made."""
    result = run_main("mjrl", "motion", "make", "--out", str(tmp_path / "made"), "--motions", "squat")
    assert result.returncode == 0, result.stderr
    made, shipped = (
        load_motion(tmp_path / "made" / "humanoid_squat_reach.npz"),
        load_motion("mjrl:motions/humanoid_squat_reach.npz"),
    )
    assert made.joint_names == shipped.joint_names and made.num_frames == shipped.num_frames
    np.testing.assert_allclose(made.joint_pos, shipped.joint_pos, atol=1e-5)
    np.testing.assert_allclose(made.body_pos, shipped.body_pos, atol=1e-5)
    refused = run_main("mjrl", "motion", "make", "--out", str(tmp_path / "none"), "--run-dir", str(tmp_path / "nope"))
    assert refused.returncode == 2 and "--run-dir" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert not (tmp_path / "none").exists()
