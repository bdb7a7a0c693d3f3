"""The tracking task (`Mjrl-Tracking-Flat-Humanoid`): resets in the reference's state, the frame
that follows the episode, the clip's end as a time-out, the adaptive draw of start frames,
terminations when the robot strays, motions that do not fit, and a short run that trains and
exports with its reference inputs in the sidecar."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import DEVICE, last_json, run_cli, run_main

from mjrl.envs import VecEnv
from mjrl.metrics_file import read_metrics
from mjrl.motion import load_motion, save_motion
from mjrl.tasks import load_task
from mjrl.tasks.tracking import terminations
from mjrl.tasks.tracking.config import ResetNoiseConfig
from mjrl.tasks.tracking.evaluation import tracking_errors
from mjrl.tasks.tracking.reference import library, robot_bodies

TASK = "Mjrl-Tracking-Flat-Humanoid"
WALK, SQUAT = "mjrl:motions/humanoid_walk.npz", "mjrl:motions/humanoid_squat_reach.npz"
NO_NOISE = ResetNoiseConfig(position=0.0, rotation=0.0, linear_velocity=0.0, angular_velocity=0.0, joint_pos=0.0)


def tracking_env(num_envs: int = 4, files: tuple[str, ...] = (WALK, SQUAT), **motion) -> VecEnv:
    task = load_task(TASK)
    cfg = task.env_cfg
    cfg = dataclasses.replace(
        cfg,
        num_envs=num_envs,
        obs_noise=False,
        reset_noise=NO_NOISE,
        motion=dataclasses.replace(cfg.motion, files=files, **motion),
    )
    return VecEnv(cfg, task.build(cfg), torch.device(DEVICE), seed=0)


def short_motion(tmp_path: Path, frames: int) -> str:
    """The squat's first `frames` frames (it stands still for 0.8 s first)."""
    squat = load_motion(SQUAT)
    arrays = {k: getattr(squat, k)[:frames] for k in ("joint_pos", "joint_vel", "body_pos", "body_quat")}
    arrays |= {k: getattr(squat, k)[:frames] for k in ("body_lin_vel", "body_ang_vel")}
    path = tmp_path / "stand.npz"
    save_motion(dataclasses.replace(squat, **arrays), path)
    return str(path)


def test_an_episode_starts_in_the_reference_state_and_its_frame_follows_the_steps():
    env = tracking_env(start="first")
    lib = library(env)
    # Clips in turn over the envs, each from its first frame: the walk's 301 frames, then the squat's.
    assert lib.start.tolist() == [0, 301, 0, 301]
    pos, quat = robot_bodies(env)
    assert torch.allclose(pos, lib.reference.body_pos, atol=1e-4)
    assert torch.allclose((quat * lib.reference.body_quat).sum(-1).abs(), torch.ones(()), atol=1e-5)
    errors = tracking_errors(env)
    assert float(errors["joint_pos_error"].max()) < 1e-5 and float(errors["body_pos_error"].max()) < 1e-4
    for _ in range(3):
        env.step(torch.zeros(env.num_envs, env.num_actions, device=env.device))
    assert (lib.frame - lib.start).tolist() == [3, 3, 3, 3]
    # The reference moved on (the walk's first steps); the robot standing still lags it.
    assert not torch.allclose(lib.reference.joint_pos[0], lib.frames["joint_pos"][0])


def test_an_episode_ends_as_a_time_out_where_its_clip_ends(tmp_path):
    env = tracking_env(files=(short_motion(tmp_path, 11),), start="first")
    zeros = torch.zeros(env.num_envs, env.num_actions, device=env.device)
    for step in range(1, 11):
        _, _, terminated, truncated, _ = env.step(zeros)
        assert not terminated.any()
        assert bool(truncated.all()) == (step == 10), step
    assert library(env).frame.tolist() == [0, 0, 0, 0]  # started over


def test_failures_draw_the_starts_to_where_they_happen():
    env = tracking_env(num_envs=64, start="adaptive", failure_rate=1.0, uniform_share=0.01, kernel_bins=2)
    lib = library(env)
    hard = 3  # the walk's fourth second
    lib.frame.fill_(int(lib.bin_first[hard]) + 10)
    env.terminated.fill_(True)
    lib.record_failures(env, torch.ones(env.num_envs, dtype=torch.bool, device=env.device))
    lib.update(env)
    lib.reset(env, torch.ones(env.num_envs, dtype=torch.bool, device=env.device))
    bins = lib.frame_bin[lib.start]
    # Each failure counts 1 for its bin and 0.8 for the one before: 1 / 1.8 and 0.8 / 1.8 of the
    # draws, the rest (1 %) anywhere.
    assert int((bins == hard).sum()) > 20 and int((bins == hard - 1).sum()) > 15
    assert int(((bins == hard) | (bins == hard - 1)).sum()) >= 60
    # The failure average is kept across a resume.
    assert torch.equal(lib.resume_state()["motion_bin_failures"], lib.failures)


