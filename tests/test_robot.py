"""A robot is a config: the velocity task runs a second robot, with names, leg order, size and
mass of its own, from its `RobotConfig` alone; mistakes in such a config are usage errors."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch
from conftest import run_main

from mjrl.config import apply_dict, to_dict
from mjrl.envs import RobotConfig, VecEnv, check_task_spec
from mjrl.envs import terms as mdp
from mjrl.envs.robot import robot_file
from mjrl.errors import UsageError
from mjrl.tasks import load_task
from mjrl.tasks.velocity.config import RandomizationConfig

MULE = load_task("Mjrl-Velocity-Flat-Mule")
GO1 = load_task("Mjrl-Velocity-Flat-Quadruped")
STILL = RandomizationConfig(joint_pos_noise=0.0, base_vel_noise=0.0, push_velocity=0.0)


def test_the_second_robot_stands_on_its_own_names():
    cfg = dataclasses.replace(
        MULE.env_cfg, num_envs=2, random_initial_episode_length=False, obs_noise=False, randomization=STILL
    )
    env = VecEnv(cfg, MULE.build(cfg), torch.device("cpu"), seed=0)
    # Resolved from the names: the base's free joint, 12 joints in LF, RF, LH, RH order starting
    # at the "stand" keyframe, four foot spheres of 3 cm.
    assert env.num_actions == 12 and env.robot.foot_geoms.numel() == 4
    assert env.robot.foot_sizes[:, 0].tolist() == pytest.approx([0.03] * 4)
    assert torch.allclose(env.action_offset, torch.tensor([0.0, 0.6, -1.2] * 4))
    assert torch.allclose(mdp.joint_pos_rel(env), torch.zeros(2, 12), atol=1e-6)  # starts at home
    mass = env.sim.model_field("body_mass")[:, env.robot.base_body]
    assert torch.all((mass >= 21.0) & (mass <= 27.0))  # its own 24 kg base, +-3 kg drawn per env
    heights = []
    for _ in range(100):
        _, _, terminated, truncated, _ = env.step(torch.zeros(2, 12))
        assert not (terminated | truncated).any()
        heights.append(float(mdp.base_height(env).min()))
    assert env.state.contacts.all()  # all four feet down
    assert not env.contacts[:, env.robot.undesired_geoms].any()
    assert min(heights) > 0.45 and max(heights) < 0.53  # settles below its 0.525 m home height


def test_terminations_come_before_rewards():
    """The termination reward reads what the termination terms decided in the same step."""
    cfg = dataclasses.replace(
        GO1.env_cfg, num_envs=2, random_initial_episode_length=False, obs_noise=False, randomization=STILL
    )
    env = VecEnv(cfg, GO1.build(cfg), torch.device("cpu"), seed=0)
    env.sim.qpos[0, 2] = 0.6
    env.sim.qpos[0, 3:7] = torch.tensor([0.0, 1.0, 0.0, 0.0])  # env 0 upside down
    _, reward, terminated, _, _ = env.step(torch.zeros(2, 12))
    assert terminated.tolist() == [True, False]
    penalty = cfg.rewards.termination * env.step_dt
    assert reward[0] < penalty + 1 and reward[1] > penalty + 1


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"foot_geoms": ("LF_foot_geom", "LF_paw")}, "foot_geoms names no geom 'LF_paw'"),
        ({"base_body": "LF_hip"}, "base_body 'LF_hip' moves without a free joint"),
        ({"joints": ("RF_HAA", "LF_HAA")}, "joints must list the actuated joints in actuator order"),
        ({"home_keyframe": "home"}, "home_keyframe names no keyframe 'home'"),
    ],
)
def test_robot_config_mistakes_are_found_before_the_env_is_built(changes, message):
    cfg = dataclasses.replace(MULE.env_cfg, robot=dataclasses.replace(MULE.env_cfg.robot, **changes))
    with pytest.raises(UsageError, match=re.escape(message)):
        check_task_spec(MULE.build(cfg))


def test_a_robot_config_mistake_is_one_line_and_exit_2(log_root):
    result = run_main("train", "Mjrl-Velocity-Flat-Mule", "--device", "cpu", "--log-root", str(log_root),
                     "--env.robot.foot-geoms", "LF_foot_geom", "LF_paw")  # fmt: skip
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("train: error")]
    assert len(errors) == 1 and "foot_geoms names no geom 'LF_paw'" in errors[0]
    assert "base_box" in errors[0] and "Traceback" not in result.stderr  # lists the model's geoms
    assert not log_root.exists()  # nothing written


def test_a_missing_mjcf_is_a_usage_error():
    cfg = dataclasses.replace(MULE.env_cfg, robot=dataclasses.replace(MULE.env_cfg.robot, mjcf="no/such.xml"))
    with pytest.raises(UsageError, match=re.escape("no MJCF file at 'no/such.xml'")):
        MULE.build(cfg)


def test_an_mjcf_that_does_not_compile_is_a_usage_error(log_root, tmp_path):
    broken = tmp_path / "robot.xml"
    broken.write_text("<mujoco><worldbody><body><geom size='1'/></body></worldbody>")  # unclosed
    result = run_main("train", "Mjrl-Velocity-Flat-Mule", "--device", "cpu", "--log-root", str(log_root),
                     "--env.robot.mjcf", str(broken))  # fmt: skip
    assert result.returncode == 2 and f"cannot load the MJCF {broken}" in result.stderr
    assert not log_root.exists()


def test_a_robot_config_round_trips_through_yaml():
    """config.yaml records the robot by its names, and `--config` reads them back."""
    robot = MULE.env_cfg.robot
    assert apply_dict(RobotConfig(mjcf=""), to_dict(robot)) == robot


def test_a_config_from_before_the_robot_was_config_loads_with_its_renamed_key():
    """Runs from before issue 12 wrote `trunk_mass_offset`; their config.yaml must still load (for
    `play`, `--config` and resumes), as the key it became, while a truly unknown key stays an error."""
    old = {"randomization": {"trunk_mass_offset": [-2.0, 2.0], "friction": [0.6, 1.0]}}
    cfg = apply_dict(GO1.env_cfg, old)
    assert cfg.randomization.base_mass_offset == (-2.0, 2.0) and cfg.randomization.friction == (0.6, 1.0)
    with pytest.raises(UsageError, match=re.escape("unknown config key 'randomization.tail_mass_offset'")):
        apply_dict(GO1.env_cfg, {"randomization": {"tail_mass_offset": [-2.0, 2.0]}})


def test_a_robot_config_that_names_its_floor_still_loads():
    """Runs from before issue 22 named the floor in the robot's file (`floor_geom`); the floor is
    now the scene's terrain, and the retired key is ignored, not an error."""
    old = {"robot": {**to_dict(GO1.env_cfg.robot), "floor_geom": "floor"}}
    assert apply_dict(GO1.env_cfg, old).robot == GO1.env_cfg.robot


