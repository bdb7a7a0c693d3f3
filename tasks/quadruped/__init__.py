"""Velocity tracking on flat ground with a Go1-class quadruped (12 position-controlled joints).

The policy acts at 50 Hz (0.005 s physics steps, decimation 4) and sets joint position targets
around the standing pose. It is commanded a forward and lateral velocity and a yaw rate in its
own frame, resampled every few seconds, and rewarded for tracking them (legged_gym / mjlab
style rewards). The critic also sees privileged state: ground friction, foot contacts, the
trunk's added mass and the trunk height.

Reward scaling: every weight is per second. `build` multiplies it by the env step (0.02 s), as
legged_gym and mjlab do, so an episode's return does not depend on the control rate and the
perfect tracking return of a 20 s episode is 20 * (weight_lin + weight_yaw).
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from pathlib import Path
from typing import ClassVar

import mujoco
import torch

from mjrl.envs import EnvConfig, EventTerm, ObsTerm, RewardTerm, TaskSpec, TerminationTerm, VecEnv
from mjrl.rl.config import AgentConfig
from mjrl.sim import SimConfig, Simulation
from mjrl.tasks.base import Task

MODEL_XML = Path(__file__).parent / "go1.xml"
LEGS = ("FR", "FL", "RR", "RL")


# ------------------------------------------------------------------------------ model layout


@dataclasses.dataclass(frozen=True)
class Layout:
    """Indices and constants read once from the MJCF, so terms need no name look-ups."""

    home_qpos: tuple[float, ...]
    """qpos of the "home" keyframe (free joint then the 12 leg joints)."""
    joint_lower: tuple[float, ...]
    """Lower joint limits of the 12 leg joints."""
    joint_upper: tuple[float, ...]
    """Upper joint limits of the 12 leg joints."""
    ngeom: int
    """Number of geoms in the model."""
    foot_geoms: tuple[int, ...]
    """Geom ids of the four feet (FR, FL, RR, RL)."""
    foot_sites: tuple[int, ...]
    """Site ids at the centres of the four foot spheres (FR, FL, RR, RL)."""
    foot_radius: float
    """Radius of the foot spheres (m): a foot site this high is on flat ground."""
    fatal_geoms: tuple[int, ...]
    """Geom ids whose ground contact ends the episode: trunk and thighs."""
    body_geoms: tuple[int, ...]
    """Geom ids of every colliding non-foot part: trunk, thighs and calves."""
    trunk_body: int
    """Body id of the trunk."""
    trunk_mass: float
    """The trunk's nominal mass in kg."""
    floor_geom: int
    """Geom id of the floor."""


def read_layout(model: mujoco.MjModel) -> Layout:
    jnt = [model.joint(f"{leg}_{part}_joint").id for leg in LEGS for part in ("hip", "thigh", "calf")]
    if [int(model.jnt_qposadr[j]) for j in jnt] != list(range(7, 19)):
        raise ValueError("the leg joints must follow the free joint in qpos, in FR, FL, RR, RL order")
    trunk = model.body("trunk").id
    fatal = (model.geom("trunk").id, *(model.geom(f"{leg}_thigh").id for leg in LEGS))
    return Layout(
        home_qpos=tuple(float(x) for x in model.key("home").qpos),
        joint_lower=tuple(float(model.jnt_range[j, 0]) for j in jnt),
        joint_upper=tuple(float(model.jnt_range[j, 1]) for j in jnt),
        ngeom=model.ngeom,
        foot_geoms=tuple(model.geom(f"{leg}_foot").id for leg in LEGS),
        foot_sites=tuple(model.site(f"{leg}_foot").id for leg in LEGS),
        foot_radius=float(model.geom_size[model.geom("FR_foot").id, 0]),
        fatal_geoms=fatal,
        body_geoms=fatal + tuple(model.geom(f"{leg}_calf").id for leg in LEGS),
        trunk_body=trunk,
        trunk_mass=float(model.body_mass[trunk]),
        floor_geom=model.geom("floor").id,
    )


LAYOUT = read_layout(mujoco.MjModel.from_xml_path(str(MODEL_XML)))


# ---------------------------------------------------------------------------------- config


