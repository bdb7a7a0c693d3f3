"""The humanoid and what it brought to every robot: joints locked at home, per-joint action
scales from the actuators, feet of any shape, ground contacts apart from self-collisions."""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import mujoco
import numpy as np
import onnxruntime
import pytest
import torch
import yaml
from conftest import TINY_RUN, run_main

from mjrl.envs import Robot, RobotConfig, VecEnv
from mjrl.envs import terms as mdp
from mjrl.errors import UsageError
from mjrl.metrics_file import read_metrics
from mjrl.rl.networks import ActorCritic
from mjrl.sim import Scene
from mjrl.sim.terrain import TerrainConfig
from mjrl.tasks import load_task
from mjrl.tasks.robots.humanoid import SIDES, UPPER_BODY_JOINTS
from mjrl.tasks.velocity.commands import COMMAND
from mjrl.tasks.velocity.gait import GaitClock, SwingFootLoad, feet_gait, foot_touch_columns, gait_joints
from mjrl.tasks.velocity.rewards import Posture, feet_single_stance
from mjrl.tasks.velocity.state import foot_contact_states
from mjrl.tools.export import Sidecar, export_policy

TASK = "Mjrl-Velocity-Flat-Humanoid"
XML = load_task(TASK).env_cfg.robot.mjcf_file


def legs_only_env(num_envs: int = 4, feedforward: bool = False) -> VecEnv:
    """The CPU preset's robot: waist and arms locked. Without the reference swing fed forward
    (unless asked for), so that zero actions hold the home pose."""
    task = load_task(TASK)
    robot = dataclasses.replace(task.env_cfg.robot, locked_joints=UPPER_BODY_JOINTS)
    gait = dataclasses.replace(task.env_cfg.gait, feedforward=feedforward)
    cfg = dataclasses.replace(
        task.env_cfg, num_envs=num_envs, robot=robot, gait=gait, obs_noise=False, random_initial_episode_length=False
    )
    return VecEnv(cfg, task.build(cfg), torch.device("cpu"), seed=1)


def home_poses(model: mujoco.MjModel) -> mujoco.MjData:
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, 0)
    mujoco.mj_kinematics(model, data)
    return data


