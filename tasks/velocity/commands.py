"""The velocity command of legged velocity tracking: its name (`COMMAND`), its sampler
(`VelocityCommand`, with legged_gym's heading commands), the observation of it and its mirror,
whether it asks for motion (`is_moving_command`, which most foot rewards gate on) and the
commanded velocity in the world frame.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from mjrl.envs import VecEnv
from mjrl.envs.terms import UniformRanges, base_rotation_transposed, mirror_signs

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


def commanded_world_velocity(env: VecEnv) -> torch.Tensor:
    """(n, 2): the commanded planar velocity (base frame) in the world frame, by the base's heading."""
    forward = env.cached(base_rotation_transposed)[:, 0, :2]  # the base's x axis in the world
    forward = forward / torch.linalg.vector_norm(forward, dim=1, keepdim=True).clamp(min=1e-6)
    left = torch.stack([-forward[:, 1], forward[:, 0]], dim=1)
    command = velocity_command(env)
    return command[:, :1] * forward + command[:, 1:2] * left
