"""The velocity task with the Go1-class quadruped on real MuJoCo-Warp worlds (on the CPU, or with
MJRL_TEST_DEVICE=cuda on a GPU): standing, rewards, terminations, randomisation, and a short
training run through the CLI."""

from __future__ import annotations

import dataclasses
import math
import statistics

import mujoco
import numpy as np
import pytest
import torch
from conftest import DEVICE, last_json, run_cli, run_main

from mjrl.envs import VecEnv
from mjrl.envs import terms as mdp
from mjrl.metrics_file import read_metrics
from mjrl.tasks import load_task
from mjrl.tasks.velocity.commands import COMMAND
from mjrl.tasks.velocity.config import RandomizationConfig
from mjrl.tasks.velocity.evaluation import play_metrics
from mjrl.tasks.velocity.state import feet

TASK = load_task("Mjrl-Velocity-Flat-Quadruped")
DT = 0.02  # 0.005 s physics steps x decimation 4
# The home pose, on the device the envs run on (as are the quaternions below).
GO1_MODEL = mujoco.MjModel.from_xml_path(str(TASK.env_cfg.robot.mjcf_file))
HOME = torch.tensor(GO1_MODEL.key("home").qpos, dtype=torch.float32, device=DEVICE)
STILL = RandomizationConfig(joint_pos_noise=0.0, base_vel_noise=0.0, push_velocity=0.0)


def make_env(num_envs: int = 2, **changes) -> VecEnv:
    changes = {"random_initial_episode_length": False, "obs_noise": False, **changes}
    cfg = dataclasses.replace(TASK.env_cfg, num_envs=num_envs, **changes)
    return VecEnv(cfg, TASK.build(cfg), torch.device(DEVICE), seed=0)


def yaw_quat(angle: float) -> torch.Tensor:
    return torch.tensor([math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2)], device=DEVICE)


def roll_quat(angle: float) -> torch.Tensor:
    return torch.tensor([math.cos(angle / 2), math.sin(angle / 2), 0.0, 0.0], device=DEVICE)


def put(env: VecEnv, height: float = 0.28, quat: torch.Tensor | None = None, qvel: torch.Tensor | None = None) -> None:
    """Every env at the home joint pose with the given trunk height, orientation and velocity;
    `forward` then recomputes contacts, actuator forces and accelerations for that state."""
    qpos = HOME.clone()
    qpos[2] = height
    if quat is not None:
        qpos[3:7] = quat
    env.sim.qpos.copy_(qpos.expand_as(env.sim.qpos))
    env.sim.qvel.copy_(torch.zeros(18, device=env.device) if qvel is None else qvel)
    env.sim.ctrl.copy_(HOME[7:].expand_as(env.sim.ctrl))
    env.sim.forward()
    env.after_physics()


def reward(env: VecEnv, name: str) -> torch.Tensor:
    term = env.task.rewards[name]
    return term.weight * term.func(env)


def expect(env: VecEnv, name: str, raw: float | torch.Tensor) -> None:
    """The weighted term equals the config's weight x dt x the raw value (per env, or the same
    in every env)."""
    weight = getattr(env.cfg.rewards, name)
    assert env.task.rewards[name].weight == pytest.approx(weight * DT)
    expected = weight * DT * torch.as_tensor(raw, dtype=torch.float32, device=env.device).expand(env.num_envs)
    assert torch.allclose(reward(env, name), expected, rtol=1e-4, atol=1e-9)


# --------------------------------------------------------------------------------- standing


def test_stands_for_a_whole_episode_with_zero_actions():
    env = make_env(num_envs=2, randomization=STILL)
    actions = torch.zeros(2, 12, device=env.device)
    lowest, terminations = 1.0, torch.zeros(2, dtype=torch.bool, device=env.device)
    for step in range(1, env.max_episode_length + 1):
        _, _, terminated, truncated, extras = env.step(actions)
        terminations |= terminated
        lowest = min(lowest, float(extras["final_obs"]["critic"][:, -1].min()))  # base height term
        if step < env.max_episode_length:
            assert not truncated.any()
    assert env.max_episode_length == 1000  # 20 s at 50 Hz
    assert truncated.all() and not terminations.any()
    assert lowest > 0.22  # settles about 3-4 cm below the 0.285 m home height, never collapses


# ---------------------------------------------------------------------------------- rewards


