"""Videos: `play --video` and `train --video-interval`, decoded back with PyAV and checked."""

from __future__ import annotations

from pathlib import Path

import av
import mujoco
import numpy as np
import pytest
from conftest import TINY_RUN, last_json, run_cli, run_main

from mjrl.sim.render import make_camera
from mjrl.tasks.cartpole.task import MODEL_XML as CARTPOLE_XML
from mjrl.tasks.robots.go1 import GO1
from mjrl.tools.video import frame_indices

QUADRUPED_XML = str(GO1.mjcf_file)

CARTPOLE, QUADRUPED = "Mjrl-Cartpole-Balance", "Mjrl-Velocity-Flat-Quadruped"


def decode(path: Path) -> tuple[list[np.ndarray], float]:
    """Every frame of an mp4 as (H, W, 3) uint8, and its frame rate."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(stream)]
        return frames, float(stream.average_rate)


def assert_not_blank(frames: list[np.ndarray], size: tuple[int, int] = (320, 240)) -> None:
    for frame in frames:
        assert frame.shape == (size[1], size[0], 3)
        assert frame.std() > 10  # a scene, not one colour
    # Something moved: a frozen picture differs from frame 0 only by codec noise (a few levels),
    # while the thin pole moving for 0.5 s changes a few hundred pixels by far more.
    changed = np.abs(frames[-1].astype(int) - frames[0].astype(int)).max(axis=2) > 24
    assert changed.sum() > 100


def tiny_run(task: str, log_root: Path, *extra: str) -> tuple[Path, str]:
    result = run_main(
        "train", task, *TINY_RUN, "--log-root", str(log_root), "--runner.max-iterations", "2",
        "--runner.eval-interval", "0", *extra,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return Path(last_json(result.stdout)["run_dir"]), result.stdout


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory) -> tuple[Path, str]:
    """Two iterations with a clip at each: 0.5 s, 10 control steps at 20 Hz."""
    log_root = tmp_path_factory.mktemp("logs")
    return tiny_run(CARTPOLE, log_root, "--video-interval", "1", "--video-seconds", "0.5")


def test_training_clips_and_play_video_of_cartpole(cartpole_run, tmp_path):
    run_dir, stdout = cartpole_run
    for iteration in (0, 1):
        clip = run_dir / "videos" / f"iteration_{iteration:06d}.mp4"
        assert f"video {clip}" in stdout
        frames, fps = decode(clip)
        assert len(frames) == 10 and fps == 20
        assert_not_blank(frames)

    video = tmp_path / "balance.mp4"
    result = run_main("play", CARTPOLE, "--run-dir", str(run_dir), "--device", "cpu", "--video", str(video),
                     "--video-seconds", "1.5", "--video-fps", "10")  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert last_json(result.stdout)["frames"] == 15 and f"wrote {video} (15 frames at 10 fps" in result.stdout
    frames, fps = decode(video)
    assert len(frames) == 15 and fps == 10
    assert_not_blank(frames)


def test_play_video_of_the_quadruped(log_root, tmp_path):
    run_dir, _ = tiny_run(QUADRUPED, log_root)
    video = tmp_path / "walk.mp4"
    # Larger than MuJoCo's default offscreen buffer (640 x 480), which the renderer must grow.
    result = run_main("play", QUADRUPED, "--run-dir", str(run_dir), "--device", "cpu", "--video", str(video),
                     "--video-seconds", "0.4", "--video-size", "800", "600")  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    frames, fps = decode(video)
    assert len(frames) == 20 and fps == 50  # the task's 50 Hz control rate
    assert_not_blank(frames, size=(800, 600))


def test_locomotion_camera_follows_the_robot_and_cartpole_camera_is_fixed():
    quad = mujoco.MjModel.from_xml_path(str(QUADRUPED_XML))
    camera = make_camera(quad, mujoco.MjData(quad))
    assert camera.type == mujoco.mjtCamera.mjCAMERA_TRACKING and camera.trackbodyid == quad.body("trunk").id
    cart = mujoco.MjModel.from_xml_path(str(CARTPOLE_XML))
    camera = make_camera(cart, mujoco.MjData(cart))
    assert camera.type == mujoco.mjtCamera.mjCAMERA_FREE and camera.distance > 5  # the whole rail


def test_frame_indices_resample_to_the_video_rate():
    assert frame_indices(10, 20, 20) == list(range(10))
    assert frame_indices(10, 20, 10) == [0, 2, 4, 6, 8]
    assert frame_indices(4, 20, 40) == [0, 0, 1, 1, 2, 2, 3, 3]


@pytest.mark.parametrize(
    ("extra", "env", "needle"),
    [
        (["--video", "x.avi"], {}, "must end in .mp4"),
        # GLX needs an X display: with none, no backend is left and the error says what to do.
        (["--video", "x.mp4"], {"MUJOCO_GL": "glx", "DISPLAY": ""}, "no OpenGL backend"),
    ],
)
def test_video_errors_are_one_line(cartpole_run, extra, env, needle, tmp_path):
    run_dir, _ = cartpole_run
    result = run_cli("play", CARTPOLE, "--run-dir", str(run_dir), "--device", "cpu", *extra, cwd=tmp_path, env=env)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr
    assert not (tmp_path / "x.mp4").exists()