@pytest.mark.parametrize(
    "task", ["Mjrl-Velocity-Flat-Quadruped", "Mjrl-Velocity-Flat-Mule", "Mjrl-Velocity-Flat-Humanoid"]
)
def test_mjrls_own_robots_are_named_wherever_mjrl_is_installed(task, capsys):
    """A run's config.yaml must play and resume on another machine: the GPU machine's run named
    the Go1 '/tmp/site/mjrl/tasks/velocity/go1.xml', which the CPU machine does not have."""
    robot = load_task(task).env_cfg.robot
    assert robot.mjcf.startswith("mjrl:robots/")
    here = robot.mjcf_file
    assert here.is_file() and here.parts[-3:-1] == ("tasks", "robots")
    # As recorded by another installation, before robots were named so: the same robot, said.
    elsewhere = f"/opt/other/lib/python3.12/site-packages/mjrl/tasks/velocity/{here.name}"
    assert robot_file(elsewhere) == here
    assert f"{elsewhere} does not exist here; using mjrl's own" in capsys.readouterr().err
    # As named before the robots had a folder of their own (config files of 2026-11-26 and before).
    assert robot_file(f"mjrl:velocity/{here.name}") == here


def test_no_other_path_is_replaced_by_one_of_mjrls_robots(tmp_path, monkeypatch):
    missing = [
        tmp_path / "go1.xml",
        tmp_path / "myproject" / "tasks" / "velocity" / "go1.xml",  # a task package of the user's
        Path("velocity/go1.xml"),  # relative paths are the user's, from the current folder
    ]
    for path in missing:
        assert robot_file(str(path)) == path
    assert robot_file("mjrl:velocity/none.xml") == Path("mjrl:velocity/none.xml")
    assert robot_file("mjrl:../velocity/go1.xml") == Path("mjrl:../velocity/go1.xml")  # inside the package only
    mine = tmp_path / "velocity" / "go1.xml"  # a file of the same name in the current folder is the user's
    mine.parent.mkdir()
    mine.write_text("<mujoco/>")
    monkeypatch.chdir(tmp_path)
    assert robot_file("velocity/go1.xml") == Path("velocity/go1.xml")
    assert robot_file("mjrl:velocity/go1.xml") != Path("velocity/go1.xml")