def test_trunk_frame_quantities_match_mujoco_for_any_orientation():
    env = make_env(num_envs=16)
    g = torch.Generator().manual_seed(3)  # drawn on the CPU, then moved to the env's device
    quats = torch.randn(16, 4, generator=g)
    env.sim.qpos[:, 3:7] = (quats / quats.norm(dim=1, keepdim=True)).to(env.device)
    env.sim.qvel[:, :3] = torch.randn(16, 3, generator=g).to(env.device)
    gravity, lin_vel = mdp.projected_gravity(env).cpu(), mdp.base_lin_vel(env).cpu()
    qpos, qvel = env.sim.qpos.cpu(), env.sim.qvel.cpu()
    for i in range(16):
        rotation = np.zeros(9)
        mujoco.mju_quat2Mat(rotation, qpos[i, 3:7].double().numpy())
        world_to_trunk = rotation.reshape(3, 3).T
        np.testing.assert_allclose(gravity[i].numpy(), world_to_trunk @ [0.0, 0.0, -1.0], atol=1e-6)
        np.testing.assert_allclose(lin_vel[i].numpy(), world_to_trunk @ qvel[i, :3].numpy(), atol=1e-5)


def test_velocity_tracking_rewards_use_the_base_frame():
    env = make_env()
    env.commands[COMMAND][:] = torch.tensor([0.5, 0.0, 1.0], device=env.device)
    # Trunk turned 90 degrees left: moving along world +y is moving forward.
    put(env, quat=yaw_quat(math.pi / 2), qvel=torch.tensor([0.0, 0.5, 0, 0, 0, 1.0] + [0.0] * 12, device=env.device))
    expect(env, "track_lin_vel", 1.0)
    expect(env, "track_yaw_rate", 1.0)
    put(env, quat=yaw_quat(math.pi / 2), qvel=torch.tensor([0.5, 0.0, 0, 0, 0, 0.0] + [0.0] * 12, device=env.device))
    expect(env, "track_lin_vel", math.exp(-(0.5**2 + 0.5**2) / 0.25))  # base velocity (0, -0.5)
    expect(env, "track_yaw_rate", math.exp(-1.0 / 0.25))


def test_base_motion_and_orientation_penalties():
    env = make_env()
    put(env, qvel=torch.tensor([0.0, 0.0, 1.0, 1.0, 2.0, 3.0] + [0.0] * 12, device=env.device))
    expect(env, "lin_vel_z", 1.0)  # (1 m/s)^2
    assert torch.all(reward(env, "lin_vel_z") < 0)
    expect(env, "ang_vel_xy", 1.0 + 4.0)  # the yaw rate is not penalised
    expect(env, "flat_orientation", 0.0)
    put(env, quat=roll_quat(0.3))
    expect(env, "flat_orientation", math.sin(0.3) ** 2)
    assert torch.all(reward(env, "flat_orientation") < 0)


def test_effort_and_smoothness_penalties():
    env = make_env()
    put(env, height=0.6)  # in the air: no contacts
    expect(env, "joint_torques", 0.0)
    calm = reward(env, "joint_acc").clone()
    env.sim.ctrl.add_(0.1)  # every target 0.1 rad off: kp 40 -> 4 Nm on each joint
    env.sim.forward()
    expect(env, "joint_torques", 12 * 4.0**2)
    jerky = reward(env, "joint_acc")
    assert torch.all(jerky < calm) and torch.all(calm <= 0)
    expect(env, "joint_acc", torch.sum(env.sim.qacc[:, 6:] ** 2, dim=1))  # worlds differ in trunk mass
    env.actions.fill_(1.0)
    env.last_actions.fill_(-1.0)
    expect(env, "action_rate", 12 * 2.0**2)


def test_undesired_contacts_count_non_foot_parts_on_the_ground():
    env = make_env()
    put(env)  # standing, feet slightly in the floor
    assert env.state.contacts.all()
    expect(env, "undesired_contacts", 0.0)
    put(env, height=0.05)  # trunk on the floor (legs through it)
    touching = env.contacts[:, env.robot.undesired_geoms].sum(dim=1)
    assert torch.all(touching >= 1)
    expect(env, "undesired_contacts", touching.float())


