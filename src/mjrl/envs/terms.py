"""Robot-agnostic terms for floating-base robots: observations, rewards, terminations and
events that read only `env.robot` (a resolved `RobotConfig`), the simulation and the env.

Every function takes the env first; settings come after it and are bound with
`functools.partial` when a task builds its terms. Quantities that several terms derive from one
state (the base's rotation, its velocity in its own frame) go through `env.cached`, so they cost
their tensor operations once per state.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
from functools import cache

import mujoco
import torch

from mjrl.envs.env import VecEnv
from mjrl.envs.spec import MirrorFn
from mjrl.errors import UsageError
from mjrl.mirror import ColumnMirror

# ---------------------------------------------------------------------------------- helpers


def uniform(env: VecEnv, low: float, high: float, *shape: int) -> torch.Tensor:
    """(num_envs, *shape) uniform draws from the env's generator."""
    u = torch.rand(env.num_envs, *shape, device=env.device, generator=env.generator)
    return low + (high - low) * u


def masked_write(mask: torch.Tensor, new: torch.Tensor, out: torch.Tensor) -> None:
    """Write `new` into `out` (a state or model-field view) for the envs where `mask` is set,
    leaving the others; the mask is broadcast over trailing dims. One operation, in place."""
    torch.where(mask.view(-1, *([1] * (out.dim() - 1))), new, out, out=out)


@dataclasses.dataclass
class UniformRanges:
    """Several uniform ranges drawn in one call: their bounds become device vectors once, at the
    first draw, instead of a host-to-device copy at every use."""

    ranges: tuple[tuple[float, float], ...]
    _low_width: tuple[torch.Tensor, torch.Tensor] | None = None

    def draw(self, env: VecEnv) -> torch.Tensor:
        """(num_envs, len(ranges)) draws, column i from ranges[i]."""
        if self._low_width is None:
            low = torch.tensor([r[0] for r in self.ranges], device=env.device)
            self._low_width = (low, torch.tensor([r[1] for r in self.ranges], device=env.device) - low)
        low, width = self._low_width
        return low + width * torch.rand(env.num_envs, len(self.ranges), device=env.device, generator=env.generator)


# --------------------------------------------------------------------- mirror images (symmetry)
# A term declares how its columns mirror when the robot is reflected in its x-z plane (left and
# right swap); see `ObsTerm.mirror`. A mirror function returns None when this robot cannot be
# mirrored (its config names no symmetry), and the task then has none.


def unchanged(env: VecEnv, width: int) -> ColumnMirror:
    """Columns that mirroring leaves alone: heights, masses, friction, forward quantities."""
    return ColumnMirror.identity(width)


def mirror_signs(*signs: float) -> MirrorFn:
    """Columns that stay in place and are multiplied by `signs`."""

    def mirror(env: VecEnv, width: int) -> ColumnMirror:
        return ColumnMirror(torch.arange(len(signs)), torch.tensor(signs, dtype=torch.float32))

    return mirror


POLAR_VECTOR = mirror_signs(1, -1, 1)
"""A velocity or direction in the base frame: its lateral component flips."""
AXIAL_VECTOR = mirror_signs(-1, 1, -1)
"""An angular velocity in the base frame: roll and yaw rates flip, the pitch rate stays."""


def mirror_joints(env: VecEnv, width: int) -> ColumnMirror | None:
    """Per-joint columns in action order: left and right swap, joints turning about x or z flip."""
    return env.robot.joint_mirror


def mirror_feet(env: VecEnv, width: int) -> ColumnMirror | None:
    """Per-foot columns: left and right feet swap."""
    return env.robot.foot_mirror


# Entries of the world-to-body rotation R(q)^T of a unit quaternion q = (w, x, y, z), row by
# row, as quadratic forms in q (the constant 1 written as w² + x² + y² + z²): with the 16
# products q_a q_b, the whole matrix is one matrix product.
_RT_TERMS = (
    {"ww": 1, "xx": 1, "yy": -1, "zz": -1}, {"xy": 2, "wz": 2}, {"xz": 2, "wy": -2},
    {"xy": 2, "wz": -2}, {"ww": 1, "xx": -1, "yy": 1, "zz": -1}, {"yz": 2, "wx": 2},
    {"xz": 2, "wy": 2}, {"yz": 2, "wx": -2}, {"ww": 1, "xx": -1, "yy": -1, "zz": 1},
)  # fmt: skip