def test_locked_joints_hold_every_body_where_the_home_pose_puts_it():
    full, _ = Scene(XML, TerrainConfig()).build()
    locked, _ = Scene(XML, TerrainConfig(), locked_joints=UPPER_BODY_JOINTS).build()
    assert (full.nq, full.nu) == (30, 23) and (locked.nq, locked.nu) == (19, 12)
    names = [full.body(b).name for b in range(full.nbody)]
    assert names == [locked.body(b).name for b in range(locked.nbody)]
    at_home, held = home_poses(full), home_poses(locked)
    # The arms are bent at home (elbows 0.9 rad): welding them at angle 0 would move the hands.
    np.testing.assert_allclose(held.xpos, at_home.xpos, atol=1e-9)
    np.testing.assert_allclose(held.xquat, at_home.xquat, atol=1e-9)
    np.testing.assert_allclose(held.geom_xpos, at_home.geom_xpos, atol=1e-9)
    # The remaining joints and actuators keep their keyframe entries.
    legs = [full.joint(f"{side}_{j}_joint").qposadr[0] for side in ("left", "right") for j in
            ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")]  # fmt: skip
    np.testing.assert_array_equal(locked.key_qpos[0, 7:], full.key_qpos[0, legs])
    np.testing.assert_array_equal(locked.key_ctrl[0], full.key_ctrl[0, :12])


def test_locking_a_joint_that_is_not_a_hinge_of_the_robot_is_refused():
    with pytest.raises(UsageError, match="has no hinge joint 'left_tail_joint'"):
        Scene(XML, TerrainConfig(), locked_joints=("left_tail_joint",)).build()
    with pytest.raises(UsageError, match="has no hinge joint 'root'"):
        Scene(XML, TerrainConfig(), locked_joints=("root",)).build()


def test_each_joint_asks_the_same_share_of_its_torque_limit_per_unit_action():
    env = legs_only_env()
    m = env.sim.mj_model
    kp, limit = m.actuator_gainprm[:, 0], m.actuator_forcerange[:, 1]
    torch.testing.assert_close(env.action_scale, torch.tensor(0.25 * limit / kp, dtype=torch.float32))
    # Knee (139 Nm, kp 99.1) and ankle (50 Nm, kp 28.5): the figures the robot was specified with.
    knee, ankle = (env.sim.actuator_joints().index(f"left_{j}_joint") for j in ("knee", "ankle_pitch"))
    assert env.action_scale[knee].item() == pytest.approx(0.25 * 139 / 99.10)
    assert env.action_scale[ankle].item() == pytest.approx(0.25 * 50 / 28.50)
    actions = torch.linspace(-1, 1, env.num_actions).repeat(env.num_envs, 1)
    env.step(actions)
    torch.testing.assert_close(env.sim.ctrl, env.action_offset + env.action_scale * actions)
    # The quadrupeds keep one scale for every joint.
    go1 = load_task("Mjrl-Velocity-Flat-Quadruped")
    cfg = dataclasses.replace(go1.env_cfg, num_envs=1)
    assert torch.equal(VecEnv(cfg, go1.build(cfg), torch.device("cpu")).action_scale, torch.full((12,), 0.25))


def test_foot_heights_are_those_of_the_lowest_corner_of_the_tilted_sole():
    env = legs_only_env(num_envs=2)
    names = env.sim.actuator_joints()
    qpos = env.sim.qpos
    qpos[:, 2] += 0.2  # lift the robot off the ground
    for joint, angle in (("left_ankle_roll_joint", 0.25), ("left_ankle_pitch_joint", -0.5),
                         ("right_ankle_pitch_joint", 0.4)):  # fmt: skip
        qpos[1, env.robot.joint_qpos.start + names.index(joint)] += angle
    env.sim.forward()
    env.after_physics()
    m = env.sim.mj_model
    for world in range(2):
        for k, geom in enumerate(env.robot.foot_geoms.tolist()):
            corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * m.geom_size[geom]
            rotation = env.sim.geom_xmat[world, geom].numpy()
            lowest = (env.sim.geom_xpos[world, geom].numpy() + corners @ rotation.T)[:, 2].min()
            assert env.state.height[world, k].item() == pytest.approx(lowest, abs=1e-5)
    # Tilting a sole lowers its lowest corner (the check is not vacuous).
    assert (env.state.height[1] < env.state.height[0] - 0.01).all()


def test_self_collisions_are_counted_apart_from_ground_contacts():
    env = legs_only_env(num_envs=2)
    names = env.sim.actuator_joints()
    start = env.robot.joint_qpos.start
    # World 1: the left leg swung in across the right one (hip roll inwards), both in the air.
    env.sim.qpos[:, 2] += 0.3
    env.sim.qpos[1, start + names.index("left_hip_roll_joint")] = -0.5
    env.sim.forward()
    env.after_physics()
    self_contacts = env.sim.count_contacts_excluding(env.robot.ground_geom)
    assert self_contacts[0].item() == 0 and self_contacts[1].item() >= 1
    # In the air, nothing touches the ground, however the legs touch each other.
    assert not env.contacts.any()
    assert torch.equal(foot_contact_states(env), torch.zeros(2, 2))


def test_upright_pays_one_when_level_and_falls_with_the_squared_tilt():
    env = legs_only_env(num_envs=3)
    base = env.robot.base_qpos
    for world, tilt in enumerate((0.0, 0.3, 1.2)):  # about the base's y axis
        env.sim.qpos[world, base + 3 : base + 7] = torch.tensor([math.cos(tilt / 2), 0, math.sin(tilt / 2), 0])
    env.sim.forward()
    env.after_physics()
    expected = torch.tensor([math.exp(-(math.sin(tilt) ** 2) / 0.2) for tilt in (0.0, 0.3, 1.2)])
    torch.testing.assert_close(mdp.upright(env, sigma=0.2), expected)


def test_posture_is_tight_while_standing_and_per_joint_while_walking():
    env = legs_only_env(num_envs=2)
    names = env.sim.actuator_joints()
    knee, hip_roll = names.index("left_knee_joint"), names.index("right_hip_roll_joint")
    start = env.robot.joint_qpos.start
    env.sim.qpos[:, env.robot.joint_qpos] = env.robot.home_joint_pos  # resets start near home, not at it
    env.sim.qpos[:, start + knee] += 0.35
    env.sim.qpos[:, start + hip_roll] += 0.1
    env.commands[COMMAND][:, :3] = torch.tensor([[0.5, 0.0, 0.0], [0.0, 0.0, 0.0]])  # walk; stand
    posture = Posture(0.05, (("*knee*", 0.35), ("*", 0.1)))
    walking = math.exp(-(1.0**2 + 1.0**2) / len(names))
    standing = math.exp(-((0.35 / 0.05) ** 2 + (0.1 / 0.05) ** 2) / len(names))
    torch.testing.assert_close(posture(env), torch.tensor([walking, standing]))
    with pytest.raises(UsageError, match="no pattern for the joint 'left_hip_pitch_joint'"):
        Posture(0.05, (("*knee*", 0.35),))(env)


def test_angular_momentum_is_the_whole_robots_about_its_centre_of_mass():
    env = legs_only_env(num_envs=3)
    # Each world's base mass was drawn at reset (2 kg heavier at most), so each world's subtree
    # masses must have followed.
    masses = env.sim.model_field("body_mass")
    assert masses[:, env.robot.base_body].unique().numel() == 3
    qvel = torch.randn(env.sim.qvel.shape, generator=torch.Generator().manual_seed(3))
    qvel[0] = 0.0  # world 0 at rest
    qvel[1] = 0.0
    qvel[1, env.robot.base_dof : env.robot.base_dof + 3] = torch.tensor([1.0, -0.5, 0.3])  # only moving along
    env.sim.qvel.copy_(qvel)
    env.sim.forward()
    penalty = mdp.AngularMomentum()(env)
    assert penalty[0].item() == 0.0
    assert penalty[1].item() == pytest.approx(0.0, abs=1e-8)
    # CPU MuJoCo, world 2's masses and state: every body's momentum about the robot's centre of mass.
    model = copy.deepcopy(env.sim.mj_model)
    data = mujoco.MjData(model)
    model.body_mass[:] = masses[2].numpy()
    mujoco.mj_setConst(model, data)
    data.qpos[:], data.qvel[:] = env.sim.qpos[2].numpy(), env.sim.qvel[2].numpy()
    mujoco.mj_forward(model, data)
    mujoco.mj_subtreeVel(model, data)
    momentum = data.subtree_angmom[env.robot.base_body]
    assert np.linalg.norm(momentum) > 1.0
    assert penalty[2].item() == pytest.approx(float(np.sum(momentum**2)), rel=1e-4)


def test_angular_momentum_without_its_sensor_is_refused_with_the_line_to_add():
    task = load_task("Mjrl-Velocity-Flat-Quadruped")
    cfg = dataclasses.replace(task.env_cfg, num_envs=1)
    env = VecEnv(cfg, task.build(cfg), torch.device("cpu"), seed=1)
    with pytest.raises(UsageError, match='<subtreeangmom body="trunk"/>'):
        mdp.AngularMomentum()(env)


def test_single_stance_pays_the_shorter_phase_time_up_to_the_threshold():
    env = legs_only_env(num_envs=4)
    state = env.state
    env.commands[COMMAND][:, :3] = torch.tensor([0.5, 0.0, 0.0])
    env.commands[COMMAND][3, :3] = 0.0  # standing still: no step is paid
    state.contact_time = torch.tensor([[0.3, 0.0], [0.2, 0.6], [0.0, 0.0], [0.3, 0.0]])
    state.air_time = torch.tensor([[0.0, 0.25], [0.0, 0.0], [0.5, 0.7], [0.0, 0.25]])
    reward = feet_single_stance(env, threshold=0.4)
    # One foot down 0.3 s, the other up 0.25 s; both down; both up; standing command.
    torch.testing.assert_close(reward, torch.tensor([0.25, 0.0, 0.0, 0.0]))
    state.contact_time[0, 0], state.air_time[0, 1] = 0.9, 0.7
    assert feet_single_stance(env, threshold=0.4)[0].item() == pytest.approx(0.4)


def test_the_gait_clock_puts_each_foot_down_for_its_share_of_the_cycle_in_turn():
    env = legs_only_env(num_envs=3)
    clock = GaitClock(period_s=0.8, stance_fraction=0.55, foot_offsets=(0.0, 0.5))
    # Over a cycle of 40 env steps, each foot is down for 22 of them, the left from step 0 and
    # the right from step 20; both are down for 2 steps after each foot lands.
    stances = []
    for step in range(40):
        env.episode_length[:] = step + 40 * torch.tensor([0, 1, 7])  # any cycle of the episode
        stances.append(clock.in_stance(env))
        torch.testing.assert_close(
            clock.observation(env)[0], torch.tensor([math.sin(step * math.pi / 20), math.cos(step * math.pi / 20)])
        )
    stance = torch.stack(stances)  # (step, env, foot)
    assert torch.equal(stance[:, 0], stance[:, 2])
    assert stance[:, 0].sum(dim=0).tolist() == [22, 22]
    assert stance[:22, 0, 0].all() and not stance[22:, 0, 0].any()
    assert stance[20:, 0, 1].all() and stance[:2, 0, 1].all() and not stance[2:20, 0, 1].any()


def test_feet_are_paid_for_following_the_gait_while_moving_and_for_standing_when_told_to():
    env = legs_only_env(num_envs=4)
    clock = GaitClock(period_s=0.8, stance_fraction=0.55, foot_offsets=(0.0, 0.5))
    env.episode_length[:] = 10  # left foot in stance, right foot in swing
    env.commands[COMMAND][:, :3] = torch.tensor([0.5, 0.0, 0.0])
    env.commands[COMMAND][3, :3] = 0.0
    env.state.contacts = torch.tensor([[True, False], [True, True], [False, True], [True, True]])
    # As the gait; the swing foot down; both wrong; standing with both feet down.
    torch.testing.assert_close(feet_gait(env, clock), torch.tensor([2.0, 1.0, 0.0, 2.0]))
    env.state.contacts[3, 1] = False  # standing on one foot while told to stand
    assert feet_gait(env, clock)[3].item() == 1.0


def test_a_swinging_foot_is_charged_for_the_share_of_the_weight_it_carries():
    env = legs_only_env(num_envs=3)
    zero = torch.zeros(env.num_envs, env.num_actions)
    # A quarter of a second holding the home pose: landed from the spawn and standing on both
    # soles (without balance control it topples after about a second).
    for _ in range(12):
        env.step(zero)
    load = env.sim.sensordata.index_select(1, foot_touch_columns(env))
    # The soles' touch sensors carry each world's weight (its base mass was drawn at reset).
    weight = env.sim.model_field("body_mass").sum(dim=1) * 9.81
    torch.testing.assert_close(load.sum(dim=1), weight.float(), rtol=0.03, atol=0.0)
    assert torch.all(load > 0.3 * weight.float().unsqueeze(1) / 2)
    clock = GaitClock(period_s=0.8, stance_fraction=0.55, foot_offsets=(0.0, 0.5))
    env.episode_length[:] = 10  # left foot in stance, right foot in swing
    env.commands[COMMAND][:, :3] = torch.tensor([0.5, 0.0, 0.0])
    env.commands[COMMAND][2, :3] = 0.0  # told to stand: no swing
    nominal = float(env.sim.mj_model.body_subtreemass[env.robot.base_body]) * 9.81
    expected = torch.stack([load[0, 1] / nominal, load[1, 1] / nominal, torch.tensor(0.0)])
    torch.testing.assert_close(SwingFootLoad(clock)(env), expected)


def test_the_swing_load_without_touch_sensors_is_refused_with_the_line_to_add():
    task = load_task("Mjrl-Velocity-Flat-Quadruped")
    cfg = dataclasses.replace(task.env_cfg, num_envs=1)
    env = VecEnv(cfg, task.build(cfg), torch.device("cpu"), seed=1)
    with pytest.raises(UsageError, match="touch sensor on each foot"):
        foot_touch_columns(env)


SWING = (("*hip_pitch*", -0.35), ("*knee*", 0.7), ("*ankle_pitch*", -0.35))


def test_the_reference_swing_lifts_the_swinging_foot_with_its_sole_level():
    env = legs_only_env(num_envs=2)
    clock = GaitClock(period_s=0.8, stance_fraction=0.55, foot_offsets=(0.0, 0.5), swing_joint_offsets=SWING)
    columns, feet, _ = clock.swing_joints(env)
    names = env.sim.actuator_joints()
    assert [(names[c], f) for c, f in zip(columns.tolist(), feet.tolist(), strict=True)] == [
        (f"{side}_{joint}_joint", foot)
        for foot, side in enumerate(SIDES)
        for joint in ("hip_pitch", "knee", "ankle_pitch")
    ]
    env.commands[COMMAND][:, :3] = torch.tensor([[0.5, 0.0, 0.0], [0.0, 0.0, 0.0]])  # walk; stand
    env.episode_length[:] = 31  # the middle of the left foot's swing (phase 0.55-1, 22-40 of 40 steps)
    reference = clock.swing_reference(env)
    torch.testing.assert_close(reference[0], torch.tensor([-0.35, 0.7, -0.35, 0.0, 0.0, 0.0]))
    assert not reference[1].any()  # told to stand: home
    # Hung in the air, the reference pose puts the left sole 6-10 cm above the right, level.
    env.sim.qpos[:, 2] += 0.3
    env.sim.qpos[:, env.robot.joint_qpos] = env.robot.home_joint_pos
    env.sim.qpos[0, env.robot.joint_qpos.start + columns] += reference[0]
    env.sim.forward()
    env.after_physics()
    height = env.sim.geom_xpos[0, env.robot.foot_geoms, 2]
    assert 0.06 < (height[0] - height[1]).item() < 0.10
    sole_normal = env.sim.geom_xmat[0, env.robot.foot_geoms[0], 2, 2]
    assert sole_normal.item() > 0.999
    torch.testing.assert_close(gait_joints(env, clock), torch.tensor([1.0, 1.0]))
    env.episode_length[:] = 10  # the right foot's swing: the bent left leg now pays less
    assert gait_joints(env, clock)[0].item() < 0.2


def test_gait_joints_pays_only_for_the_paid_joints_while_moving():
    env = legs_only_env(num_envs=4)
    everything = GaitClock(0.8, 0.55, (0.0, 0.5), swing_joint_offsets=SWING)
    knees = GaitClock(0.8, 0.55, (0.0, 0.5), swing_joint_offsets=SWING, paid_joints=("*knee*",))
    columns, _, _ = knees.swing_joints(env)
    env.commands[COMMAND][:, :3] = torch.tensor([0.5, 0.0, 0.0])
    env.commands[COMMAND][3, :3] = 0.0  # told to stand: the reference is home
    env.episode_length[:] = 31  # the middle of the left foot's swing
    reference = knees.swing_reference(env)
    env.sim.qpos[:, env.robot.joint_qpos] = env.robot.home_joint_pos
    env.sim.qpos[:, env.robot.joint_qpos.start + columns] += reference
    env.sim.qpos[1, env.robot.joint_qpos.start + columns[0]] -= 0.3  # left hip reaches forward
    env.sim.qpos[2, env.robot.joint_qpos.start + columns[1]] -= 0.3  # left knee bends less
    env.sim.qpos[3, env.robot.joint_qpos.start + columns[0]] -= 0.3  # a standing hip leaves home
    env.sim.forward()
    env.after_physics()
    # Both clocks pay the reference swing in full, and less for a knee off it or a standing hip
    # away from home; only the clock that pays for every swing joint charges the hip's stride.
    torch.testing.assert_close(gait_joints(env, knees), torch.exp(torch.tensor([0.0, 0.0, -0.6, -0.6])))
    torch.testing.assert_close(gait_joints(env, everything), torch.exp(torch.tensor([0.0, -0.6, -0.6, -0.6])))
    nothing = GaitClock(0.8, 0.55, (0.0, 0.5), swing_joint_offsets=SWING, paid_joints=("*waist*",))
    with pytest.raises(UsageError, match="paid-joints match none of the swing joints"):
        gait_joints(env, nothing)


def test_the_feedforward_sets_the_zero_actions_targets_on_the_reference_swing():
    task = load_task(TASK)
    robot = dataclasses.replace(task.env_cfg.robot, locked_joints=UPPER_BODY_JOINTS)
    gait = dataclasses.replace(task.env_cfg.gait, feedforward=True)
    cfg = dataclasses.replace(
        task.env_cfg, num_envs=2, robot=robot, gait=gait, obs_noise=False, random_initial_episode_length=False
    )
    env = VecEnv(cfg, task.build(cfg), torch.device("cpu"), seed=1)
    clock = GaitClock.of(gait)
    columns, _, _ = clock.swing_joints(env)
    env.commands[COMMAND][:, :3] = torch.tensor([[0.5, 0.0, 0.0], [0.0, 0.0, 0.0]])  # walk; stand
    env.episode_length[:] = 31  # the middle of the left foot's swing
    expected = env.action_offset.repeat(2, 1)
    expected[0, columns] += torch.tensor([-0.35, 0.7, -0.35, 0.0, 0.0, 0.0])
    env.step(torch.zeros(2, env.num_actions))
    # The targets come from the state the action was chosen in (31), not the step's end (32).
    torch.testing.assert_close(env.sim.ctrl, expected)
    env.step(torch.ones(2, env.num_actions))  # an action adds its correction to the reference
    expected = env.action_offset + env.action_scale
    progress = (32 / 40 - 0.55) / 0.45
    reference = torch.tensor([-0.35, 0.7, -0.35]) * math.sin(math.pi * progress)
    torch.testing.assert_close(env.sim.ctrl[0, columns[:3]], expected[columns[:3]] + reference)
    torch.testing.assert_close(env.sim.ctrl[1], expected)


def reference_swing_from_sidecar(feedforward: dict, time_s: np.ndarray, command: np.ndarray, num_actions: int):
    """What a robot-side runtime adds to the targets, computed from the sidecar's words alone."""
    offsets = np.zeros((len(time_s), num_actions))
    moving = np.maximum(np.linalg.norm(command[:, :2], axis=1), np.abs(command[:, 2])) > feedforward["moving_threshold"]
    stance = feedforward["stance_fraction"]
    for joint in feedforward["joints"]:
        foot_phase = np.mod(time_s / feedforward["period_s"] - joint["foot_phase_offset"], 1.0)
        lift = np.sin(np.pi * np.maximum(0.0, (foot_phase - stance) / (1 - stance)))
        offsets[:, joint["action"]] += joint["amplitude"] * lift * moving
    return offsets


def test_a_policy_whose_targets_follow_the_clock_exports_them_in_its_sidecar(tmp_path):
    task = load_task(TASK)
    gait = dataclasses.replace(task.env_cfg.gait, feedforward=True)
    cfg = dataclasses.replace(task.env_cfg, num_envs=4, gait=gait, obs_noise=False)
    env = VecEnv(cfg, task.build(cfg), torch.device("cpu"), seed=0)
    obs = env.reset()
    policy = ActorCritic(
        obs["actor"].shape[1], obs["critic"].shape[1], env.num_actions, (8,), (8,), "elu", 1.0, normalize=True
    )
    model, sidecar_path = export_policy(
        env,
        policy,
        "onnx",
        tmp_path / "policy.onnx",
        {"task": TASK, "run_dir": "r", "checkpoint": "c", "iteration": 0, "env_steps": 0},
    )
    sidecar = Sidecar.from_json(sidecar_path.read_text())
    feedforward = sidecar.target_feedforward
    assert feedforward["kind"] == "reference_swing"
    assert sorted(j["joint"] for j in feedforward["joints"]) == sorted(
        f"{side}_{joint}_joint" for side in SIDES for joint in ("hip_pitch", "knee", "ankle_pitch")
    )
    # Three envs walk at different points of the cycle, one stands: a runtime that follows the
    # sidecar (model output, action transform, then the feedforward) sets the env's targets.
    env.commands[COMMAND][:, :3] = torch.tensor([[0.5, 0, 0], [0, 0.3, 0], [0, 0, 0.8], [0, 0, 0]])
    session = onnxruntime.InferenceSession(str(model))
    for lengths in ([5, 17, 31, 36], [0, 22, 39, 12]):
        env.episode_length[:] = torch.tensor(lengths)
        obs = env.compute_obs()["actor"]
        columns = {t.name: slice(t.start, t.start + t.size) for t in sidecar.observation_terms}
        command = obs[:, columns["command"]].numpy()
        actions = session.run(None, {"obs": obs.numpy()})[0]
        targets = np.asarray(sidecar.action_offset) + np.asarray(sidecar.action_scale) * np.clip(
            actions, -sidecar.action_clip, sidecar.action_clip
        )
        time_s = np.asarray(lengths) * sidecar.control_period_s
        targets += reference_swing_from_sidecar(feedforward, time_s, command, sidecar.action_size)
        env.step(torch.from_numpy(actions))
        np.testing.assert_allclose(env.sim.ctrl.numpy(), targets, atol=1e-5)
    # The swing is really there: a walking env's knee target is off its action's by up to 0.7 rad.
    assert (
        reference_swing_from_sidecar(feedforward, np.array([0.62]), np.array([[0.5, 0, 0]]), sidecar.action_size).max()
        > 0.6
    )


def test_a_swing_joint_must_move_exactly_one_foot(tmp_path):
    task = load_task(TASK)
    cfg = dataclasses.replace(task.env_cfg, num_envs=1)
    env = VecEnv(cfg, task.build(cfg), torch.device("cpu"), seed=0)
    clock = GaitClock(0.8, 0.55, (0.0, 0.5), swing_joint_offsets=(("waist*", 0.1),))
    with pytest.raises(UsageError, match="names 'waist_yaw_joint', which moves 0 feet, not 1"):
        clock.swing_joints(env)


@pytest.mark.parametrize(
    ("task", "flags", "message"),
    [
        (TASK, ("--env.gait.foot-phase-offsets", "0", "0.5", "0.25"), "has 3 values for 2 feet (left_foot right_foot)"),
        (TASK, ("--env.gait.foot-phase-offsets", "0", "1"), "--env.gait.foot-phase-offsets must be each in [0, 1)"),
        (
            "Mjrl-Velocity-Flat-Quadruped",
            ("--env.gait.feedforward", "True"),
            "--env.gait.feedforward needs a gait clock",
        ),
        (
            "Mjrl-Velocity-Flat-Quadruped",
            ("--env.gait.foot-phase-offsets", "0", "0.5", "0.5", "0", "--env.gait.feedforward", "True"),
            "--env.gait.feedforward needs a reference swing",
        ),
        (
            "Mjrl-Velocity-Flat-Quadruped",
            ("--env.rewards.feet-gait", "0.5"),
            "--env.rewards.feet-gait needs a gait clock",
        ),
        (
            "Mjrl-Velocity-Flat-Quadruped",
            ("--env.gait.foot-phase-offsets", "0", "0.5", "0.5", "0", "--env.rewards.gait-joints", "1"),
            "--env.rewards.gait-joints needs a reference swing",
        ),
        # Found only against the built model: refused before the run's directory is kept.
        (
            TASK,
            ("--env.gait.swing-joint-offsets", "waist*", "0.1", "--env.rewards.gait-joints", "1"),
            "names 'waist_yaw_joint', which moves 0 feet",
        ),
        (TASK, ("--env.gait.paid-joints", "*waist*"), "--env.gait.paid-joints match none of the swing joints"),
        (
            TASK,
            ("--env.rewards.posture", "1", "--env.rewards.posture-std-walking", "*knee*", "0.3"),
            "has no pattern for the joint 'left_hip_pitch_joint'",
        ),
    ],
)
def test_a_gait_or_posture_that_does_not_fit_the_robot_is_refused_in_one_line(log_root, task, flags, message):
    result = run_main("train", task, *TINY_RUN, "--log-root", str(log_root), *flags)
    assert result.returncode == 2, result.stderr[-2000:]
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (log_root / task).exists()


def test_the_cpu_preset_trains_the_legs_and_logs_the_biped_terms(log_root):
    one = ("--runner.max-iterations", "1")
    result = run_main("train", TASK, "--preset", "cpu-humanoid", *TINY_RUN, *one, "--log-root", str(log_root))
    assert result.returncode == 0, result.stderr[-2000:]
    (run_dir,) = (log_root / TASK).iterdir()
    metrics = read_metrics(run_dir / "metrics.jsonl")
    for term in ("feet_gait", "gait_joints", "upright", "posture", "feet_tilt", "self_collisions"):
        assert f"reward/{term}" in metrics[-1]
    for term in ("feet_air_time", "termination", "flat_orientation"):  # replaced for the biped
        assert f"reward/{term}" not in metrics[-1]
    assert "symmetry_loss" in metrics[-1]  # trained with mirror images by default
    checkpoint = torch.load(next((run_dir / "checkpoints").iterdir()), map_location="cpu", weights_only=False)
    weights = [value for name, value in checkpoint["policy"].items() if name.startswith("actor.") and "weight" in name]
    assert weights[-1].shape[0] == 12  # the legs only


ARM = """<mujoco>
  <worldbody>
    <body name="base" pos="0 0 1"><freejoint/><geom size="0.1"/>
      <body pos="0.1 0 0" euler="0 30 0">
        <joint name="twist" axis="1 0 0" ref="0.3"/>
        <joint name="bend" axis="0 1 0" pos="0 0 0.05"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.02"/>
        <body pos="0 0 -0.3"><joint name="wrist" axis="0 0 1"/><geom size="0.03"/></body>
      </body>
      <frame pos="0 0.2 0"><body name="framed"><joint name="in_frame"/><geom size="0.02"/></body></frame>
    </body>
  </worldbody>
  <actuator><position joint="twist"/><position joint="bend"/><position joint="wrist"/></actuator>
  <keyframe><key name="home" qpos="0 0 1 1 0 0 0  0.9 -0.6 0.4 0.2" ctrl="0.9 -0.6 0.4"/></keyframe>
</mujoco>"""


@pytest.mark.parametrize("locked", [("twist",), ("twist", "bend"), ("wrist", "twist")])
def test_locking_is_exact_with_a_joint_reference_and_several_joints_in_a_body(tmp_path, locked):
    xml = tmp_path / "arm.xml"
    xml.write_text(ARM)
    full, _ = Scene(xml).build()
    held, _ = Scene(xml, locked_joints=locked).build()  # unnamed actuators, a body oriented by euler
    assert held.nu == 3 - len(locked)
    at_home, welded = home_poses(full), home_poses(held)
    np.testing.assert_allclose(welded.xpos, at_home.xpos, atol=1e-9)
    np.testing.assert_allclose(welded.xquat, at_home.xquat, atol=1e-9)


def test_joints_that_welding_cannot_describe_are_refused(tmp_path):
    xml = tmp_path / "arm.xml"
    xml.write_text(ARM)
    for locked, message in [
        (("bend",), "'bend' follows a joint of its body that is not locked"),
        (("in_frame",), "the body of 'in_frame' sits in a <frame>"),
        (("twist", "twist"), "names a joint twice"),
    ]:
        with pytest.raises(UsageError, match=message):
            Scene(xml, locked_joints=locked).build()


def test_the_cpu_preset_locks_what_the_task_module_calls_the_upper_body():
    preset = yaml.safe_load((Path(__file__).parents[1] / "configs" / "cpu-humanoid.yaml").read_text())
    assert tuple(preset["env"]["robot"]["locked_joints"]) == UPPER_BODY_JOINTS


def test_per_joint_scales_need_position_servos_and_a_locked_joint_cannot_be_actuated(tmp_path):
    motor = ARM.replace('<position joint="twist"/>', '<motor joint="twist" forcerange="-30 30"/>')
    robot = RobotConfig(mjcf="", base_body="base", action_scale_from_torque=0.25)
    xml = tmp_path / "motor_arm.xml"
    xml.write_text(motor.replace("<position ", '<position forcerange="-5 5" '))
    model, _ = Scene(xml, TerrainConfig()).build()
    servos = dataclasses.replace(robot, joints=("bend", "wrist"))
    scaled = Robot.resolve(
        Scene(xml, TerrainConfig(), locked_joints=("twist",)).build()[0], servos, torch.device("cpu")
    )
    torch.testing.assert_close(scaled.action_scale, torch.full((2,), 0.25 * 5 / 1.0))  # kp 1: MuJoCo's default
    with pytest.raises(UsageError, match="needs position actuators"):
        Robot.resolve(model, robot, torch.device("cpu"))
    welded = dataclasses.replace(robot, joints=("twist", "bend"), locked_joints=("twist",))
    with pytest.raises(UsageError, match="joints lists twist, which locked_joints welds"):
        Robot.resolve(model, welded, torch.device("cpu"))


def test_mirror_images_must_have_the_same_action_scale(tmp_path):
    """With per-joint scales, a mirrored action moves a joint's image as far only when both
    motors match: a weaker left knee makes the robot's symmetry unusable, and says why."""
    xml = tmp_path / "humanoid.xml"
    knee = '<position name="left_knee" joint="left_knee_joint" class="m7520_22"/>'
    xml.write_text(XML.read_text().replace(knee, knee.replace("/>", ' forcerange="-100 100"/>')))
    robot = dataclasses.replace(load_task(TASK).env_cfg.robot, mjcf=str(xml))
    model, _ = Scene(xml, TerrainConfig()).build()
    assert "different action scales" in Robot.resolve(model, robot, torch.device("cpu")).mirror_error
    intact, _ = Scene(XML, TerrainConfig()).build()
    assert Robot.resolve(intact, load_task(TASK).env_cfg.robot, torch.device("cpu")).mirror_error is None
