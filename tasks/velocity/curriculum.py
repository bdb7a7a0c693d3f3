"""The terrain curriculum of the velocity task: an episode-end event that moves each env up or
down a row of the terrain grid by how far its robot got against how far its commands asked.
"""

from __future__ import annotations

import torch

from mjrl.envs import VecEnv
from mjrl.envs.terms import base_position
from mjrl.tasks.velocity.state import feet


def terrain_curriculum(env: VecEnv, ended: torch.Tensor) -> None:
    """Episode-end event: judge each finished episode by how far the robot got from its patch's
    centre against how far its commands would have taken it (the length of the commanded path's
    end-to-end displacement, `LeggedState.commanded_path`), and move the env up or down a row
    (`TerrainState.end_episodes`). Episodes that began at a random point of their length are not
    judged.

    legged_gym compares with the last command's speed times the episode length instead. With
    commands resampled every 3-8 s that asks for the length of a path of several legs in
    random directions, which is about twice the displacement they add up to: a simulated
    perfect tracker of this task's commands was demoted in 28% of its episodes that way, and in
    none with the commanded path (docs/benchmarks.md)."""
    terrain = env.terrain
    distance = torch.linalg.vector_norm(base_position(env)[:, :2] - terrain.patch_center()[:, :2], dim=1)
    commanded = torch.linalg.vector_norm(feet(env).commanded_path, dim=1)
    terrain.end_episodes(ended & env.whole_episode, distance, commanded)
