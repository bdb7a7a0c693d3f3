"""Velocity tracking on flat ground or rough terrain for any legged robot with
position-controlled joints.

The policy acts at 50 Hz (0.005 s physics steps, decimation 4) and sets joint position targets
around the robot's home pose. It is commanded a forward and lateral velocity and a yaw rate in
its own frame, resampled every few seconds, and rewarded for tracking them (legged_gym / mjlab
style rewards). The critic also sees privileged state: ground friction, foot contacts, the
base's added mass and its height. On a terrain grid (`--env.terrain.kind grid`) robots spawn on
their patch, a curriculum moves them between rows of difficulty, an out-of-bounds time-out ends
an episode at the grid's edge, and with `--env.height-scan.enabled True` both see the terrain
around the base.

The robot is data (`VelocityEnvConfig.robot`, a `RobotConfig` of names); a robot's module sets
it with its own defaults and registers a `Task` (see `go1.py`, `mule.py` and
docs/writing-a-task.md).

Reward scaling: every weight is per second. `build` multiplies it by the env step (0.02 s), as
legged_gym and mjlab do, so an episode's return does not depend on the control rate and the
perfect tracking return of a 20 s episode is 20 * (weight_lin + weight_yaw).
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial

from mjrl.envs import CommandTerm, EventTerm, ObsTerm, RewardTerm, Task, TaskSpec, TerminationTerm
from mjrl.envs import terms as mdp
from mjrl.errors import UsageError
from mjrl.rl.config import AgentConfig
from mjrl.sim import Scene
from mjrl.tasks.velocity.commands import COMMAND, VelocityCommand, mirror_velocity_command, velocity_command
from mjrl.tasks.velocity.config import AGENT, ActorObsConfig, VelocityEnvConfig
from mjrl.tasks.velocity.curriculum import terrain_curriculum
from mjrl.tasks.velocity.evaluation import play_metrics, record_displacement
from mjrl.tasks.velocity.gait import GaitClock, SwingFootLoad, feet_gait, gait_joints, mirror_gait_clock
from mjrl.tasks.velocity.rewards import (
    Posture,
    feet_air_time,
    feet_clearance,
    feet_single_stance,
    feet_slip,
    feet_tilt,
    track_lin_vel,
    track_yaw_rate,
)
from mjrl.tasks.velocity.state import LeggedState, foot_contact_states

__all__ = ["VelocityEnvConfig", "build", "play_metrics"]


def _gait_clock(cfg: VelocityEnvConfig) -> GaitClock | None:
    gait = cfg.gait
    if not gait.foot_phase_offsets:
        for name in ("feet_gait", "gait_joints", "feet_swing_load"):
            if getattr(cfg.rewards, name):
                flag = name.replace("_", "-")
                raise UsageError(
                    f"--env.rewards.{flag} needs a gait clock: give --env.gait.foot-phase-offsets, one per foot"
                )
        if gait.feedforward:
            raise UsageError(
                "--env.gait.feedforward needs a gait clock: give --env.gait.foot-phase-offsets, one per foot"
            )
        return None
    if len(gait.foot_phase_offsets) != len(cfg.robot.foot_geoms):
        raise UsageError(
            f"--env.gait.foot-phase-offsets has {len(gait.foot_phase_offsets)} values for "
            f"{len(cfg.robot.foot_geoms)} feet ({' '.join(cfg.robot.foot_geoms)}): give one per foot"
        )
    if cfg.rewards.gait_joints and not gait.swing_joint_offsets:
        raise UsageError("--env.rewards.gait-joints needs a reference swing: give --env.gait.swing-joint-offsets")
    if gait.feedforward and not gait.swing_joint_offsets:
        raise UsageError("--env.gait.feedforward needs a reference swing: give --env.gait.swing-joint-offsets")
    return GaitClock.of(gait)


def _observations(cfg: VelocityEnvConfig, clock: GaitClock | None) -> dict[str, dict[str, ObsTerm]]:
    noise = cfg.noise
    joints = mdp.mirror_joints
    actor = {
        "base_lin_vel": ObsTerm(mdp.base_lin_vel, noise_std=noise.lin_vel, mirror=mdp.POLAR_VECTOR),
        "base_ang_vel": ObsTerm(mdp.base_ang_vel, noise_std=noise.ang_vel, mirror=mdp.AXIAL_VECTOR),
        "projected_gravity": ObsTerm(mdp.projected_gravity, noise_std=noise.gravity, mirror=mdp.POLAR_VECTOR),
        "command": ObsTerm(velocity_command, mirror=mirror_velocity_command),
        "joint_pos": ObsTerm(mdp.joint_pos_rel, noise_std=noise.joint_pos, mirror=joints),
        "joint_vel": ObsTerm(mdp.joint_vel, noise_std=noise.joint_vel, mirror=joints),
        "last_action": ObsTerm(mdp.last_action, mirror=joints),
    }
    if clock is not None:
        actor["gait_clock"] = ObsTerm(clock.observation, mirror=mirror_gait_clock)
    if cfg.height_scan.enabled:
        if problem := mdp.scan_problem(cfg.height_scan.size, cfg.height_scan.resolution):
            raise UsageError(problem)
        scan = mdp.HeightScan(cfg.height_scan.size, cfg.height_scan.resolution)
        actor["height_scan"] = ObsTerm(
            scan, noise_std=noise.height_scan, std_floor=cfg.height_scan.std_floor, mirror=scan.mirror
        )
    privileged = {
        "ground_friction": ObsTerm(mdp.ground_friction, mirror=mdp.unchanged),
        "foot_contacts": ObsTerm(foot_contact_states, mirror=mdp.mirror_feet),
        "base_mass_offset": ObsTerm(mdp.base_mass_offset, mirror=mdp.unchanged),
        "base_height": ObsTerm(mdp.base_height, mirror=mdp.unchanged),
    }
    # Critic (and teacher) observations are never noised (VecEnv only noises the "actor" group).
    groups = {"actor": _student_view(actor, cfg.actor_obs), "critic": {**actor, **privileged}}
    if cfg.actor_obs.teacher_group:
        groups["teacher"] = actor
    return groups


def _student_view(actor: dict[str, ObsTerm], view: ActorObsConfig) -> dict[str, ObsTerm]:
    """The actor's terms as `view` has them: without the linear velocity or the height scan,
    with history."""
    proprioception = ("base_ang_vel", "projected_gravity", "joint_pos", "joint_vel", "last_action")
    left_out = {"base_lin_vel": not view.base_lin_vel, "height_scan": not view.height_scan}
    return {
        name: dataclasses.replace(term, history=view.history) if name in proprioception else term
        for name, term in actor.items()
        if not left_out.get(name, False)
    }


def _rewards(cfg: VelocityEnvConfig, clock: GaitClock | None) -> dict[str, RewardTerm]:
    w, dt = cfg.rewards, cfg.sim.timestep * cfg.sim.decimation
    weighted = {
        "track_lin_vel": (partial(track_lin_vel, sigma=w.tracking_sigma), w.track_lin_vel),
        "track_yaw_rate": (partial(track_yaw_rate, sigma=w.yaw_tracking_sigma), w.track_yaw_rate),
        "lin_vel_z": (mdp.lin_vel_z, w.lin_vel_z),
        "ang_vel_xy": (mdp.ang_vel_xy, w.ang_vel_xy),
        "joint_torques": (mdp.joint_torques, w.joint_torques),
        "joint_acc": (mdp.joint_acc, w.joint_acc),
        "action_rate": (mdp.action_rate, w.action_rate),
        "undesired_contacts": (mdp.undesired_contacts, w.undesired_contacts),
        "flat_orientation": (mdp.flat_orientation, w.flat_orientation),
        "upright": (partial(mdp.upright, sigma=w.upright_sigma), w.upright),
        "posture": (Posture(w.posture_std_standing, w.posture_std_walking), w.posture),
        "feet_air_time": (partial(feet_air_time, threshold=w.feet_air_time_threshold), w.feet_air_time),
        "feet_slip": (feet_slip, w.feet_slip),
        "feet_clearance": (partial(feet_clearance, height=w.feet_clearance_height), w.feet_clearance),
        "feet_single_stance": (
            partial(feet_single_stance, threshold=w.feet_single_stance_threshold),
            w.feet_single_stance,
        ),
        "feet_tilt": (feet_tilt, w.feet_tilt),
        "feet_gait": (partial(feet_gait, clock=clock), w.feet_gait),
        "gait_joints": (partial(gait_joints, clock=clock), w.gait_joints),
        "feet_swing_load": (SwingFootLoad(clock), w.feet_swing_load),
        "self_collisions": (mdp.self_collisions, w.self_collisions),
        "angular_momentum": (mdp.AngularMomentum(), w.angular_momentum),
        "joint_deviation": (mdp.JointDeviation(w.joint_deviation_joints), w.joint_deviation),
        "termination": (mdp.is_terminated, w.termination),
    }
    return {name: RewardTerm(func, weight=weight * dt) for name, (func, weight) in weighted.items() if weight}


def _events(cfg: VelocityEnvConfig) -> dict[str, EventTerm]:
    rand = cfg.randomization
    events = {
        "randomize_physics": EventTerm(
            partial(mdp.randomize_friction_and_mass, friction=rand.friction, base_mass_offset=rand.base_mass_offset)
        ),
        "reset_robot": EventTerm(mdp.ResetToHome(rand.joint_pos_noise, rand.base_vel_noise)),
        "record_displacement": EventTerm(record_displacement, mode="episode_end"),
    }
    if cfg.terrain.kind == "grid" and cfg.terrain.curriculum:
        events["terrain_curriculum"] = EventTerm(terrain_curriculum, mode="episode_end")
    if rand.push_velocity > 0:
        push = partial(mdp.push_base, velocity=rand.push_velocity)
        events["push_robot"] = EventTerm(push, mode="interval", interval_s=rand.push_interval_s)
    return events


def build(cfg: VelocityEnvConfig) -> TaskSpec:
    mjcf = cfg.robot.mjcf_file
    if not mjcf.is_file():
        raise UsageError(f"robot config: no MJCF file at {cfg.robot.mjcf!r}; give --env.robot.mjcf PATH")
    commands, clock = cfg.commands, _gait_clock(cfg)
    feedforward = clock is not None and cfg.gait.feedforward
    sample = VelocityCommand(
        (commands.lin_vel_x, commands.lin_vel_y, commands.yaw_rate), commands.standing_fraction, commands.heading
    )
    terminations = {
        "illegal_contact": TerminationTerm(mdp.illegal_contact),
        "bad_orientation": TerminationTerm(partial(mdp.bad_orientation, max_tilt=cfg.max_tilt_rad)),
    }
    if cfg.terrain.kind == "grid":
        # The height scan must stay on the grid: end the episode (as a time-out) before it leaves.
        margin = math.hypot(*cfg.height_scan.size) / 2 + 0.2
        terminations["out_of_bounds"] = TerminationTerm(partial(mdp.out_of_bounds, margin=margin), time_out=True)
    return TaskSpec(
        scene=Scene(mjcf, cfg.terrain, cfg.robot.locked_joints, cfg.robot.home_keyframe),
        robot=cfg.robot,
        observations=_observations(cfg, clock),
        action_mirror=mdp.mirror_joints,
        rewards=_rewards(cfg, clock),
        terminations=terminations,
        events=_events(cfg),
        commands={
            COMMAND: CommandTerm(
                sample,
                dim=sample.dim,
                resample_interval_s=commands.resample_interval_s,
                follow=sample.follow_heading if commands.heading else None,
            )
        },
        contacts=True,
        action_offset=mdp.home_joint_positions,
        action_feedforward=clock.feedforward if feedforward else None,
        action_feedforward_deployment=clock.deployment if feedforward else None,
        state=LeggedState,
        # Foot positions are read only after physics steps (and at the envs' start, which
        # computes the poses), and the foot speed skips the first update after a reset;
        # everything else reads qpos/qvel, contacts or model fields. So resets need no
        # kinematics pass.
        refresh_kinematics_on_reset=False,
    )


def velocity_task(name: str, env_cfg: VelocityEnvConfig, agent_cfg: AgentConfig = AGENT) -> Task:
    """A robot's velocity task: its env config with the shared terms (`build`) and figures."""
    return Task(name=name, env_cfg=env_cfg, agent_cfg=agent_cfg, build=build, play_metrics=play_metrics)