@cache
def quat_products_to_rotation(device: torch.device) -> torch.Tensor:
    """The (16, 9) matrix taking the products q_a q_b (index 4a + b) to R(q)^T, row-major."""
    matrix = torch.zeros(16, 9)
    for entry, terms in enumerate(_RT_TERMS):
        for pair, coefficient in terms.items():
            a, b = ("wxyz".index(c) for c in pair)
            matrix[4 * a + b, entry] = coefficient
    return matrix.to(device)


def base_rotation_transposed(env: VecEnv) -> torch.Tensor:
    """(n, 3, 3) rotation from the world frame into the base's (R^T of the free joint's quaternion)."""
    start = env.robot.base_qpos + 3
    q = env.sim.qpos[:, start : start + 4]
    products = (q.unsqueeze(2) * q.unsqueeze(1)).flatten(1)
    return (products @ quat_products_to_rotation(env.device)).view(-1, 3, 3)


# ----------------------------------------------------------------------------- observations


def base_lin_vel(env: VecEnv) -> torch.Tensor:
    """Base linear velocity in the base frame (the free joint's qvel is in the world frame)."""
    dof = env.robot.base_dof
    return (env.cached(base_rotation_transposed) * env.sim.qvel[:, dof : dof + 3].unsqueeze(1)).sum(dim=2)


def base_ang_vel(env: VecEnv) -> torch.Tensor:
    """Base angular velocity in the base frame (the free joint's qvel already is)."""
    dof = env.robot.base_dof
    return env.sim.qvel[:, dof + 3 : dof + 6]


def projected_gravity(env: VecEnv) -> torch.Tensor:
    """The unit gravity direction in the base frame: (0, 0, -1) when level. That is minus the
    world z axis seen from the base: minus the last column of R^T."""
    return -env.cached(base_rotation_transposed)[:, :, 2]


def base_position(env: VecEnv) -> torch.Tensor:
    """(n, 3) the base's position in the world."""
    start = env.robot.base_qpos
    return env.sim.qpos[:, start : start + 3]


def base_height(env: VecEnv) -> torch.Tensor:
    """Base height above the terrain right under it."""
    z = env.robot.base_qpos + 2
    height = env.sim.qpos[:, z : z + 1]
    if env.terrain is None:  # flat ground at z = 0
        return height
    return height - env.terrain.height_at(base_position(env)[:, :2]).unsqueeze(1)


def joint_pos_rel(env: VecEnv) -> torch.Tensor:
    """Actuated joint positions relative to the home pose, in action order."""
    return env.sim.qpos[:, env.robot.joint_qpos] - env.robot.home_joint_pos


def joint_vel(env: VecEnv) -> torch.Tensor:
    return env.sim.qvel[:, env.robot.joint_dof]


def last_action(env: VecEnv) -> torch.Tensor:
    """The raw action applied in the step just taken."""
    return env.actions


def command(env: VecEnv, name: str) -> torch.Tensor:
    """The current value of command `name`."""
    return env.commands[name]


def ground_friction(env: VecEnv) -> torch.Tensor:
    """Privileged: this env's sliding friction of the ground."""
    ground = env.robot.ground_geom
    return env.sim.model_field("geom_friction")[:, ground, 0:1]


@dataclasses.dataclass(eq=False)  # hashed by identity: `env.cached` keys on it
class HeightScan:
    """Terrain heights on a grid of points around the base that turns with its heading (not its
    roll or pitch), as the base's height above each point, clipped to +-`clip`: (n, points).
    Points run along x first (forward), then y (left). On flat ground it reads the base height
    at every point."""

    size: tuple[float, float]
    """Extent of the grid along the heading and across it (m)."""
    resolution: float
    """Spacing of the points (m)."""
    clip: float = 1.0
    _offsets: torch.Tensor | None = None

    def __call__(self, env: VecEnv) -> torch.Tensor:
        if self._offsets is None:
            self._offsets = scan_offsets(self.size, self.resolution, env.device)
        position = base_position(env)
        # The heading's direction: the base's x axis in the world (a row of R^T), made horizontal.
        forward = env.cached(base_rotation_transposed)[:, 0, :2]
        forward = forward / torch.linalg.vector_norm(forward, dim=1, keepdim=True).clamp(min=1e-6)
        cos, sin = forward[:, 0:1], forward[:, 1:2]
        x, y = self._offsets[:, 0], self._offsets[:, 1]
        points = torch.stack([cos * x - sin * y, sin * x + cos * y], dim=-1) + position[:, None, :2]
        ground = env.terrain.height_at(points) if env.terrain is not None else torch.zeros_like(points[..., 0])
        return (position[:, 2:3] - ground).clamp(-self.clip, self.clip)

    def mirror(self, env: VecEnv, width: int) -> ColumnMirror:
        """The grid turns with the heading, so the mirrored robot reads at point k what this one
        reads at k's reflection across the heading (y -> -y)."""
        offsets = scan_offsets(self.size, self.resolution, torch.device("cpu"))
        reflected = offsets * torch.tensor([1.0, -1.0])
        distance, source = torch.linalg.vector_norm(reflected[:, None] - offsets[None], dim=-1).min(dim=1)
        if distance.max() > 1e-6:
            raise ValueError(f"height scan {self.size} at {self.resolution}: points not symmetric across the heading")
        return ColumnMirror(source, torch.ones(width))


