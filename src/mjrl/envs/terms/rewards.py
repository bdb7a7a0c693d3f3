"""Reward terms: (num_envs,) tensors, each weighted by its task and summed into the reward."""

from __future__ import annotations

import fnmatch

import mujoco
import torch

from mjrl.envs.env import VecEnv
from mjrl.envs.terms.observations import base_ang_vel, base_lin_vel, joint_pos_rel, projected_gravity
from mjrl.errors import UsageError


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


def joint_limits(env: VecEnv, soft: float) -> torch.Tensor:
    """How far (rad, summed over the actuated joints) the joints are beyond their soft limits:
    the middle `soft` share of each joint's range."""
    q = env.sim.qpos[:, env.robot.joint_qpos]
    middle = 0.5 * (env.robot.joint_upper + env.robot.joint_lower)
    half = 0.5 * soft * (env.robot.joint_upper - env.robot.joint_lower)
    return ((q - middle).abs() - half).clamp(min=0.0).sum(dim=1)


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
