"""The legged robots' shared per-step state: `LeggedState` (an `mjrl.envs.EnvComponent` the env
advances once per step: foot contacts, heights above the terrain, speeds, swing timers, the
commanded path and the episode's start) and its readers. The feet are read through `env.robot`
(resolved from `RobotConfig.foot_geoms`), so it holds for any legged robot, its feet spheres or
boxes or capsules, and heights above the terrain under them (`env.terrain`), so on any ground.
"""

from __future__ import annotations

import mujoco
import torch

from mjrl.envs import EnvComponent, VecEnv
from mjrl.envs.terms import base_position
from mjrl.tasks.velocity.commands import commanded_world_velocity


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