def test_feet_air_time_rewards_long_steps_only_when_commanded_to_move():
    env = make_env()
    put(env)  # all four feet on the ground
    feet, command = env.state, env.commands[COMMAND]
    command[:] = torch.tensor([0.8, 0.0, 0.0], device=env.device)

    def landing_after(swing_s: float) -> None:
        feet.air_time[:] = torch.tensor([swing_s, 0.0, 0.0, 0.0], device=env.device)  # FR was in the air
        feet.last_contacts[:] = torch.tensor([False, True, True, True], device=env.device)
        env.after_physics()  # a new physics state: the swing timers advance once for it

    landing_after(0.7)
    expect(env, "feet_air_time", 0.7 + DT - 0.5)
    expect(env, "feet_air_time", 0.7 + DT - 0.5)  # evaluating it again in the same step changes nothing
    assert torch.all(feet.air_time == 0)  # the swing ended
    landing_after(0.1)
    expect(env, "feet_air_time", 0.1 + DT - 0.5)  # short steps are penalised
    command[:] = 0.0
    landing_after(0.7)
    expect(env, "feet_air_time", 0.0)  # standing still: no stepping reward


# ----------------------------------------------------------------------------- terminations


def test_terminations_on_hand_built_states():
    env = make_env(num_envs=3)
    put(env)
    assert not mdp.illegal_contact(env).any()
    assert not mdp.bad_orientation(env, 1.0).any()
    put(env, height=0.05)  # trunk on the ground
    assert mdp.illegal_contact(env).all()
    put(env, height=0.6, quat=roll_quat(math.pi))  # upside down, in the air
    assert mdp.bad_orientation(env, 1.0).all() and not mdp.illegal_contact(env).any()
    put(env, height=0.6, quat=roll_quat(0.8))
    assert not mdp.bad_orientation(env, 1.0).any()
    put(env, height=0.6, quat=roll_quat(1.2))
    assert mdp.bad_orientation(env, 1.0).all()


def test_step_terminates_and_resets_an_upside_down_robot():
    env = make_env(num_envs=2, randomization=STILL)
    qpos = HOME.clone()
    qpos[2], qpos[3:7] = 0.6, roll_quat(math.pi)
    env.sim.qpos[0] = qpos  # env 0 upside down, env 1 standing
    _, _, terminated, truncated, extras = env.step(torch.zeros(2, 12, device=env.device))
    assert terminated.tolist() == [True, False] and not truncated.any()
    assert extras["final_obs"]["critic"][0, 8] > 0.9  # gravity points up in the base frame
    # float(): pytest.approx reads a tensor through numpy, which a GPU tensor refuses.
    assert float(env.sim.qpos[0, 2]) == pytest.approx(0.285) and env.episode_length[0] == 0


# ------------------------------------------------------------------- commands and randomisation


def test_commands_randomisation_and_observation_layout():
    env = make_env(num_envs=64, obs_noise=True)
    cfg, cmd = env.cfg, env.commands[COMMAND]
    standing = (cmd == 0).all(dim=1)
    assert 0 < int(standing.sum()) < 20  # standing_fraction 0.1 of 64
    for i, (low, high) in enumerate((cfg.commands.lin_vel_x, cfg.commands.lin_vel_y, cfg.commands.yaw_rate)):
        assert torch.all((cmd[:, i] >= low) & (cmd[:, i] <= high))
    friction = mdp.ground_friction(env).squeeze(1)
    mass = mdp.base_mass_offset(env).squeeze(1)
    assert torch.all((friction >= 0.5) & (friction <= 1.25)) and friction.std() > 0.1
    assert torch.all((mass >= -1.0) & (mass <= 1.0)) and mass.std() > 0.3
    # Every world has its own friction on every geom (so on every contact).
    geom_friction = env.sim.model_field("geom_friction")[:, :, 0]
    assert torch.equal(geom_friction, friction.unsqueeze(1).expand_as(geom_friction))
    assert env.obs_dims == {"actor": 48, "critic": 48 + 7}
    obs = env.compute_obs()
    assert not torch.equal(obs["actor"], obs["critic"][:, :48])  # noise on the actor only
    assert torch.equal(obs["critic"][:, 9:12], cmd)  # commands are never noised
    assert torch.equal(obs["critic"][:, 48], friction)


def test_play_metrics_contract():
    env = make_env(num_envs=2)
    env.commands[COMMAND][:] = torch.tensor([[0.5, 0.0, 0.2], [0.0, 0.0, 0.0]], device=env.device)
    put(env, qvel=torch.tensor([0.5, 0.0, 0.0, 0.0, 0.0, 0.2] + [0.0] * 12, device=env.device))
    metrics = play_metrics(env)
    assert {"lin_vel_error", "yaw_rate_error", "foot_contact_fraction"} <= set(metrics)
    assert torch.allclose(metrics["lin_vel_error"], torch.tensor([0.0, 0.5], device=env.device), atol=1e-6)
    assert torch.allclose(metrics["yaw_rate_error"], torch.tensor([0.0, 0.2], device=env.device), atol=1e-6)


