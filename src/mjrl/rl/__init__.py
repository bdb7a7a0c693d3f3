"""RL layer: the algorithm interface, PPO, its networks and its observation normaliser. Knows
nothing of simulators: observations, rewards and done flags arrive as tensors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from mjrl.rl.algorithm import Algorithm, Observations
from mjrl.rl.config import AgentConfig
from mjrl.rl.networks import ActorCritic, build_actor_critic

if TYPE_CHECKING:
    from mjrl.distributed import DistContext

__all__ = ["ActorCritic", "AgentConfig", "Algorithm", "Observations", "build_actor_critic", "make_algorithm"]


def make_algorithm(
    cfg: AgentConfig, obs_dims: Mapping[str, int], num_actions: int, num_envs: int, ctx: DistContext
) -> Algorithm:
    """The algorithm a run trains with, for envs with these observation groups and actions."""
    from mjrl.rl.ppo import PPO

    return PPO(build_actor_critic(dict(obs_dims), num_actions, cfg, ctx.device), cfg, ctx, num_envs)