@dataclasses.dataclass(frozen=True)
class CommandConfig:
    """Velocity commands, in the robot's heading frame."""

    lin_vel_x: tuple[float, float] = (-1.0, 1.0)
    """Range of the forward velocity command (m/s)."""
    lin_vel_y: tuple[float, float] = (-0.5, 0.5)
    """Range of the lateral velocity command (m/s)."""
    yaw_rate: tuple[float, float] = (-1.0, 1.0)
    """Range of the yaw rate command (rad/s)."""
    standing_fraction: float = 0.1
    """Probability that a (re)sampled command is zero: stand still."""
    resample_interval_s: tuple[float, float] = (3.0, 8.0)
    """Commands are resampled after a time drawn uniformly from this range (and at resets)."""

    bounds: ClassVar[dict] = {
        "lin_vel_x": "ordered",
        "lin_vel_y": "ordered",
        "yaw_rate": "ordered",
        "standing_fraction": "[0, 1]",
        "resample_interval_s": ("> 0", "ordered"),
    }


@dataclasses.dataclass(frozen=True)
class ObsNoiseConfig:
    """Std of the Gaussian noise on actor observations (used when `obs_noise` is on)."""

    lin_vel: float = 0.1
    """Base linear velocity (m/s)."""
    ang_vel: float = 0.2
    """Base angular velocity (rad/s)."""
    gravity: float = 0.05
    """Projected gravity (unit vector)."""
    joint_pos: float = 0.01
    """Joint positions (rad)."""
    joint_vel: float = 1.5
    """Joint velocities (rad/s)."""

    bounds: ClassVar[dict] = {name: ">= 0" for name in ("lin_vel", "ang_vel", "gravity", "joint_pos", "joint_vel")}


@dataclasses.dataclass(frozen=True)
class RewardConfig:
    """Reward weights, per second of simulated time (multiplied by the 0.02 s env step).

    Tracking, action-rate and foot terms follow mjlab's velocity task (its Go1 weights): a policy
    that moves by jittering its joints, feet sliding on the ground, must pay for it, or the noise
    of the Gaussian policy is what tracks the command and its mean action barely moves."""

    track_lin_vel: float = 2.0
    """exp(-|v_xy - command_xy|^2 / tracking_sigma), base frame."""
    track_yaw_rate: float = 1.0
    """exp(-(w_z - command_yaw)^2 / tracking_sigma), base frame."""
    tracking_sigma: float = 0.25
    """Squared error (m^2/s^2 or rad^2/s^2) at which a tracking reward falls to 1/e."""
    lin_vel_z: float = -2.0
    """Vertical base velocity squared."""
    ang_vel_xy: float = -0.05
    """Roll and pitch rate squared."""
    joint_torques: float = -2e-4
    """Sum of squared actuator torques (Nm^2)."""
    joint_acc: float = -2.5e-7
    """Sum of squared joint accelerations ((rad/s^2)^2)."""
    action_rate: float = -0.1
    """Sum of squared changes of the raw action between env steps (mjlab's weight; -0.01 left
    a jittering policy almost unpunished)."""
    undesired_contacts: float = -1.0
    """Number of non-foot bodies (trunk, thighs, calves) touching the floor."""
    flat_orientation: float = -2.0
    """Squared horizontal components of gravity in the base frame (0 when level)."""
    termination: float = -500.0
    """Paid on the step an episode terminates (not on time-outs): -500 x 0.02 s = -10. Without it
    an untrained policy, whose penalties outweigh its tracking reward, learns to fall at once."""
    feet_air_time: float = 1.0
    """Sum over feet touching down of (air time - feet_air_time_threshold), while commanded to move."""
    feet_air_time_threshold: float = 0.5
    """Swing duration (s) above which a step is rewarded and below which it is penalised."""
    feet_slip: float = -0.1
    """Sum over feet on the ground of their squared horizontal speed (m^2/s^2), while commanded
    to move: feet that slide instead of stepping."""
    feet_clearance: float = -2.0
    """Sum over feet of |height above ground - feet_clearance_height| times the foot's horizontal
    speed, while commanded to move: a foot that moves should be lifted."""
    feet_clearance_height: float = 0.08
    """Target height (m) of the bottom of a moving foot."""

    # The weights are any finite numbers (penalties are negative).
    bounds: ClassVar[dict] = {
        "tracking_sigma": "> 0",
        "feet_air_time_threshold": ">= 0",
        "feet_clearance_height": ">= 0",
    }


