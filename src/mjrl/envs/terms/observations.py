"""Observation terms: (num_envs, width) tensors of what the policy and the critic see."""

from __future__ import annotations

import dataclasses

import torch

from mjrl.envs.env import VecEnv
from mjrl.envs.terms.common import base_rotation_transposed
from mjrl.mirror import ColumnMirror


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
