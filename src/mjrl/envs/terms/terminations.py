"""Termination terms: (num_envs,) bool tensors, an episode ends where one is true."""

from __future__ import annotations

import math

import torch

from mjrl.envs.env import VecEnv
from mjrl.envs.terms.observations import base_position, projected_gravity


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
