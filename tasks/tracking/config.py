"""The tracking task's settings: which motions, which bodies, the reward kernels, the
terminations, how start phases are drawn and how much the reset state is perturbed."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Literal

from mjrl.envs import EnvConfig
from mjrl.envs.robot import RobotConfig
from mjrl.rl.config import AgentConfig, PolicyConfig, PpoConfig, RunnerConfig
from mjrl.sim import SimConfig, TerrainConfig


@dataclasses.dataclass(frozen=True)
class MotionConfig:
    """The reference motions and how episodes start in them."""

    files: tuple[str, ...] = ()
    """Motion files (`mjrl motion convert | record`), one policy for all of them: `mjrl:motions/NAME.npz`
    names one of mjrl's, anything else a path."""
    anchor_body: str = "torso"
    """The body the reference is followed from: its pose is tracked in the world, the others
    relative to it (BeyondMimic's anchor)."""
    bodies: tuple[str, ...] = ()
    """Bodies whose poses and velocities are tracked relative to the anchor (the anchor among them)."""
    end_effectors: tuple[str, ...] = ()
    """Bodies whose height, straying from the reference's, ends the episode (feet and hands)."""
    start: Literal["adaptive", "uniform", "first"] = "adaptive"
    """Where episodes start: drawn per bin in proportion to how often episodes fail there
    (adaptive, BeyondMimic's), uniformly over the clips' frames, or at each clip's first frame
    (evaluation: does the policy complete the clip)."""
    bin_s: float = 1.0
    """Length of a bin of the adaptive draw (s of a clip)."""
    failure_rate: float = 0.001
    """Per env step, the share of a bin's failure average that this step's failures replace."""
    uniform_share: float = 0.1
    """Weight of the uniform part of the adaptive draw, spread over all bins, against the failures."""
    kernel_bins: int = 1
    """A failure counts for this many bins: its own and those before it, each `kernel_decay`
    times the next, so that episodes start a little before where they fail."""
    kernel_decay: float = 0.8

    bounds: ClassVar[dict] = {
        "bin_s": "> 0",
        "failure_rate": "(0, 1]",
        "uniform_share": "> 0",
        "kernel_bins": ">= 1",
        "kernel_decay": "[0, 1]",
    }


@dataclasses.dataclass(frozen=True)
class TrackingRewardConfig:
    """Weights per second (multiplied by the env step) and the widths of the exponential kernels
    exp(-error² / std²), BeyondMimic's."""

    anchor_pos: float = 0.5
    anchor_pos_std: float = 0.3
    """m: the anchor's position error in the world."""
    anchor_ori: float = 0.5
    anchor_ori_std: float = 0.4
    """rad: the anchor's orientation error."""
    body_pos: float = 1.0
    body_pos_std: float = 0.3
    """m: the mean squared position error of the tracked bodies relative to the anchor."""
    body_ori: float = 1.0
    body_ori_std: float = 0.4
    body_lin_vel: float = 1.0
    body_lin_vel_std: float = 1.0
    body_ang_vel: float = 1.0
    body_ang_vel_std: float = 3.14
    action_rate: float = -0.1
    """Per squared change of the action between steps."""
    joint_limit: float = -10.0
    """Per rad beyond a joint's soft limits (`joint_soft_limit` of the range)."""
    joint_soft_limit: float = 0.9
    undesired_contacts: float = -0.1
    """Per ground contact of a geom other than the feet and hands."""

    bounds: ClassVar[dict] = {
        "anchor_pos_std": "> 0",
        "anchor_ori_std": "> 0",
        "body_pos_std": "> 0",
        "body_ori_std": "> 0",
        "body_lin_vel_std": "> 0",
        "body_ang_vel_std": "> 0",
        "joint_soft_limit": "(0, 1]",
    }


@dataclasses.dataclass(frozen=True)
class TrackingTerminationConfig:
    """When the robot has strayed too far from the reference: BeyondMimic's bounds."""

    anchor_height: float = 0.25
    """m between the anchor's height and the reference's."""
    anchor_tilt: float = 0.8
    """Difference of the z component of gravity seen from the anchor and from the reference's."""
    end_effector_height: float = 0.25
    """m between an end effector's height and the reference's (relative to the anchor)."""

    bounds: ClassVar[dict] = {"anchor_height": "> 0", "anchor_tilt": "> 0", "end_effector_height": "> 0"}


@dataclasses.dataclass(frozen=True)
class ResetNoiseConfig:
    """How far an episode's first state is from the reference frame it starts at (uniform
    half-widths)."""

    position: float = 0.05
    """m of the root, horizontally (a tenth of it vertically)."""
    rotation: float = 0.1
    """rad of the root about each axis (twice that about the vertical)."""
    linear_velocity: float = 0.2
    """m/s of the root."""
    angular_velocity: float = 0.2
    """rad/s of the root."""
    joint_pos: float = 0.1
    """rad of each joint, within its range."""

    bounds: ClassVar[dict] = {
        "position": ">= 0",
        "rotation": ">= 0",
        "linear_velocity": ">= 0",
        "angular_velocity": ">= 0",
        "joint_pos": ">= 0",
    }


@dataclasses.dataclass(frozen=True)
class TrackingEnvConfig(EnvConfig):
    """A robot imitating reference motions: the motion is the command, the policy follows it body
    by body."""

    robot: RobotConfig = RobotConfig(mjcf="")
    """The robot the motions were made for (its MJCF, joints and contact geoms)."""
    motion: MotionConfig = MotionConfig()
    """The motions and how episodes start in them."""
    terrain: TerrainConfig = TerrainConfig()
    """The ground: flat (motions are made on flat ground)."""
    episode_length_s: float = 10.0
    """The longest episode (s); an episode also ends, as a time-out, where its clip ends."""
    random_initial_episode_length: bool = False
    """Episodes start where the motion's draw puts them; their clips spread the time-outs."""
    action_scale: float = 0.25
    """Joint position target = home + action_scale * action (rad per unit action)."""
    action_clip: float = 100.0
    """Effectively unclipped: the actuators' ctrlrange bounds the targets."""
    rewards: TrackingRewardConfig = TrackingRewardConfig()
    terminations: TrackingTerminationConfig = TrackingTerminationConfig()
    reset_noise: ResetNoiseConfig = ResetNoiseConfig()
    obs_noise: bool = True
    """Noise on the actor's proprioception (joint positions 0.01 rad, velocities 0.5 rad/s, base
    angular velocity 0.2 rad/s, linear 0.5 m/s)."""
    sim: SimConfig = SimConfig(decimation=4, timestep=0.005)
    """Physics settings; a robot sets its own contact-buffer sizes."""


# PPO as BeyondMimic trains it (mjlab's tracking task): the adaptive schedule from 1e-3, half the
# velocity task's entropy bonus, the same network shape.
AGENT = AgentConfig(
    runner=RunnerConfig(num_steps_per_env=24, max_iterations=10000, save_interval=100, eval_interval=0),
    algorithm=PpoConfig(
        warm_up_normalizers=True,
        learning_rate=1e-3,
        schedule="adaptive",
        desired_kl=0.01,
        num_learning_epochs=5,
        num_mini_batches=4,
        clip_param=0.2,
        entropy_coef=0.005,
        gamma=0.99,
        lam=0.95,
    ),
    policy=PolicyConfig(
        actor_hidden_dims=(512, 256, 128), critic_hidden_dims=(512, 256, 128), activation="elu", init_noise_std=1.0
    ),
)