def scan_problem(size: tuple[float, float], resolution: float) -> str | None:
    """Why a scan of `size` at `resolution` would not be a grid centred on the base, or None: a
    side that is no whole multiple of the spacing leaves its last point short of the edge."""
    if all(abs(side / resolution - round(side / resolution)) < 1e-6 for side in size):
        return None
    return (
        f"--env.height-scan.size {size[0]:g} {size[1]:g} must be whole multiples of "
        f"--env.height-scan.resolution {resolution:g}, so that the points are centred on the base"
    )


def scan_offsets(size: tuple[float, float], resolution: float, device: torch.device) -> torch.Tensor:
    """(points, 2) offsets of a centred grid of `size` at `resolution`, x varying fastest."""
    xs = torch.arange(round(size[0] / resolution) + 1, device=device) * resolution - size[0] / 2
    ys = torch.arange(round(size[1] / resolution) + 1, device=device) * resolution - size[1] / 2
    grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([grid_x.flatten(), grid_y.flatten()], dim=1)


def base_mass_offset(env: VecEnv) -> torch.Tensor:
    """Privileged: mass added to the base (kg)."""
    base = env.robot.base_body
    return env.sim.model_field("body_mass")[:, base : base + 1] - env.robot.base_mass


# ---------------------------------------------------------------------------------- rewards


def lin_vel_z(env: VecEnv) -> torch.Tensor:
    """Vertical base velocity squared."""
    return env.cached(base_lin_vel)[:, 2] ** 2


def ang_vel_xy(env: VecEnv) -> torch.Tensor:
    """Roll and pitch rate squared."""
    return torch.sum(base_ang_vel(env)[:, :2] ** 2, dim=1)


def joint_torques(env: VecEnv) -> torch.Tensor:
    """Sum of squared actuator forces."""
    return torch.sum(env.sim.actuator_force**2, dim=1)


def joint_acc(env: VecEnv) -> torch.Tensor:
    """Joint accelerations of the last physics substep (qacc, as mjlab), not a finite difference."""
    return torch.sum(env.sim.qacc[:, env.robot.joint_dof] ** 2, dim=1)


def action_rate(env: VecEnv) -> torch.Tensor:
    """Squared change of the raw action between env steps."""
    return torch.sum((env.actions - env.last_actions) ** 2, dim=1)


def flat_orientation(env: VecEnv) -> torch.Tensor:
    """Squared horizontal components of gravity in the base frame (0 when level)."""
    return torch.sum(env.cached(projected_gravity)[:, :2] ** 2, dim=1)


def upright(env: VecEnv, sigma: float) -> torch.Tensor:
    """exp(-|g_xy|^2 / sigma), g the gravity direction in the base frame: 1 when level. A
    payment for standing up where `flat_orientation` is a penalty for leaning: with it, every
    step a biped stays up is worth something, so falling costs what the rest of the episode
    would have paid."""
    return torch.exp(flat_orientation(env) / -sigma)


def undesired_contacts(env: VecEnv) -> torch.Tensor:
    """Number of the robot's undesired-contact geoms touching the ground."""
    return env.contacts.index_select(1, env.robot.undesired_geoms).sum(dim=1).float()


def self_collisions(env: VecEnv) -> torch.Tensor:
    """Number of contacts between two of the robot's geoms (those its MJCF lets collide)."""
    return env.sim.count_contacts_excluding(env.robot.ground_geom)


def per_joint_values(env: VecEnv, patterns: tuple[tuple[str, float], ...]) -> dict[int, float]:
    """For each actuated joint (by action column) whose name matches one of `patterns`
    (shell-style name patterns with a value each), the value of the first that matches."""
    values = {}
    for column, name in enumerate(env.sim.actuator_joints()):
        matches = [value for pattern, value in patterns if fnmatch.fnmatchcase(name, pattern)]
        if matches:
            values[column] = matches[0]
    return values


