"""Motion tracking: a robot imitates reference motions, one policy for a library of them
(BeyondMimic's recipe, as mjlab's `Mjlab-Tracking-Flat-Unitree-G1` trains it).

The reference is the command: each step the policy is given the reference's joint positions and
velocities and where the reference's anchor body (the torso) is from its own. It is paid, by
exponential kernels, for the anchor's position and orientation in the world and for the
tracked bodies' positions, orientations and velocities relative to the anchor; penalised for
changing its actions, nearing its joint limits and touching the ground with anything but feet
and hands. An episode ends when the anchor's height or tilt, or an end effector's height, strays
past a bound, and as a time-out where its clip ends. Episodes start in the reference's state at a
frame drawn where episodes fail most (`library.py`).

Reward weights are per second, multiplied by the env step, as in the velocity task.
"""

from __future__ import annotations

from functools import partial

import torch

from mjrl.envs import EventTerm, ObsTerm, RewardTerm, Task, TaskSpec, TerminationTerm, VecEnv
from mjrl.envs import terms as mdp
from mjrl.errors import UsageError
from mjrl.rl.config import AgentConfig
from mjrl.sim import Scene
from mjrl.tasks.tracking import observations, rewards, terminations
from mjrl.tasks.tracking.config import AGENT, TrackingEnvConfig
from mjrl.tasks.tracking.evaluation import TrackingGauges, play_metrics
from mjrl.tasks.tracking.library import MotionLibrary, validate_motions
from mjrl.tasks.tracking.reference import MOTION, library, reference_qpos

__all__ = ["TrackingEnvConfig", "build", "play_metrics", "tracking_task"]

# Noise on the actor's proprioception (BeyondMimic's).
NOISE = {"base_lin_vel": 0.5, "base_ang_vel": 0.2, "joint_pos": 0.01, "joint_vel": 0.5}


def _observations() -> dict[str, dict[str, ObsTerm]]:
    actor = {
        "motion_command": ObsTerm(observations.motion_command),
        "anchor_pos_error": ObsTerm(observations.anchor_pos_error),
        "anchor_ori_error": ObsTerm(observations.anchor_ori_error),
        "base_lin_vel": ObsTerm(mdp.base_lin_vel, noise_std=NOISE["base_lin_vel"]),
        "base_ang_vel": ObsTerm(mdp.base_ang_vel, noise_std=NOISE["base_ang_vel"]),
        "joint_pos": ObsTerm(mdp.joint_pos_rel, noise_std=NOISE["joint_pos"]),
        "joint_vel": ObsTerm(mdp.joint_vel, noise_std=NOISE["joint_vel"]),
        "last_action": ObsTerm(mdp.last_action),
    }
    privileged = {
        "body_positions": ObsTerm(observations.body_positions),
        "body_orientations": ObsTerm(observations.body_orientations),
    }
    return {"actor": actor, "critic": {**actor, **privileged}}


def _rewards(cfg: TrackingEnvConfig) -> dict[str, RewardTerm]:
    w, dt = cfg.rewards, cfg.sim.timestep * cfg.sim.decimation
    weighted = {
        "anchor_pos": (partial(rewards.anchor_pos, std=w.anchor_pos_std), w.anchor_pos),
        "anchor_ori": (partial(rewards.anchor_ori, std=w.anchor_ori_std), w.anchor_ori),
        "body_pos": (partial(rewards.body_pos, std=w.body_pos_std), w.body_pos),
        "body_ori": (partial(rewards.body_ori, std=w.body_ori_std), w.body_ori),
        "body_lin_vel": (partial(rewards.body_lin_vel, std=w.body_lin_vel_std), w.body_lin_vel),
        "body_ang_vel": (partial(rewards.body_ang_vel, std=w.body_ang_vel_std), w.body_ang_vel),
        "action_rate": (mdp.action_rate, w.action_rate),
        "joint_limit": (partial(mdp.joint_limits, soft=w.joint_soft_limit), w.joint_limit),
        "undesired_contacts": (mdp.undesired_contacts, w.undesired_contacts),
    }
    return {name: RewardTerm(func, weight=weight * dt) for name, (func, weight) in weighted.items() if weight}


def _terminations(cfg: TrackingEnvConfig) -> dict[str, TerminationTerm]:
    bounds = cfg.terminations
    return {
        "anchor_height": TerminationTerm(partial(terminations.anchor_height, bound=bounds.anchor_height)),
        "anchor_tilt": TerminationTerm(partial(terminations.anchor_tilt, bound=bounds.anchor_tilt)),
        "end_effector_height": TerminationTerm(
            partial(terminations.end_effector_height, bound=bounds.end_effector_height)
        ),
        "motion_end": TerminationTerm(terminations.motion_end, time_out=True),
    }


def _record_failures(env: VecEnv, ended: torch.Tensor) -> None:
    library(env).record_failures(env, ended)


def deployment_inputs(env: VecEnv) -> dict:
    """What a deployed tracking policy needs each step beside the robot's sensors: the reference
    frame of its motion, one frame per control step from where the motion starts."""
    cfg: TrackingEnvConfig = env.cfg
    return {
        "kind": "motion_reference",
        "motions": list(cfg.motion.files),
        "fps": library(env).fps,
        "anchor_body": cfg.motion.anchor_body,
        "joints": env.sim.actuator_joints(),
        "terms": {
            "motion_command": "the reference frame's joint positions, then velocities, of `joints` (rad, rad/s)",
            "anchor_pos_error": "the reference anchor's world position minus the robot anchor's, in the robot "
            "anchor's frame (m)",
            "anchor_ori_error": "the first two columns, row by row, of the rotation from the robot anchor's "
            "frame to the reference anchor's",
            "base_lin_vel": "the base's (pelvis's) linear velocity in its frame: an estimate on a robot",
        },
    }


def build(cfg: TrackingEnvConfig) -> TaskSpec:
    mjcf = cfg.robot.mjcf_file
    if not mjcf.is_file():
        raise UsageError(f"robot config: no MJCF file at {cfg.robot.mjcf!r}; give --env.robot.mjcf PATH")
    if cfg.terrain.kind != "flat":
        raise UsageError("the tracking task runs on flat ground: the motions are made there (drop --env.terrain.kind)")
    motions = validate_motions(cfg)  # before anything is built: a motion that does not fit is one line
    return TaskSpec(
        scene=Scene(mjcf, cfg.terrain, cfg.robot.locked_joints, cfg.robot.home_keyframe),
        robot=cfg.robot,
        observations=_observations(),
        rewards=_rewards(cfg),
        terminations=_terminations(cfg),
        events={"record_failures": EventTerm(_record_failures, mode="episode_end")},
        deployment_inputs=deployment_inputs,
        video_ghost=reference_qpos,
        contacts=True,
        action_offset=mdp.home_joint_positions,
        components={
            MOTION: partial(MotionLibrary, motions=motions, cfg=cfg.motion, noise=cfg.reset_noise),
            "tracking_errors": TrackingGauges,
        },
        # Episodes start in the reference's state: the terms read its bodies' poses at once.
        refresh_kinematics_on_reset=True,
    )


def tracking_task(name: str, env_cfg: TrackingEnvConfig, agent_cfg: AgentConfig = AGENT) -> Task:
    """A robot's tracking task: its env config with the shared terms (`build`) and figures."""
    return Task(name=name, env_cfg=env_cfg, agent_cfg=agent_cfg, build=build, play_metrics=play_metrics)