@dataclasses.dataclass(frozen=True)
class RandomizationConfig:
    """Domain randomisation, reset distribution and pushes."""

    friction: tuple[float, float] = (0.5, 1.25)
    """Range of the sliding friction of the ground contacts, drawn per env at every reset."""
    trunk_mass_offset: tuple[float, float] = (-1.0, 1.0)
    """Range of the mass (kg) added to the trunk, drawn per env at every reset."""
    joint_pos_noise: float = 0.1
    """Half-width of the uniform offset (rad) of the initial joint positions from home."""
    base_vel_noise: float = 0.5
    """Half-width of the uniform initial base linear (m/s) and angular (rad/s) velocity."""
    push_velocity: float = 0.5
    """Half-width of the uniform horizontal velocity change (m/s) of a push; 0 disables pushes."""
    push_interval_s: tuple[float, float] = (8.0, 12.0)
    """Time between pushes of an env, drawn uniformly from this range."""

    bounds: ClassVar[dict] = {
        "friction": (">= 0", "ordered"),
        "trunk_mass_offset": "ordered",
        "joint_pos_noise": ">= 0",
        "base_vel_noise": ">= 0",
        "push_velocity": ">= 0",
        "push_interval_s": ("> 0", "ordered"),
    }


@dataclasses.dataclass(frozen=True)
class QuadrupedEnvConfig(EnvConfig):
    """Go1-class quadruped, velocity tracking on flat ground."""

    episode_length_s: float = 20.0
    """Episode length in seconds (1000 env steps at 50 Hz)."""
    action_scale: float = 0.25
    """Joint position target = home + action_scale * action (rad per unit action)."""
    action_clip: float = 100.0
    """As legged_gym: effectively unclipped; the actuators' ctrlrange (the joint range) bounds targets."""
    max_tilt_rad: float = 1.0
    """The episode ends when the trunk's up axis is tilted more than this from vertical."""
    commands: CommandConfig = CommandConfig()
    """Velocity command distribution."""
    noise: ObsNoiseConfig = ObsNoiseConfig()
    """Actor observation noise."""
    rewards: RewardConfig = RewardConfig()
    """Reward weights."""
    randomization: RandomizationConfig = RandomizationConfig()
    """Domain randomisation and pushes."""
    sim: SimConfig = SimConfig(
        decimation=4,
        timestep=0.005,
        # Geometric worst cases, so they can never overflow: at most 24 contacts per world (trunk
        # box 4, thigh and calf capsules 2 each, feet 1 each) and 72 constraint rows (trunk and
        # thighs 1 row per contact as condim 1, calves and feet 4 (pyramidal condim 3), plus 12
        # joint limits). `scripts/bench_quadruped.py --check-buffers` saw at most 8 contacts and
        # 32 rows in a world; on the CPU with 64 worlds these bounds run as fast as (8, 32) or
        # mujoco_warp's defaults (48, 64) within the noise of a few percent.
        nconmax=24,
        njmax=72,
        per_world_model_fields=("geom_friction", "body_mass"),
    )

    bounds: ClassVar[dict] = {"max_tilt_rad": "> 0"}


# ---------------------------------------------------------------------------------- helpers


# Entries of the world-to-body rotation R(q)^T of a unit quaternion q = (w, x, y, z), row by
# row, as quadratic forms in q (the constant 1 written as w² + x² + y² + z²): with the 16
# products q_a q_b, the whole matrix is one matrix product.
_RT_TERMS = (
    {"ww": 1, "xx": 1, "yy": -1, "zz": -1}, {"xy": 2, "wz": 2}, {"xz": 2, "wy": -2},
    {"xy": 2, "wz": -2}, {"ww": 1, "xx": -1, "yy": 1, "zz": -1}, {"yz": 2, "wx": 2},
    {"xz": 2, "wy": 2}, {"yz": 2, "wx": -2}, {"ww": 1, "xx": -1, "yy": -1, "zz": 1},
)  # fmt: skip


def quat_products_to_rotation(device: torch.device) -> torch.Tensor:
    """The (16, 9) matrix taking the products q_a q_b (index 4a + b) to R(q)^T, row-major."""
    matrix = torch.zeros(16, 9)
    for entry, terms in enumerate(_RT_TERMS):
        for pair, coefficient in terms.items():
            a, b = ("wxyz".index(c) for c in pair)
            matrix[4 * a + b, entry] = coefficient
    return matrix.to(device)


def trunk_rotation_transposed(env: VecEnv) -> torch.Tensor:
    """(n, 3, 3) rotation from the world frame into the trunk's (R^T of the free joint's
    quaternion); computed once per state (`env.cached`) and shared by the terms below."""
    q = env.sim.qpos[:, 3:7]
    products = (q.unsqueeze(2) * q.unsqueeze(1)).flatten(1)
    return (products @ env.buffers["quat_to_rt"]).view(-1, 3, 3)