class JointDeviation:
    """Sum of |q - q_home| over the actuated joints whose names match one of `patterns`
    (shell-style, e.g. "*hip_roll*"): holds joints that walking needs little near home."""

    def __init__(self, patterns: tuple[str, ...]):
        self.patterns = patterns
        self._columns: torch.Tensor | None = None

    def __call__(self, env: VecEnv) -> torch.Tensor:
        if self._columns is None:
            names = env.sim.actuator_joints()
            columns = [k for k, name in enumerate(names) if any(fnmatch.fnmatchcase(name, p) for p in self.patterns)]
            if not columns:
                raise UsageError(f"joint_deviation_joints {list(self.patterns)} match none of the joints {names}")
            self._columns = torch.tensor(columns, device=env.device)
        return joint_pos_rel(env).index_select(1, self._columns).abs().sum(dim=1)


class AngularMomentum:
    """Squared norm of the robot's angular momentum about its centre of mass ((kg m^2/s)^2), from
    the MJCF's `subtreeangmom` sensor on the base body: limbs swinging one way while the rest
    does not turn the other, which the base's own angular velocity does not see."""

    def __init__(self) -> None:
        self._columns: slice | None = None

    def __call__(self, env: VecEnv) -> torch.Tensor:
        if self._columns is None:
            self._columns = subtree_angmom_columns(env)
        return torch.sum(env.sim.sensordata[:, self._columns] ** 2, dim=1)


def subtree_angmom_columns(env: VecEnv) -> slice:
    """Where the base body's `subtreeangmom` sensor writes in `sensordata`."""
    model, base = env.sim.mj_model, env.robot.base_body
    for k in range(model.nsensor):
        if model.sensor_type[k] == mujoco.mjtSensor.mjSENS_SUBTREEANGMOM and model.sensor_objid[k] == base:
            return slice(int(model.sensor_adr[k]), int(model.sensor_adr[k]) + 3)
    name = model.body(base).name
    raise UsageError(
        f"the angular_momentum reward needs a sensor in the robot's MJCF: "
        f'<sensor><subtreeangmom body="{name}"/></sensor>; or set its weight to 0'
    )


def is_terminated(env: VecEnv) -> torch.Tensor:
    """1 where a termination term ends the episode this step (time-outs excluded), else 0."""
    return env.terminated.float()


# ------------------------------------------------------------------------------ terminations


def illegal_contact(env: VecEnv) -> torch.Tensor:
    """One of the robot's fatal-contact geoms touches the ground."""
    return env.contacts.index_select(1, env.robot.fatal_geoms).any(dim=1)


def out_of_bounds(env: VecEnv, margin: float) -> torch.Tensor:
    """The base is within `margin` of the terrain grid's edge (a time-out: the robot did nothing
    wrong, the world ends there). Never on flat ground."""
    if env.terrain is None:
        return torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
    low, high = env.terrain.inner_bounds(margin)
    xy = base_position(env)[:, :2]
    return ((xy < low) | (xy > high)).any(dim=1)


def bad_orientation(env: VecEnv, max_tilt: float) -> torch.Tensor:
    """The base's up axis is tilted more than `max_tilt` from vertical (or upside down)."""
    return env.cached(projected_gravity)[:, 2] > -math.cos(max_tilt)


# ------------------------------------------------------------------------------------ events


def home_joint_positions(env: VecEnv) -> torch.Tensor:
    """Action offset: the home pose's joint positions, so a zero action holds the home pose."""
    return env.robot.home_joint_pos


@dataclasses.dataclass
class ResetToHome:
    """Reset event: the home pose with a random heading, uniform joint offsets (clamped to the
    joint ranges) and a uniform base velocity. The heading replaces the home orientation."""

    joint_pos_noise: float
    """Half-width (rad) of the joint offsets."""
    base_vel_noise: float
    """Half-width of the base's linear (m/s) and angular (rad/s) velocity."""
    _plan: _ResetPlan | None = None

    def __call__(self, env: VecEnv, mask: torch.Tensor) -> None:
        if self._plan is None:
            self._plan = _ResetPlan.build(env, self.joint_pos_noise, self.base_vel_noise)
        plan, joints = self._plan, env.num_actions
        # One draw for every random number: half the heading, joint offsets, 6 base velocities.
        draw = plan.draws.draw(env)
        half_yaw = draw[:, :1]
        # The quaternion (cos, 0, 0, sin) of the heading and the joint offsets, each added to
        # its qpos column of the home pose (whose base orientation is zeroed).
        values = torch.cat([half_yaw.cos(), half_yaw.sin(), draw[:, 1 : 1 + joints]], dim=1)
        offsets = torch.zeros_like(env.sim.qpos).index_copy_(1, plan.qpos_columns, values)
        qpos = torch.clamp(plan.home_qpos + offsets, plan.qpos_lower, plan.qpos_upper)
        qvel = torch.zeros_like(env.sim.qvel).index_copy_(1, plan.base_vel_columns, draw[:, 1 + joints :])
        if env.terrain is not None:
            qpos[:, plan.base_position] += spawn_offset(env)
        masked_write(mask, qpos, env.sim.qpos)
        masked_write(mask, qvel, env.sim.qvel)