def test_an_episode_reports_how_far_its_base_ended_from_where_it_began():
    # 0.2 s episodes, standing still on the spot (no pushes, no initial velocity).
    env = make_env(num_envs=2, episode_length_s=0.2, randomization=STILL)
    env.reset()
    start = mdp.base_position(env)[:, :2].clone()
    zero = torch.zeros(2, env.num_actions, device=env.device)
    for step in range(10):
        if step == 5:  # carry env 0's robot 0.3 m forward and 0.4 m to the side, mid-episode
            env.sim.qpos[0, :2] += torch.tensor([0.3, 0.4], device=env.device)
        env.step(zero)
        metrics = play_metrics(env)
        if step < 9:
            assert metrics["displacement_count"].sum().item() == 0
    # The episodes ended at the last step: their displacement is measured before the reset.
    torch.testing.assert_close(metrics["displacement_count"], torch.ones(2, device=env.device))
    displacement = metrics["displacement_total"]
    # (Landing from the spawn moves a base by a centimetre or two.)
    assert abs(displacement[0].item() - 0.5) < 0.05 and displacement[1].item() < 0.05
    # The next episodes are measured from where they begin.
    torch.testing.assert_close(feet(env).start_xy, mdp.base_position(env)[:, :2])
    assert not torch.equal(feet(env).start_xy[0], start[0] + torch.tensor([0.3, 0.4], device=env.device))


# ------------------------------------------------------------------------------- training


@pytest.mark.heavy
@pytest.mark.parametrize("ranks", [1, 2])
def test_two_iterations_through_the_cli(log_root, ranks):
    run = run_cli if ranks > 1 else run_main  # one rank in-process; two through the launcher
    # Two ranks stay on the CPU: on a GPU they would need one each, and a test machine may have one only.
    device = DEVICE if ranks == 1 else "cpu"
    result = run(
        "train", "Mjrl-Velocity-Flat-Quadruped", "--device", device,
        "--env.num-envs", "8", "--runner.max-iterations", "2", "--runner.num-steps-per-env", "8",
        "--algorithm.num-mini-batches", "2", "--logger", "none", "--log-root", str(log_root),
        *(["--nproc-per-node", str(ranks)] if ranks > 1 else []),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = (log_root / "Mjrl-Velocity-Flat-Quadruped").glob("20*")
    metrics = read_metrics(run_dir / "metrics.jsonl")
    assert len(metrics) == 2
    assert metrics[-1]["env_steps"] == (1 + 2) * 8 * 8 * ranks  # the normaliser warm-up, then 2 iterations
    if ranks > 1:
        ranks_info = last_json(result.stdout)["ranks"]
        assert ranks_info["0"]["parameters_sha256"] == ranks_info["1"]["parameters_sha256"]
    for line in metrics:
        for name in TASK.build(TASK.env_cfg).rewards:
            assert math.isfinite(line[f"reward/{name}"])
        assert {"termination/illegal_contact", "termination/bad_orientation"} <= set(line)


def test_first_update_is_no_larger_than_later_ones(log_root):
    """The KL guard: iteration 0's update may not move the policy far more than later ones do.

    With normaliser statistics taken from the first observations alone (every robot at its home
    pose) this run's iteration-0 KL was 19x the median of iterations 4-11; with the warm-up
    rollout it was 3.1-3.8x over three seeds at an initial rate of 1e-3 (the task now starts at
    3e-4, which lowers it further).

    On the CPU whatever MJRL_TEST_DEVICE says: the ratios above were measured there, and a GPU
    run draws other random numbers (its env generator is a CUDA one), so its ratio is another
    sample, not the one this bound was set from."""
    result = run_main(
        "train", "Mjrl-Velocity-Flat-Quadruped", "--device", "cpu", "--logger", "none",
        "--log-root", str(log_root), "--env.num-envs", "32", "--runner.num-steps-per-env", "24",
        "--runner.max-iterations", "12", "--runner.save-interval", "100", "--runner.eval-interval", "0",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = (log_root / "Mjrl-Velocity-Flat-Quadruped").glob("20*")
    kl = [line["mean_kl"] for line in read_metrics(run_dir / "metrics.jsonl")]
    assert kl[0] <= 5 * statistics.median(kl[4:]), kl
