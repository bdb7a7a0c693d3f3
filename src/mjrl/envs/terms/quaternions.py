"""Quaternion arithmetic the terms share: batched torch, w x y z (MuJoCo's order), unit
quaternions in the last dimension, broadcast over the leading ones."""

from __future__ import annotations

import torch


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The Hamilton product a b: the rotation b, then a."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        dim=-1,
    )


def quat_conj(q: torch.Tensor) -> torch.Tensor:
    """The inverse rotation of a unit quaternion."""
    return torch.cat((q[..., :1], -q[..., 1:]), dim=-1)


def quat_apply(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """v rotated by q: v + 2 w (u x v) + 2 u x (u x v), with u the vector part."""
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * torch.linalg.cross(u, v, dim=-1)
    return v + w * t + torch.linalg.cross(u, t, dim=-1)


def quat_apply_inverse(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """v seen from the frame q: rotated by the inverse of q."""
    return quat_apply(quat_conj(q), v)


def yaw_quat(q: torch.Tensor) -> torch.Tensor:
    """The rotation about the vertical that has q's heading (its x axis projected on the plane)."""
    w, x, y, z = q.unbind(-1)
    yaw = torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    half = 0.5 * yaw
    zero = torch.zeros_like(half)
    return torch.stack((half.cos(), zero, zero, half.sin()), dim=-1)


def quat_angle(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The angle (rad, in [0, pi]) of the rotation from b to a."""
    d = quat_mul(a, quat_conj(b))
    return 2.0 * torch.atan2(torch.linalg.vector_norm(d[..., 1:], dim=-1), d[..., 0].abs())


def rotation_columns(q: torch.Tensor) -> torch.Tensor:
    """The first two columns of q's rotation matrix, row by row (..., 6): a continuous encoding of
    an orientation for a network (BeyondMimic's)."""
    w, x, y, z = q.unbind(-1)
    return torch.stack(
        (
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z),
            2 * (x * z - w * y), 2 * (y * z + w * x),
        ),
        dim=-1,
    )  # fmt: skip