@dataclasses.dataclass(frozen=True)
class _ResetPlan:
    """What `ResetToHome` derives once from the robot, on the env's device."""

    draws: UniformRanges
    home_qpos: torch.Tensor
    """The home qpos with the base's quaternion zeroed: the heading's quaternion is added."""
    qpos_columns: torch.Tensor
    """Where the drawn values go: the quaternion's w and z, then the joints in action order."""
    qpos_lower: torch.Tensor
    qpos_upper: torch.Tensor
    """Joint ranges in qpos layout (unbounded for the other coordinates)."""
    base_vel_columns: torch.Tensor
    base_position: slice
    """The free joint's x, y, z in qpos."""

    @staticmethod
    def build(env: VecEnv, joint_pos_noise: float, base_vel_noise: float) -> _ResetPlan:
        robot, device, nq = env.robot, env.device, env.sim.qpos.shape[1]
        quat = robot.base_qpos + 3
        joint_columns = torch.arange(nq, device=device)[robot.joint_qpos]
        home_qpos = robot.home_qpos.clone()
        home_qpos[quat : quat + 4] = 0.0
        lower = torch.full((nq,), -math.inf, device=device).index_copy_(0, joint_columns, robot.joint_lower)
        upper = torch.full((nq,), math.inf, device=device).index_copy_(0, joint_columns, robot.joint_upper)
        pos, vel = joint_pos_noise, base_vel_noise
        return _ResetPlan(
            draws=UniformRanges(((-math.pi / 2, math.pi / 2), *[(-pos, pos)] * env.num_actions, *[(-vel, vel)] * 6)),
            home_qpos=home_qpos,
            qpos_columns=torch.cat([torch.tensor([quat, quat + 3], device=device), joint_columns]),
            qpos_lower=lower,
            qpos_upper=upper,
            base_vel_columns=torch.arange(robot.base_dof, robot.base_dof + 6, device=device),
            base_position=slice(robot.base_qpos, robot.base_qpos + 3),
        )


def spawn_offset(env: VecEnv) -> torch.Tensor:
    """(n, 3) where each env's robot starts on the terrain, relative to its home position: its
    patch's centre, jittered by up to `spawn_jitter` in x and y, raised to the platform's height."""
    terrain = env.terrain
    center = terrain.patch_center()
    jitter = uniform(env, -terrain.cfg.spawn_jitter, terrain.cfg.spawn_jitter, 2)
    return torch.cat([center[:, :2] + jitter, center[:, 2:3]], dim=1)


def randomize_friction_and_mass(
    env: VecEnv, mask: torch.Tensor, friction: tuple[float, float], base_mass_offset: tuple[float, float]
) -> None:
    """Per-env ground friction and base mass, written into the per-world model fields (the task
    makes `geom_friction` and `body_mass` per-world fields).

    The friction goes to every geom of the env's world: MuJoCo uses the larger friction of the
    two geoms in contact, so this makes it the friction of every contact.
    """
    friction_field = env.sim.model_field("geom_friction")
    mu = uniform(env, *friction).unsqueeze(1)
    masked_write(mask, mu, friction_field[:, :, 0])
    mass, base = env.sim.model_field("body_mass"), env.robot.base_body
    masked_write(mask, env.robot.base_mass + uniform(env, *base_mass_offset), mass[:, base])
    env.sim.update_subtree_masses()


def push_base(env: VecEnv, mask: torch.Tensor, velocity: float) -> None:
    """Add a random horizontal velocity (half-width `velocity`) to the base."""
    kick = uniform(env, -velocity, velocity, 2)
    dof = env.robot.base_dof
    env.sim.qvel[:, dof : dof + 2] += kick * mask.unsqueeze(1)