def _uniform(env: VecEnv, low: float, high: float, *shape: int) -> torch.Tensor:
    u = torch.rand(env.num_envs, *shape, device=env.device, generator=env.generator)
    return low + (high - low) * u


def _masked(mask: torch.Tensor, new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """`new` where the per-env `mask` is set, else `old` (mask broadcast over trailing dims)."""
    return torch.where(mask.view(-1, *([1] * (old.dim() - 1))), new, old)


def command(env: VecEnv) -> torch.Tensor:
    """(n, 3): commanded forward velocity, lateral velocity and yaw rate."""
    return env.buffers["command"]


def step_state(env: VecEnv) -> dict[str, torch.Tensor]:
    """What several terms read after a physics step, computed once per step: which geoms touch
    the floor, foot contacts, foot positions and speeds, and the feet's swing timers.

    Terms call this freely; it recomputes only after the simulation has stepped (its Python
    `physics_version` counter, so no host synchronisation). Contacts come from the contact array of the last
    physics substep, which all worlds share (the first `nacon` rows are valid). Contact sensors
    would give the same answer but are evaluated at every substep and cost about 20% of the
    physics. Right after a reset these still describe the last substep of the old episode.
    """
    buf = env.buffers
    if buf["_stamp"] == env.sim.physics_version:
        return buf["_step_state"]
    buf["_stamp"] = env.sim.physics_version
    geoms = _geom_contacts(env)
    feet = geoms.index_select(1, buf["foot_geoms"])
    foot_pos = env.sim.site_xpos.index_select(1, buf["foot_sites"])
    # Foot speed by a finite difference over the env step; not defined on an episode's first step.
    speed = torch.linalg.vector_norm(foot_pos[..., :2] - buf["last_foot_pos"][..., :2], dim=-1) / env.step_dt
    speed = speed * (env.episode_length > 1).unsqueeze(1)
    buf["last_foot_pos"].copy_(foot_pos)
    _advance_air_time(env, feet)
    buf["_step_state"] = {
        "geom_contacts": geoms,
        "foot_contacts": feet,
        "foot_height": foot_pos[..., 2] - LAYOUT.foot_radius,
        "foot_speed": speed,
        "landing_air_time": buf["landing_air_time"],
    }
    return buf["_step_state"]


def _geom_contacts(env: VecEnv) -> torch.Tensor:
    """(n, ngeom) bool: which geoms of each world are in contact (the floor is all they can touch)."""
    sim = env.sim
    geom, world = sim.contact_geom.long(), sim.contact_worldid.long()
    valid = env.buffers["contact_rows"] < sim.nacon
    index = torch.where(valid.unsqueeze(1), world.unsqueeze(1) * LAYOUT.ngeom + geom, 0)
    hits = torch.zeros(env.num_envs * LAYOUT.ngeom, device=env.device)
    hits.index_add_(0, index.view(-1), valid.float().repeat_interleave(2))
    return hits.view(env.num_envs, LAYOUT.ngeom) > 0


def _advance_air_time(env: VecEnv, contact: torch.Tensor) -> None:
    """Advance the per-foot swing timers by one env step. A foot counts as in contact if it
    touches now or touched at the last step (filters contact flicker). `landing_air_time` holds,
    for feet that touched down this step, the swing time that just ended, else 0."""
    buf = env.buffers
    touching = contact | buf["last_contact"]
    air_time = buf["air_time"] + env.step_dt
    buf["landing_air_time"].copy_(air_time * ((buf["air_time"] > 0) & touching))
    buf["air_time"].copy_(air_time * ~touching)
    buf["last_contact"].copy_(contact)


def foot_contacts(env: VecEnv) -> torch.Tensor:
    """(n, 4) bool: which feet touch the floor (FR, FL, RR, RL)."""
    return step_state(env)["foot_contacts"]


def is_moving_command(env: VecEnv) -> torch.Tensor:
    """(n,) bool: the command asks for motion (not ~zero)."""
    cmd = command(env)
    return (torch.linalg.vector_norm(cmd[:, :2], dim=1) > 0.1) | (cmd[:, 2].abs() > 0.1)


# ----------------------------------------------------------------------------- observations


def base_lin_vel(env: VecEnv) -> torch.Tensor:
    """Trunk linear velocity in the trunk frame (the free joint's qvel is in the world frame)."""
    return (env.cached(trunk_rotation_transposed) * env.sim.qvel[:, 0:3].unsqueeze(1)).sum(dim=2)


def base_ang_vel(env: VecEnv) -> torch.Tensor:
    """Trunk angular velocity in the trunk frame (the free joint's qvel already is)."""
    return env.sim.qvel[:, 3:6]


def projected_gravity(env: VecEnv) -> torch.Tensor:
    """The unit gravity direction in the trunk frame: (0, 0, -1) when level. That is minus the
    world z axis seen from the trunk: minus the last column of R^T."""
    return -env.cached(trunk_rotation_transposed)[:, :, 2]


def joint_pos_rel(env: VecEnv) -> torch.Tensor:
    return env.sim.qpos[:, 7:] - env.buffers["home_joint_pos"]


def joint_vel(env: VecEnv) -> torch.Tensor:
    return env.sim.qvel[:, 6:]


def last_action(env: VecEnv) -> torch.Tensor:
    """The raw action applied in the step just taken."""
    return env.actions


def ground_friction(env: VecEnv) -> torch.Tensor:
    """Privileged: this env's sliding friction of the ground."""
    return env.sim.model_field("geom_friction")[:, LAYOUT.floor_geom, 0:1]


def trunk_mass_offset(env: VecEnv) -> torch.Tensor:
    """Privileged: mass added to the trunk (kg)."""
    return env.sim.model_field("body_mass")[:, LAYOUT.trunk_body : LAYOUT.trunk_body + 1] - LAYOUT.trunk_mass


def foot_contact_states(env: VecEnv) -> torch.Tensor:
    """Privileged: 1 for each foot on the ground. Right after a reset this still shows the last
    physics step's contacts (contacts are only recomputed by a physics step)."""
    return foot_contacts(env).float()


def base_height(env: VecEnv) -> torch.Tensor:
    """Privileged: trunk height above the (flat) ground."""
    return env.sim.qpos[:, 2:3]


# ---------------------------------------------------------------------------------- rewards


def track_lin_vel(env: VecEnv, sigma: float) -> torch.Tensor:
    error = torch.sum((command(env)[:, :2] - env.cached(base_lin_vel)[:, :2]) ** 2, dim=1)
    return torch.exp(-error / sigma)


def track_yaw_rate(env: VecEnv, sigma: float) -> torch.Tensor:
    error = (command(env)[:, 2] - base_ang_vel(env)[:, 2]) ** 2
    return torch.exp(-error / sigma)


def lin_vel_z(env: VecEnv) -> torch.Tensor:
    return env.cached(base_lin_vel)[:, 2] ** 2


def ang_vel_xy(env: VecEnv) -> torch.Tensor:
    return torch.sum(base_ang_vel(env)[:, :2] ** 2, dim=1)


def joint_torques(env: VecEnv) -> torch.Tensor:
    return torch.sum(env.sim.actuator_force**2, dim=1)


def joint_acc(env: VecEnv) -> torch.Tensor:
    """Joint accelerations of the last physics substep (qacc, as mjlab), not a finite difference."""
    return torch.sum(env.sim.qacc[:, 6:] ** 2, dim=1)


def action_rate(env: VecEnv) -> torch.Tensor:
    return torch.sum((env.actions - env.last_actions) ** 2, dim=1)


def undesired_contacts(env: VecEnv) -> torch.Tensor:
    return step_state(env)["geom_contacts"].index_select(1, env.buffers["body_geoms"]).sum(dim=1).float()


def flat_orientation(env: VecEnv) -> torch.Tensor:
    return torch.sum(env.cached(projected_gravity)[:, :2] ** 2, dim=1)


def feet_air_time(env: VecEnv, threshold: float) -> torch.Tensor:
    """Sum over the feet that touched down of (swing time - threshold); 0 for a ~zero command,
    so standing still is not punished for keeping its feet down."""
    landing = step_state(env)["landing_air_time"]
    per_foot = torch.where(landing > 0, landing - threshold, torch.zeros_like(landing))
    return per_foot.sum(dim=1) * env.cached(is_moving_command)


def feet_slip(env: VecEnv) -> torch.Tensor:
    state = step_state(env)
    return torch.sum(state["foot_speed"] ** 2 * state["foot_contacts"], dim=1) * env.cached(is_moving_command)


def feet_clearance(env: VecEnv, height: float) -> torch.Tensor:
    state = step_state(env)
    return torch.sum((state["foot_height"] - height).abs() * state["foot_speed"], dim=1) * env.cached(is_moving_command)


def termination(env: VecEnv, max_tilt: float) -> torch.Tensor:
    """1 where a termination condition holds (the env will end this step), else 0."""
    return (illegal_contact(env) | bad_orientation(env, max_tilt)).float()


# ------------------------------------------------------------------------------ terminations


def illegal_contact(env: VecEnv) -> torch.Tensor:
    """The trunk or a thigh touches the ground."""
    return step_state(env)["geom_contacts"].index_select(1, env.buffers["fatal_geoms"]).any(dim=1)


def bad_orientation(env: VecEnv, max_tilt: float) -> torch.Tensor:
    """The trunk's up axis is tilted more than `max_tilt` from vertical (or upside down)."""
    return env.cached(projected_gravity)[:, 2] > -math.cos(max_tilt)


# ------------------------------------------------------------------------------------ events


def make_buffers(env: VecEnv) -> dict:
    n, dev = env.num_envs, env.device
    home = torch.tensor(LAYOUT.home_qpos, dtype=torch.float32, device=dev)

    def index(ids: tuple[int, ...]) -> torch.Tensor:
        # Index tensors live on the device: a Python tuple as an index is copied there (and,
        # on a GPU, waited for) at every use.
        return torch.tensor(ids, dtype=torch.long, device=dev)

    return {
        "command": torch.zeros(n, 3, device=dev),
        "air_time": torch.zeros(n, 4, device=dev),
        "landing_air_time": torch.zeros(n, 4, device=dev),
        "last_contact": torch.zeros(n, 4, dtype=torch.bool, device=dev),
        "last_foot_pos": torch.zeros(n, 4, 3, device=dev),
        # Constants on the env's device, kept here so terms need not rebuild them every step.
        "home_qpos": home,
        "quat_to_rt": quat_products_to_rotation(dev),
        "home_joint_pos": home[7:],
        "joint_lower": torch.tensor(LAYOUT.joint_lower, device=dev),
        "joint_upper": torch.tensor(LAYOUT.joint_upper, device=dev),
        "foot_geoms": index(LAYOUT.foot_geoms),
        "foot_sites": index(LAYOUT.foot_sites),
        "body_geoms": index(LAYOUT.body_geoms),
        "fatal_geoms": index(LAYOUT.fatal_geoms),
        "contact_rows": torch.arange(env.sim.contact_worldid.shape[0], device=dev),
        # `step_state`'s cache, keyed by the simulation's step counter.
        "_stamp": -1,
        "_step_state": {},
    }


def _range_tensors(env: VecEnv, key: str, ranges: tuple[tuple[float, float], ...]) -> tuple[torch.Tensor, ...]:
    """(low, width) of several uniform ranges as device vectors, made once (at construction,
    when every env is reset) and kept in the env's buffers."""
    if key not in env.buffers:
        low = torch.tensor([r[0] for r in ranges], device=env.device)
        env.buffers[key] = (low, torch.tensor([r[1] for r in ranges], device=env.device) - low)
    return env.buffers[key]


def resample_commands(env: VecEnv, mask: torch.Tensor, cfg: CommandConfig) -> None:
    low, width = _range_tensors(env, "_command_ranges", (cfg.lin_vel_x, cfg.lin_vel_y, cfg.yaw_rate))
    cmd = low + width * torch.rand(env.num_envs, 3, device=env.device, generator=env.generator)
    stand = torch.rand(env.num_envs, device=env.device, generator=env.generator) < cfg.standing_fraction
    cmd = cmd * ~stand.unsqueeze(1)
    env.buffers["command"].copy_(_masked(mask, cmd, env.buffers["command"]))


def reset_robot(env: VecEnv, mask: torch.Tensor, cfg: QuadrupedEnvConfig) -> None:
    """Home pose with a random heading, joint offsets and base velocity; fresh command and
    swing timers."""
    buf, rand = env.buffers, cfg.randomization
    qpos = buf["home_qpos"].expand(env.num_envs, -1).clone()
    # One draw for every random number: heading, 12 joint offsets, 6 base velocities.
    ranges = ((-math.pi, math.pi), *[(-rand.joint_pos_noise, rand.joint_pos_noise)] * 12,
              *[(-rand.base_vel_noise, rand.base_vel_noise)] * 6)  # fmt: skip
    low, width = _range_tensors(env, "_reset_ranges", ranges)
    draw = low + width * torch.rand(env.num_envs, 19, device=env.device, generator=env.generator)
    half_yaw = draw[:, 0] / 2
    qpos[:, 3] = torch.cos(half_yaw)
    qpos[:, 6] = torch.sin(half_yaw)
    qpos[:, 7:] = torch.clamp(qpos[:, 7:] + draw[:, 1:13], buf["joint_lower"], buf["joint_upper"])
    qvel = torch.zeros_like(env.sim.qvel)
    qvel[:, :6] = draw[:, 13:]
    env.sim.qpos.copy_(_masked(mask, qpos, env.sim.qpos))
    env.sim.qvel.copy_(_masked(mask, qvel, env.sim.qvel))
    resample_commands(env, mask, cfg.commands)
    for name in ("air_time", "landing_air_time", "last_contact"):
        buf[name].masked_fill_(mask.unsqueeze(1), 0)


def randomize_physics(env: VecEnv, mask: torch.Tensor, cfg: RandomizationConfig) -> None:
    """Per-env ground friction and trunk mass, written into the per-world model fields.

    The friction goes to every geom of the env's world: MuJoCo uses the larger friction of the
    two geoms in contact, so this makes it the friction of every contact.
    """
    friction = env.sim.model_field("geom_friction")
    mu = _uniform(env, *cfg.friction).unsqueeze(1).expand(-1, friction.shape[1])
    friction[:, :, 0] = _masked(mask, mu, friction[:, :, 0])
    mass = env.sim.model_field("body_mass")
    trunk = LAYOUT.trunk_mass + _uniform(env, *cfg.trunk_mass_offset)
    mass[:, LAYOUT.trunk_body] = _masked(mask, trunk, mass[:, LAYOUT.trunk_body])


def push_robot(env: VecEnv, mask: torch.Tensor, push_velocity: float) -> None:
    """Add a random horizontal velocity to the trunk. Interval timers all start due, so envs at
    time 0 (constructed or reset this step) are skipped: they were just given a random velocity."""
    due = mask & (env.sim.time > 0)
    kick = _uniform(env, -push_velocity, push_velocity, 2)
    env.sim.qvel[:, :2] += kick * due.unsqueeze(1)


# ------------------------------------------------------------------------------------- build


def play_metrics(env: VecEnv) -> dict[str, torch.Tensor]:
    """Per-env command tracking errors at the current state, for evaluation.

    Contract: call after `env.step` (or `env.reset`); returns (num_envs,) float tensors on
    `env.device`, computed without any host synchronisation:
      - "lin_vel_error": |command_xy - v_xy| (m/s), the norm of the planar velocity error in the
        base frame;
      - "yaw_rate_error": |command_yaw - w_z| (rad/s);
      - "foot_contact_fraction": the share of feet on the ground;
      - "swing_time_total" and "swing_time_count": the summed swing times of the feet that
        touched down this step, and their number (their ratio is the mean swing time).
    These are instantaneous values; the caller averages them over steps and envs. For envs that
    just finished, they describe the first state of the new episode (as `obs` does).
    """
    cmd = command(env)
    lin = torch.linalg.vector_norm(cmd[:, :2] - env.cached(base_lin_vel)[:, :2], dim=1)
    yaw = (cmd[:, 2] - base_ang_vel(env)[:, 2]).abs()
    state = step_state(env)
    landing = state["landing_air_time"]
    return {
        "lin_vel_error": lin,
        "yaw_rate_error": yaw,
        "foot_contact_fraction": state["foot_contacts"].float().mean(dim=1),
        "swing_time_total": landing.sum(dim=1),
        "swing_time_count": (landing > 0).sum(dim=1).float(),
    }


def _observations(cfg: QuadrupedEnvConfig) -> dict[str, dict[str, ObsTerm]]:
    noise = cfg.noise
    actor = {
        "base_lin_vel": ObsTerm(base_lin_vel, noise_std=noise.lin_vel),
        "base_ang_vel": ObsTerm(base_ang_vel, noise_std=noise.ang_vel),
        "projected_gravity": ObsTerm(projected_gravity, noise_std=noise.gravity),
        "command": ObsTerm(command),
        "joint_pos": ObsTerm(joint_pos_rel, noise_std=noise.joint_pos),
        "joint_vel": ObsTerm(joint_vel, noise_std=noise.joint_vel),
        "last_action": ObsTerm(last_action),
    }
    privileged = {
        "ground_friction": ObsTerm(ground_friction),
        "foot_contacts": ObsTerm(foot_contact_states),
        "trunk_mass_offset": ObsTerm(trunk_mass_offset),
        "base_height": ObsTerm(base_height),
    }
    # Critic observations are never noised (VecEnv only noises the "actor" group).
    return {"actor": actor, "critic": {**actor, **privileged}}


def _rewards(cfg: QuadrupedEnvConfig) -> dict[str, RewardTerm]:
    w, dt = cfg.rewards, cfg.sim.timestep * cfg.sim.decimation
    funcs = {
        "track_lin_vel": partial(track_lin_vel, sigma=w.tracking_sigma),
        "track_yaw_rate": partial(track_yaw_rate, sigma=w.tracking_sigma),
        "lin_vel_z": lin_vel_z,
        "ang_vel_xy": ang_vel_xy,
        "joint_torques": joint_torques,
        "joint_acc": joint_acc,
        "action_rate": action_rate,
        "undesired_contacts": undesired_contacts,
        "flat_orientation": flat_orientation,
        "feet_air_time": partial(feet_air_time, threshold=w.feet_air_time_threshold),
        "feet_slip": feet_slip,
        "feet_clearance": partial(feet_clearance, height=w.feet_clearance_height),
        "termination": partial(termination, max_tilt=cfg.max_tilt_rad),
    }
    return {name: RewardTerm(func, weight=getattr(w, name) * dt) for name, func in funcs.items() if getattr(w, name)}


def home_joint_targets(sim: Simulation) -> torch.Tensor:
    """Action offset: the home pose's joint positions (actuator i drives leg joint i)."""
    return torch.tensor(LAYOUT.home_qpos[7:], dtype=torch.float32)


def build(cfg: QuadrupedEnvConfig) -> TaskSpec:
    rand = cfg.randomization
    events = {
        "randomize_physics": EventTerm(partial(randomize_physics, cfg=rand), mode="reset"),
        "reset_robot": EventTerm(partial(reset_robot, cfg=cfg), mode="reset"),
        "resample_commands": EventTerm(
            partial(resample_commands, cfg=cfg.commands), mode="interval", interval_s=cfg.commands.resample_interval_s
        ),
    }
    if rand.push_velocity > 0:
        events["push_robot"] = EventTerm(
            partial(push_robot, push_velocity=rand.push_velocity), mode="interval", interval_s=rand.push_interval_s
        )
    return TaskSpec(
        model_xml=MODEL_XML,
        observations=_observations(cfg),
        rewards=_rewards(cfg),
        terminations={
            "illegal_contact": TerminationTerm(illegal_contact),
            "bad_orientation": TerminationTerm(partial(bad_orientation, max_tilt=cfg.max_tilt_rad)),
        },
        events=events,
        action_offset=home_joint_targets,
        buffers=make_buffers,
        # Foot poses are read only by rewards, which run before resets, and the foot speed skips
        # each episode's first step; everything else reads qpos/qvel, contacts or model fields.
        # So resets need no kinematics pass.
        refresh_kinematics_on_reset=False,
    )


AGENT = AgentConfig(
    num_steps_per_env=24,
    max_iterations=1500,
    save_interval=100,
    eval_interval=50,
    warm_up_normalizers=True,
    actor_hidden_dims=(512, 256, 128),
    critic_hidden_dims=(512, 256, 128),
    activation="elu",
    init_noise_std=1.0,
    # The adaptive schedule's starting point. Adam's first steps move every weight by about the
    # rate whatever the gradient, and at 1e-3 iteration 0's KL was 3.3x the later median (256
    # envs); at 3e-4 it is 1.4x. The schedule settles at 4e-5 to 3e-4 within a few minibatch
    # steps either way (docs/benchmarks.md, "The KL guard").
    learning_rate=3e-4,
    schedule="adaptive",
    desired_kl=0.01,
    num_learning_epochs=5,
    num_mini_batches=4,
    clip_param=0.2,
    entropy_coef=0.01,
    gamma=0.99,
    lam=0.95,
)

VELOCITY_FLAT = Task(
    name="Mjrl-Velocity-Flat-Quadruped",
    env_cfg=QuadrupedEnvConfig(),
    agent_cfg=AGENT,
    build=build,
    play_metrics=play_metrics,
)