def test_straying_from_the_reference_ends_the_episode():
    env = tracking_env(start="first")
    assert not terminations.anchor_height(env, 0.25).any() and not terminations.end_effector_height(env, 0.25).any()
    env.sim.qpos[0, 2] -= 0.3  # the first robot 0.3 m lower than its reference
    env.sim.qpos[1, 3:7] = torch.tensor([0.7071, 0.7071, 0.0, 0.0])  # the second on its side
    env.sim.kinematics()
    assert terminations.anchor_height(env, 0.25).tolist() == [True, False, False, False]
    assert terminations.anchor_tilt(env, 0.8).tolist() == [False, True, False, False]
    assert terminations.end_effector_height(env, 0.25)[0]


def go1_motion(tmp_path: Path) -> str:
    from mjrl.motion import RobotKinematics

    kinematics = RobotKinematics("go1")
    path = tmp_path / "go1.npz"
    save_motion(kinematics.motion(np.tile(kinematics.home_qpos, (5, 1)), 50.0), path)
    return str(path)


def test_motions_that_do_not_fit_are_refused_in_one_line(tmp_path):
    slow = dataclasses.replace(load_motion(SQUAT), fps=25.0)
    save_motion(slow, tmp_path / "slow.npz")
    cases = [
        (["--env.motion.files", go1_motion(tmp_path)], "its root body is 'trunk', the robot's 'pelvis'"),
        (["--env.motion.files", str(tmp_path / "slow.npz")], "mjrl motion convert --out-fps 50"),
        (["--env.motion.files", str(tmp_path / "none.npz")], "does not exist"),
        (["--env.robot.locked-joints", "left_elbow_joint"], "moves left_elbow_joint by up to"),
        (["--env.motion.anchor-body", "head"], "'head' is not among --env.motion.bodies"),
    ]
    for flags, message in cases:
        log_root = tmp_path / "logs"
        result = run_main("train", TASK, "--device", DEVICE, "--logger", "none", "--log-root", str(log_root), *flags)
        assert result.returncode == 2 and message in result.stderr, (flags, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and not log_root.exists()


def test_a_recorded_motion_trains_and_exports_with_its_reference_inputs(tmp_path):
    run = run_main(
        "train", TASK, "--device", DEVICE, "--logger", "none", "--log-root", str(tmp_path),
        "--env.num-envs", "8", "--runner.num-steps-per-env", "8", "--algorithm.num-mini-batches", "2",
        "--runner.max-iterations", "2", "--env.motion.files", WALK, "--export", "onnx",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    run_dir = Path(json.loads(run.stdout.strip().splitlines()[-1])["run_dir"])
    metrics = read_metrics(run_dir)
    assert all(0 < m["tracking/body_pos_error/left_foot"] < 1.0 for m in metrics)
    sidecar = json.loads((run_dir / "exported" / "policy.onnx.json").read_text())
    reference = sidecar["reference_inputs"]
    assert reference["kind"] == "motion_reference" and reference["motions"] == [WALK] and reference["fps"] == 50.0
    assert reference["joints"] == sidecar["action_joints"] and reference["anchor_body"] == "torso"
    terms = [term["name"] for term in sidecar["observation_terms"]]
    assert set(reference["terms"]) <= set(terms) and terms[0] == "motion_command"


@pytest.mark.parametrize("start", ["uniform", "adaptive"])
def test_every_start_frame_leaves_a_step_before_the_clips_end(start):
    env = tracking_env(num_envs=256, start=start)
    lib = library(env)
    assert bool((lib.start < lib.last).all())
    walk = lib.last == 300
    assert bool((lib.start[walk] <= 299).all()) and bool((lib.start[~walk] >= 301).all())


def test_two_ranks_train_the_tracking_task_in_lockstep(tmp_path):
    result = run_cli(
        "train", TASK, "--device", DEVICE, "--logger", "none", "--log-root", str(tmp_path), "--nproc-per-node", "2",
        "--env.num-envs", "4", "--runner.num-steps-per-env", "8", "--algorithm.num-mini-batches", "2",
        "--runner.max-iterations", "2", "--runner.replica-check-interval", "1",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    summary = last_json(result.stdout)
    assert set(summary["ranks"]) == {"0", "1"}
    assert len({rank["parameters_sha256"] for rank in summary["ranks"].values()}) == 1


def test_videos_draw_the_reference_as_a_ghost_over_the_robot():
    from mjrl.sim.render import GHOST_RGBA, visual_model
    from mjrl.tools.video import video_state

    env = tracking_env(start="first")
    nq = env.sim.qpos.shape[1]
    state = video_state(env)
    assert state.shape == (env.num_envs, 2 * nq)
    assert torch.allclose(state[:, nq:], env.sim.qpos, atol=1e-5)  # at the start, on the reference
    for _ in range(10):
        env.step(torch.zeros(env.num_envs, env.num_actions, device=env.device))
    state = video_state(env)
    assert float((state[0, nq + 7 :] - state[0, 7:nq]).abs().max()) > 0.05  # the walk's legs swing, the robot's not
    model = visual_model(env.task.scene, ghost=True)
    assert model.nq == 2 * nq
    ghost_geoms = [g for g in range(model.ngeom) if model.geom(g).name.startswith("ghost_")]
    assert ghost_geoms and all(model.geom_contype[g] == model.geom_conaffinity[g] == 0 for g in ghost_geoms)
    assert np.allclose(model.geom_rgba[ghost_geoms[0]], GHOST_RGBA)
