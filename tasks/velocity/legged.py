"""Terms of legged velocity tracking: the velocity command, the feet's shared state (contacts,
swing timers, heights, speeds) and the rewards and evaluation figures built on them.

They read the robot's feet through `env.robot` (resolved from `RobotConfig.foot_geoms`), so
they hold for any legged robot, its feet spheres or boxes or capsules, and heights above the
terrain under them (`env.terrain`), so they hold on any ground.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import mujoco
import torch

from mjrl.envs import EnvComponent, VecEnv
from mjrl.envs.terms import (
    UniformRanges,
    base_ang_vel,
    base_lin_vel,
    base_position,
    base_rotation_transposed,
    joint_pos_rel,
    mirror_signs,
    per_joint_values,
)
from mjrl.errors import UsageError

if TYPE_CHECKING:
    from mjrl.tasks.velocity.config import GaitConfig

COMMAND = "base_velocity"
"""Name of the velocity command: (forward m/s, lateral m/s, yaw rad/s) in the base frame."""


@dataclasses.dataclass
class VelocityCommand:
    """Samples velocity commands; a `standing_fraction` of them are zero (stand still). With
    `heading`, a fourth column holds a target heading (world frame) and `follow_heading` steers
    the yaw-rate column towards it at every step, as legged_gym's heading commands: robots
    walk along straight lines, so how far they get measures how well they walk (the terrain
    curriculum's judgement)."""

    ranges: tuple[tuple[float, float], tuple[float, float], tuple[float, float]]
    """Ranges of the forward velocity, lateral velocity and yaw rate."""
    standing_fraction: float
    heading: bool = False
    _draws: UniformRanges | None = None

    @property
    def dim(self) -> int:
        return 4 if self.heading else 3

    def __call__(self, env: VecEnv) -> torch.Tensor:
        if self._draws is None:
            headings = ((-math.pi, math.pi),) if self.heading else ()
            self._draws = UniformRanges((*self.ranges, *headings))
        cmd = self._draws.draw(env)
        stand = torch.rand(env.num_envs, device=env.device, generator=env.generator) < self.standing_fraction
        return cmd * ~stand.unsqueeze(1)

    def follow_heading(self, env: VecEnv) -> None:
        """yaw rate = clip(0.5 * (target heading - heading), yaw-rate range), per step."""
        command = env.commands[COMMAND]
        forward = env.cached(base_rotation_transposed)[:, 0, :2]  # the base's x axis in the world
        error = command[:, 3] - torch.atan2(forward[:, 1], forward[:, 0])
        error = torch.atan2(torch.sin(error), torch.cos(error))  # wrapped to [-pi, pi]
        low, high = self.ranges[2]
        command[:, 2] = (0.5 * error).clamp(low, high) * (command[:, :2].abs().sum(dim=1) > 0)


def velocity_command(env: VecEnv) -> torch.Tensor:
    """(n, 3): commanded forward velocity, lateral velocity and yaw rate."""
    return env.commands[COMMAND][:, :3]


mirror_velocity_command = mirror_signs(1, -1, -1)
"""The mirrored robot is asked for the same forward speed, the opposite lateral speed and yaw rate."""


MOVING_COMMAND = 0.1
"""A command asks for motion when its planar speed (m/s) or its yaw rate (rad/s) exceeds this."""


def is_moving_command(env: VecEnv) -> torch.Tensor:
    """(n,) bool: the command asks for motion (not ~zero)."""
    cmd = velocity_command(env)
    return torch.maximum(torch.linalg.vector_norm(cmd[:, :2], dim=1), cmd[:, 2].abs()) > MOVING_COMMAND


class LeggedState(EnvComponent):
    """What the foot terms and the terrain curriculum read, advanced once per env step after the
    physics and the env's contact pass: which feet touch, their height and horizontal speed,
    their swing timers, and on a terrain grid the path the commands asked for. Right after a
    reset the contacts still describe the last physics step of the old episode."""

    def __init__(self, env: VecEnv):
        n, feet, dev = env.num_envs, env.robot.foot_geoms.numel(), env.device
        self.contacts = torch.zeros(n, feet, dtype=torch.bool, device=dev)
        """Which feet touch the ground."""
        self.height = torch.zeros(n, feet, device=dev)
        """Height of the bottom of each foot above the terrain right under it (m)."""
        self.speed = torch.zeros(n, feet, device=dev)
        """Horizontal speed of each foot over the last env step (m/s); 0 at the first update after
        a reset."""
        self.air_time = torch.zeros(n, feet, device=dev)
        """How long each foot has been in the air (s)."""
        self.landing_air_time = torch.zeros(n, feet, device=dev)
        """For feet that touched down this step, the swing time that just ended, else 0."""
        self.contact_time = torch.zeros(n, feet, device=dev)
        """How long each foot has been on the ground (s)."""
        self.commanded_path = torch.zeros(n, 2, device=dev)
        """On a terrain grid: where the commands would have taken the base since the episode
        began (m, world frame), each step's commanded velocity turned by the base's heading."""
        self.start_xy = base_position(env)[:, :2].clone()
        """Where the base was when the episode began (world frame, m)."""
        self.displacement = torch.zeros(n, device=dev)
        """How far the base ended from where it began (m), for the episodes that ended this
        step (`record_displacement`); 0 for the others."""
        self.last_contacts = torch.zeros(n, feet, dtype=torch.bool, device=dev)
        self.last_position = torch.zeros(n, feet, 3, device=dev)
        self.first_step = torch.ones(n, dtype=torch.bool, device=dev)
        """Which envs were reset since the state last advanced: their `last_position` is the old
        episode's, so their next foot speed is 0. Not read from the episode length, which an
        episode started at a random point of its length (`random_initial_episode_length`, every
        env after a resume) does not begin at 0."""

    def update(self, env: VecEnv) -> None:
        feet = env.robot.foot_geoms
        # Written in place: the state lives for the whole run (see `mjrl.envs.env`).
        torch.index_select(env.contacts, 1, feet, out=self.contacts)
        position = env.sim.geom_xpos.index_select(1, feet)
        # Foot speed by a finite difference over the env step; 0 at the first update after a reset.
        speed = torch.linalg.vector_norm(position[..., :2] - self.last_position[..., :2], dim=-1) / env.step_dt
        torch.mul(speed, ~self.first_step.unsqueeze(1), out=self.speed)
        self.first_step.fill_(False)
        torch.sub(position[..., 2], lowest_point_depth(env), out=self.height)
        if env.terrain is not None:
            self.height.sub_(env.terrain.height_at(position[..., :2]))
        self.last_position.copy_(position)
        # A foot counts as touching if it touches now or touched at the last step (filters
        # contact flicker).
        touching = self.contacts | self.last_contacts
        air_time = self.air_time + env.step_dt
        torch.mul(air_time, (self.air_time > 0) & touching, out=self.landing_air_time)
        torch.mul(air_time, ~touching, out=self.air_time)
        torch.mul(self.contact_time + env.step_dt, touching, out=self.contact_time)
        self.last_contacts.copy_(self.contacts)
        if env.terrain is not None:
            self.commanded_path += commanded_world_velocity(env) * env.step_dt

    def reset(self, env: VecEnv, mask: torch.Tensor) -> None:
        rows = mask.unsqueeze(1)
        for timer in (self.air_time, self.landing_air_time, self.contact_time, self.last_contacts):
            timer.masked_fill_(rows, 0)
        self.commanded_path.masked_fill_(rows, 0)
        self.first_step.masked_fill_(mask, True)
        torch.where(rows, base_position(env)[:, :2], self.start_xy, out=self.start_xy)


def record_displacement(env: VecEnv, ended: torch.Tensor) -> None:
    """Episode-end event: how far each finished episode's base got from where it began (for
    evaluation: a robot told to stand should not drift)."""
    state = feet(env)
    distance = torch.linalg.vector_norm(base_position(env)[:, :2] - state.start_xy, dim=1)
    torch.mul(distance, ended, out=state.displacement)


def commanded_world_velocity(env: VecEnv) -> torch.Tensor:
    """(n, 2): the commanded planar velocity (base frame) in the world frame, by the base's heading."""
    forward = env.cached(base_rotation_transposed)[:, 0, :2]  # the base's x axis in the world
    forward = forward / torch.linalg.vector_norm(forward, dim=1, keepdim=True).clamp(min=1e-6)
    left = torch.stack([-forward[:, 1], forward[:, 0]], dim=1)
    command = velocity_command(env)
    return command[:, :1] * forward + command[:, 1:2] * left


def lowest_point_depth(env: VecEnv) -> torch.Tensor:
    """(n, feet): how far below its centre each foot geom reaches, in its current orientation.
    With z_j the vertical components of the geom's local axes, s_j a box's or an ellipsoid's
    half-sizes, r a radius and h a half-length (along local z): a sphere r, a capsule r + h |z_2|,
    a box sum |z_j| s_j, a cylinder r sqrt(1 - z_2^2) + h |z_2|, an ellipsoid sqrt(sum (z_j s_j)^2).
    The terrain height is read under the foot's centre, not under its lowest point."""
    robot = env.robot
    size = robot.foot_sizes
    if robot.foot_shape == mujoco.mjtGeom.mjGEOM_SPHERE:
        return size[:, 0]
    up = env.sim.geom_xmat.index_select(1, robot.foot_geoms)[..., 2, :].abs()  # (n, feet, 3): |z_j|
    radius, half_length, tilt = size[:, 0], size[:, 1], up[..., 2]
    if robot.foot_shape == mujoco.mjtGeom.mjGEOM_CAPSULE:
        return radius + half_length * tilt
    if robot.foot_shape == mujoco.mjtGeom.mjGEOM_BOX:
        return (up * size).sum(dim=-1)
    if robot.foot_shape == mujoco.mjtGeom.mjGEOM_CYLINDER:
        return radius * (1 - tilt**2).clamp(min=0).sqrt() + half_length * tilt
    return torch.linalg.vector_norm(up * size, dim=-1)  # ellipsoid


def feet(env: VecEnv) -> LeggedState:
    return env.state


def foot_contact_states(env: VecEnv) -> torch.Tensor:
    """Privileged observation: 1 for each foot on the ground."""
    return feet(env).contacts.float()


# ---------------------------------------------------------------------------------- rewards


def track_lin_vel(env: VecEnv, sigma: float) -> torch.Tensor:
    """exp(-|v_xy - command_xy|^2 / sigma), in the base frame."""
    error = torch.sum((velocity_command(env)[:, :2] - env.cached(base_lin_vel)[:, :2]) ** 2, dim=1)
    return torch.exp(error / -sigma)


def track_yaw_rate(env: VecEnv, sigma: float) -> torch.Tensor:
    """exp(-(w_z - command_yaw)^2 / sigma)."""
    error = (velocity_command(env)[:, 2] - base_ang_vel(env)[:, 2]) ** 2
    return torch.exp(error / -sigma)


def feet_air_time(env: VecEnv, threshold: float) -> torch.Tensor:
    """Sum over the feet that touched down of (swing time - threshold); 0 for a ~zero command,
    so standing still is not punished for keeping its feet down."""
    landing = feet(env).landing_air_time
    per_foot = (landing - threshold) * (landing > 0)
    return per_foot.sum(dim=1) * env.cached(is_moving_command)


def feet_slip(env: VecEnv) -> torch.Tensor:
    """Sum over feet on the ground of their squared horizontal speed, while commanded to move."""
    state = feet(env)
    return torch.sum(state.speed**2 * state.contacts, dim=1) * env.cached(is_moving_command)


def feet_clearance(env: VecEnv, height: float) -> torch.Tensor:
    """Sum over feet of |height - target| times horizontal speed, while commanded to move."""
    state = feet(env)
    return torch.sum((state.height - height).abs() * state.speed, dim=1) * env.cached(is_moving_command)


def feet_single_stance(env: VecEnv, threshold: float) -> torch.Tensor:
    """While commanded to move and exactly one foot is on the ground: how long the foot that
    changed phase last has been in its phase (stance or swing), capped at `threshold` (s); else
    0. It pays a biped for stepping one foot at a time, and for steps of at least `threshold`
    (Isaac Lab's biped air-time term)."""
    state = feet(env)
    stance = state.contact_time > 0
    phase_time = torch.where(stance, state.contact_time, state.air_time)
    single = stance.sum(dim=1) == 1
    return phase_time.min(dim=1).values.clamp(max=threshold) * single * env.cached(is_moving_command)


@dataclasses.dataclass
class GaitClock:
    """A reference gait: a phase running from 0 to 1 every `period_s` of the episode, and for
    each foot a stance phase of `stance_fraction` of the cycle starting at its offset. It is the
    same in every episode at the same time, so the policy reads it from its observation.

    `swing_joint_offsets` (shell-style joint name patterns and offsets from home, rad) give the
    legs a reference swing: each such joint moves with the foot below it in the kinematic tree,
    home + offset * sin(pi * swing progress) while that foot swings, home otherwise."""

    period_s: float
    stance_fraction: float
    foot_offsets: tuple[float, ...]
    swing_joint_offsets: tuple[tuple[str, float], ...] = ()
    paid_joints: tuple[str, ...] = ("*",)
    _offsets: torch.Tensor | None = None
    _swing: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
    _paid: torch.Tensor | None = None

    @classmethod
    def of(cls, gait: GaitConfig) -> GaitClock:
        return cls(
            gait.period_s, gait.stance_fraction, gait.foot_phase_offsets, gait.swing_joint_offsets, gait.paid_joints
        )

    def phase(self, env: VecEnv) -> torch.Tensor:
        """(n,): the phase of the cycle, in [0, 1)."""
        return torch.remainder(env.episode_length * (env.step_dt / self.period_s), 1.0)

    def observation(self, env: VecEnv) -> torch.Tensor:
        """(n, 2): sin and cos of 2 pi phase, continuous over the cycle's end."""
        angle = (2 * math.pi) * self.phase(env)
        return torch.stack([torch.sin(angle), torch.cos(angle)], dim=1)

    def foot_phase(self, env: VecEnv) -> torch.Tensor:
        """(n, feet): where each foot is in its own cycle, 0 at the start of its stance."""
        if self._offsets is None:
            self._offsets = torch.tensor(self.foot_offsets, device=env.device)
        return torch.remainder(self.phase(env).unsqueeze(1) - self._offsets, 1.0)

    def in_stance(self, env: VecEnv) -> torch.Tensor:
        """(n, feet) bool: which feet the reference gait has on the ground."""
        return self.foot_phase(env) < self.stance_fraction

    def swing_joints(self, env: VecEnv) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The joints `swing_joint_offsets` name (action columns), the foot each moves with,
        and their offsets at mid-swing."""
        if self._swing is None:
            self._swing = _swing_joints(env, self.swing_joint_offsets)
        return self._swing

    def paid_swing_joints(self, env: VecEnv) -> torch.Tensor:
        """(swing joints,) bool: which of `swing_joints` `paid_joints` names."""
        if self._paid is None:
            columns = self.swing_joints(env)[0].tolist()
            named = per_joint_values(env, tuple((pattern, 1.0) for pattern in self.paid_joints))
            if not named.keys() & set(columns):
                names = [env.sim.actuator_joints()[column] for column in columns]
                raise UsageError(f"--env.gait.paid-joints match none of the swing joints {names}")
            self._paid = torch.tensor([column in named for column in columns], device=env.device)
        return self._paid

    def swing_reference(self, env: VecEnv) -> torch.Tensor:
        """(n, swing joints): the reference offsets from home of `swing_joints`, 0 while told
        to stand."""
        _, foot, amplitude = self.swing_joints(env)
        progress = (self.foot_phase(env).index_select(1, foot) - self.stance_fraction) / (1 - self.stance_fraction)
        lift = torch.sin(math.pi * progress.clamp(min=0))  # 0 in stance
        return amplitude * lift * env.cached(is_moving_command).unsqueeze(1)

    def feedforward(self, env: VecEnv) -> torch.Tensor:
        """(n, num_actions): the reference swing as offsets of the joint targets (rad), 0 for
        the joints it does not name."""
        columns, _, _ = self.swing_joints(env)
        offsets = torch.zeros(env.num_envs, env.num_actions, device=env.device)
        return offsets.index_add_(1, columns, self.swing_reference(env))

    def deployment(self, env: VecEnv) -> dict:
        """`feedforward` for an exported policy's sidecar: the parameters and the formula a
        robot-side runtime computes it with, from its own clock and command."""
        columns, feet, amplitudes = self.swing_joints(env)
        names = env.sim.actuator_joints()
        return {
            "kind": "reference_swing",
            "formula": (
                "target[action] += amplitude * sin(pi * max(0, (foot_phase - stance_fraction) / "
                "(1 - stance_fraction))) while the command asks for motion (max(|(vx, vy)|, |yaw rate|) > "
                "moving_threshold), else 0; foot_phase = (t / period_s - foot_phase_offset) mod 1, t the "
                "time since the episode started at the step the policy acts (the gait_clock observation is "
                "sin and cos of 2 pi t / period_s)"
            ),
            "period_s": self.period_s,
            "stance_fraction": self.stance_fraction,
            "moving_threshold": MOVING_COMMAND,
            "joints": [
                {"action": c, "joint": names[c], "foot_phase_offset": self.foot_offsets[f], "amplitude": a}
                for c, f, a in zip(columns.tolist(), feet.tolist(), amplitudes.tolist(), strict=True)
            ],
        }


def _swing_joints(env: VecEnv, offsets: tuple[tuple[str, float], ...]) -> tuple[torch.Tensor, ...]:
    model = env.sim.mj_model

    def ancestors(body: int) -> set[int]:
        chain = {body}
        while body > 0:
            body = int(model.body_parentid[body])
            chain.add(body)
        return chain

    foot_chains = [ancestors(int(model.geom_bodyid[g])) for g in env.robot.foot_geoms.tolist()]
    names, amplitudes = env.sim.actuator_joints(), per_joint_values(env, offsets)
    if not amplitudes:
        raise UsageError(f"--env.gait.swing-joint-offsets match none of the joints {names}")
    feet = []
    for column in amplitudes:
        name = names[column]
        body = int(model.jnt_bodyid[model.joint(name).id])
        below = [k for k, chain in enumerate(foot_chains) if body in chain]
        if len(below) != 1:
            raise UsageError(f"--env.gait.swing-joint-offsets names {name!r}, which moves {len(below)} feet, not 1")
        feet.append(below[0])
    return tuple(
        torch.tensor(values, device=env.device) for values in (list(amplitudes), feet, list(amplitudes.values()))
    )


mirror_gait_clock = mirror_signs(-1, -1)
"""The mirror image of a gait is the same gait half a period on, when mirrored feet are offset by
half a period: sin and cos of the phase change sign."""


def feet_gait(env: VecEnv, clock: GaitClock) -> torch.Tensor:
    """Number of feet whose contact matches the reference gait while commanded to move (down in
    stance, up in swing), or that are down while told to stand."""
    moving = env.cached(is_moving_command).unsqueeze(1)
    should_touch = clock.in_stance(env) | ~moving
    return (feet(env).contacts == should_touch).sum(dim=1).float()


class SwingFootLoad:
    """Sum over the feet the reference gait has in swing, while commanded to move, of the normal
    force on each (its `touch` sensor) over the robot's weight. The contact match (`feet_gait`)
    pays only once a foot is off the ground; this pays as soon as the weight shifts off the foot
    about to swing (the swing half of Siekmann et al.'s periodic reward, 2021)."""

    def __init__(self, clock: GaitClock):
        self.clock = clock
        self._columns: torch.Tensor | None = None
        self._weight = 1.0

    def __call__(self, env: VecEnv) -> torch.Tensor:
        if self._columns is None:
            self._columns = foot_touch_columns(env)
            model = env.sim.mj_model
            self._weight = float(model.body_subtreemass[env.robot.base_body]) * float(-model.opt.gravity[2])
        load = env.sim.sensordata.index_select(1, self._columns) / self._weight
        swinging = ~self.clock.in_stance(env) & env.cached(is_moving_command).unsqueeze(1)
        return torch.sum(load * swinging, dim=1)


def foot_touch_columns(env: VecEnv) -> torch.Tensor:
    """Per foot, the `sensordata` column of the touch sensor on a site of the foot geom's body."""
    model = env.sim.mj_model
    touch_body = {
        int(model.site_bodyid[model.sensor_objid[k]]): int(model.sensor_adr[k])
        for k in range(model.nsensor)
        if model.sensor_type[k] == mujoco.mjtSensor.mjSENS_TOUCH
    }
    columns = []
    for geom in env.robot.foot_geoms.tolist():
        body = int(model.geom_bodyid[geom])
        if body not in touch_body:
            raise UsageError(
                f"the feet_swing_load reward needs a touch sensor on each foot: add a site enclosing the "
                f'geom {model.geom(geom).name!r} and <sensor><touch site="..."/></sensor> to the robot\'s '
                "MJCF; or set its weight to 0"
            )
        columns.append(touch_body[body])
    return torch.tensor(columns, device=env.device)


class Posture:
    """exp(-mean over the actuated joints of ((q - q_home) / std)^2): 1 at the home pose. While
    told to stand every joint has `standing_std`; while moving each has the std of the first
    `walking_std` pattern its name matches (shell-style), looser for the joints a gait swings
    (mjlab's variable posture)."""

    def __init__(self, standing_std: float, walking_std: tuple[tuple[str, float], ...]):
        self.standing_std, self.walking_std = standing_std, walking_std
        self._walking: torch.Tensor | None = None

    def _walking_stds(self, env: VecEnv) -> torch.Tensor:
        stds = per_joint_values(env, self.walking_std)
        for column, name in enumerate(env.sim.actuator_joints()):
            if column not in stds:
                raise UsageError(f"--env.rewards.posture-std-walking has no pattern for the joint {name!r}: add one")
        return torch.tensor([stds[column] for column in range(len(stds))], device=env.device)

    def __call__(self, env: VecEnv) -> torch.Tensor:
        if self._walking is None:
            self._walking = self._walking_stds(env)
        moving = env.cached(is_moving_command).unsqueeze(1)
        std = torch.where(moving, self._walking, self.standing_std)
        return torch.exp(-torch.mean((joint_pos_rel(env) / std) ** 2, dim=1))


def gait_joints(env: VecEnv, clock: GaitClock) -> torch.Tensor:
    """exp(-2 |q - q_ref|) over the swing reference's joints, q_ref their reference: 1 on the
    reference swing (Humanoid-Gym's joint reference term). Unlike the contacts, it grows as a leg
    starts to bend, before its foot leaves the ground. While moving it counts only the joints
    the clock pays for (`paid_swing_joints`: the others make the stride); told to stand, every
    swing joint's reference is home and counts."""
    columns, _, _ = clock.swing_joints(env)
    error = joint_pos_rel(env).index_select(1, columns) - clock.swing_reference(env)
    counted = clock.paid_swing_joints(env) | ~env.cached(is_moving_command).unsqueeze(1)
    return torch.exp(-2 * torch.linalg.vector_norm(error * counted, dim=1))


def feet_tilt(env: VecEnv) -> torch.Tensor:
    """Sum over feet of the squared horizontal components of gravity in the foot's frame: 0 for
    soles parallel to level ground (flat feet land flat and push off flat). For feet whose
    geom's local z is the sole's normal (boxes); it means nothing for spheres."""
    axes_z = env.sim.geom_xmat.index_select(1, env.robot.foot_geoms)[..., 2, :2]  # z of the feet's x, y axes
    return torch.sum(axes_z**2, dim=(1, 2))


# ------------------------------------------------------------------------------- curriculum


def terrain_curriculum(env: VecEnv, ended: torch.Tensor) -> None:
    """Episode-end event: judge each finished episode by how far the robot got from its patch's
    centre against how far its commands would have taken it (the length of the commanded path's
    end-to-end displacement, `LeggedState.commanded_path`), and move the env up or down a row
    (`TerrainState.end_episodes`). Episodes that began at a random point of their length are not
    judged.

    legged_gym compares with the last command's speed times the episode length instead. With
    commands resampled every 3-8 s that asks for the length of a path of several legs in
    random directions, which is about twice the displacement they add up to: a simulated
    perfect tracker of this task's commands was demoted in 28% of its episodes that way, and in
    none with the commanded path (docs/benchmarks.md)."""
    terrain = env.terrain
    distance = torch.linalg.vector_norm(base_position(env)[:, :2] - terrain.patch_center()[:, :2], dim=1)
    commanded = torch.linalg.vector_norm(feet(env).commanded_path, dim=1)
    terrain.end_episodes(ended & env.whole_episode, distance, commanded)


# ------------------------------------------------------------------------------- evaluation


def play_metrics(env: VecEnv) -> dict[str, torch.Tensor]:
    """Per-env command tracking errors and gait figures at the current state, for evaluation.

    Contract: call after `env.step` (or `env.reset`); returns (num_envs,) float tensors on
    `env.device`, computed without any host synchronisation:
      - "lin_vel_error": |command_xy - v_xy| (m/s), the norm of the planar velocity error in the
        base frame;
      - "yaw_rate_error": |command_yaw - w_z| (rad/s);
      - "foot_contact_fraction": the share of feet on the ground;
      - "swing_time_total" and "swing_time_count": the summed swing times of the feet that
        touched down this step, and their number (their ratio is the mean swing time);
      - the same per foot, for gait symmetry: "foot_contact_fraction/<foot geom>" (1 or 0) and
        "swing_time/<foot geom>_total" with its "_count";
      - per episode that ended this step, "displacement_total" (how far the base ended from
        where it began, m) with its "_count";
      - on a terrain grid, per episode that ended this step: "travel_distance_total" (how far it
        ended from its patch's centre, m) and "success_total" (1 when that is at least half a
        patch and the episode was not terminated), each with its "_count" of episodes.
    These are instantaneous values; the caller averages them over steps and envs. For envs that
    just finished, they describe the first state of the new episode (as `obs` does).
    """
    cmd = velocity_command(env)
    lin = torch.linalg.vector_norm(cmd[:, :2] - env.cached(base_lin_vel)[:, :2], dim=1)
    yaw = (cmd[:, 2] - base_ang_vel(env)[:, 2]).abs()
    state = feet(env)
    landing = state.landing_air_time
    figures = {
        "lin_vel_error": lin,
        "yaw_rate_error": yaw,
        "foot_contact_fraction": state.contacts.float().mean(dim=1),
        "swing_time_total": landing.sum(dim=1),
        "swing_time_count": (landing > 0).sum(dim=1).float(),
    }
    for i, foot in enumerate(env.cfg.robot.foot_geoms):
        figures[f"foot_contact_fraction/{foot}"] = state.contacts[:, i].float()
        figures[f"swing_time/{foot}_total"] = landing[:, i]
        figures[f"swing_time/{foot}_count"] = (landing[:, i] > 0).float()
    ended = (env.episode_length == 0).float()  # reset this step
    figures["displacement_total"] = state.displacement  # 0 but for the episodes that ended
    figures["displacement_count"] = ended
    if env.terrain is not None:
        distance = env.terrain.last_distance
        success = (distance >= env.terrain.cfg.patch_size / 2) & ~env.terminated
        figures |= {
            "travel_distance_total": distance * ended,
            "travel_distance_count": ended,
            "success_total": success.float() * ended,
            "success_count": ended,
        }
    return figures
