"""A reaching task for a fixed-base robot, written for a test and registered from it as
`Test-Reach-Arm`: a two-link planar arm (`data/two_link_arm.xml`, base fixed to the world, its
robot a `RobotConfig` like any legged robot's) moves its fingertip to a target drawn in its
reach every two seconds. Built from mjrl's generic terms and a few of its own, with no edit to
the env, the runner or the learners. Importable by name (`--plugins reach_task`)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import torch

from mjrl.envs import CommandTerm, EnvConfig, EventTerm, ObsTerm, RewardTerm, RobotConfig, Task, TaskSpec, VecEnv
from mjrl.envs import terms as mdp
from mjrl.rl.config import AgentConfig, PolicyConfig, PpoConfig, RunnerConfig
from mjrl.sim import Scene, SimConfig
from mjrl.tasks import register_task

ARM = RobotConfig(mjcf=str(Path(__file__).parent / "data" / "two_link_arm.xml"), base_body="base")
UPPER, FORE = 0.3, 0.25  # link lengths (m)


@dataclasses.dataclass(frozen=True)
class ReachEnvConfig(EnvConfig):
    """The reaching arm's settings."""

    episode_length_s: float = 4.0
    """Two targets per episode."""
    action_scale: float = 3.0
    """Joint targets of up to 3 rad from the home pose: the arm reaches all around."""
    target_radius: tuple[float, float] = (0.15, 0.5)
    """Targets are drawn at distances from the shoulder in this range (m), at any angle."""
    sim: SimConfig = SimConfig(decimation=2, timestep=0.01)


def fingertip(env: VecEnv) -> torch.Tensor:
    """(num_envs, 2): the fingertip in the plane, from the joint angles (forward kinematics)."""
    q = env.sim.qpos[:, env.robot.joint_qpos]
    elbow = q[:, 0] + q[:, 1]
    x = UPPER * torch.cos(q[:, 0]) + FORE * torch.cos(elbow)
    y = UPPER * torch.sin(q[:, 0]) + FORE * torch.sin(elbow)
    return torch.stack([x, y], dim=-1)


def to_target(env: VecEnv) -> torch.Tensor:
    return env.commands["target"] - fingertip(env)


def tip_distance(env: VecEnv) -> torch.Tensor:
    return torch.linalg.vector_norm(to_target(env), dim=-1)


def near_target(env: VecEnv, sigma: float) -> torch.Tensor:
    return torch.exp(-((tip_distance(env) / sigma) ** 2))


def sample_target(env: VecEnv, radius: tuple[float, float]) -> torch.Tensor:
    r = mdp.uniform(env, radius[0], radius[1])
    angle = mdp.uniform(env, -math.pi, math.pi)
    return torch.stack([r * torch.cos(angle), r * torch.sin(angle)], dim=-1)


def reset_arm(env: VecEnv, mask: torch.Tensor) -> None:
    """Joints anywhere in half their range, at rest."""
    q = mdp.uniform(env, -1.5, 1.5, 2)
    mdp.masked_write(mask, q, env.sim.qpos)
    env.sim.qvel.masked_fill_(mask.unsqueeze(1), 0.0)


def build(cfg: ReachEnvConfig) -> TaskSpec:
    observations = {
        "joint_pos": ObsTerm(mdp.joint_pos_rel, noise_std=0.01),
        "joint_vel": ObsTerm(mdp.joint_vel, noise_std=0.05),
        "target": ObsTerm(lambda env: env.commands["target"]),
        "to_target": ObsTerm(to_target),
    }
    return TaskSpec(
        scene=Scene(ARM.mjcf_file),
        robot=ARM,
        observations={"actor": observations, "critic": observations},
        commands={"target": CommandTerm(lambda env: sample_target(env, cfg.target_radius), 2, (2.0, 2.0))},
        rewards={
            "near_target": RewardTerm(lambda env: near_target(env, 0.1), weight=1.0),
            "distance": RewardTerm(tip_distance, weight=-1.0),
            "action_rate": RewardTerm(mdp.action_rate, weight=-0.01),
        },
        terminations={},
        events={"reset_arm": EventTerm(reset_arm, mode="reset")},
    )


REACH = Task(
    name="Test-Reach-Arm",
    env_cfg=ReachEnvConfig(num_envs=64),
    agent_cfg=AgentConfig(
        runner=RunnerConfig(num_steps_per_env=24, max_iterations=80),
        algorithm=PpoConfig(learning_rate=1e-3, num_mini_batches=4, entropy_coef=0.0, gamma=0.95, desired_kl=0.02),
        policy=PolicyConfig(actor_hidden_dims=(64, 64), critic_hidden_dims=(64, 64), init_noise_std=0.3),
    ),
    build=build,
    play_metrics=lambda env: {"tip_distance": tip_distance(env)},
)
register_task(REACH.name, REACH, "a two-link arm on a fixed base reaches for targets (tests/reach_task.py)")
