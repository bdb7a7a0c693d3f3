"""Event terms: what happens to an env at a reset or at intervals (poses, randomisation, pushes)."""

from __future__ import annotations

import dataclasses
import math

import torch

from mjrl.envs.env import VecEnv
from mjrl.envs.terms.common import UniformRanges, masked_write, uniform


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
