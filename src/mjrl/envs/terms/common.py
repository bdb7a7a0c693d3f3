"""What several kinds of terms share: draws and masked writes, command ranges, the base's rotation."""

from __future__ import annotations

import dataclasses

import torch

from mjrl.envs.env import VecEnv


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


# Entries of the world-to-body rotation R(q)^T of a unit quaternion q = (w, x, y, z), row by
# row, as quadratic forms in q (the constant 1 written as w² + x² + y² + z²): with the 16
# products q_a q_b, the whole matrix is one matrix product.
_RT_TERMS = (
    {"ww": 1, "xx": 1, "yy": -1, "zz": -1}, {"xy": 2, "wz": 2}, {"xz": 2, "wy": -2},
    {"xy": 2, "wz": -2}, {"ww": 1, "xx": -1, "yy": 1, "zz": -1}, {"yz": 2, "wx": 2},
    {"xz": 2, "wy": 2}, {"yz": 2, "wx": -2}, {"ww": 1, "xx": -1, "yy": -1, "zz": 1},
)  # fmt: skip


_RT_MATRICES: dict[torch.device, torch.Tensor] = {}
"""`quat_products_to_rotation`'s matrix per device, made once (a plain dict, which torch.compile
reads as it is, where it would trace through a `functools.cache` wrapper, warning)."""


def quat_products_to_rotation(device: torch.device) -> torch.Tensor:
    """The (16, 9) matrix taking the products q_a q_b (index 4a + b) to R(q)^T, row-major."""
    matrix = _RT_MATRICES.get(device)
    if matrix is None:
        matrix = torch.zeros(16, 9)
        for entry, terms in enumerate(_RT_TERMS):
            for pair, coefficient in terms.items():
                a, b = ("wxyz".index(c) for c in pair)
                matrix[4 * a + b, entry] = coefficient
        matrix = _RT_MATRICES[device] = matrix.to(device)
    return matrix


def base_rotation_transposed(env: VecEnv) -> torch.Tensor:
    """(n, 3, 3) rotation from the world frame into the base's (R^T of the free joint's quaternion)."""
    start = env.robot.base_qpos + 3
    q = env.sim.qpos[:, start : start + 4]
    products = (q.unsqueeze(2) * q.unsqueeze(1)).flatten(1)
    return (products @ quat_products_to_rotation(env.device)).view(-1, 3, 3)
