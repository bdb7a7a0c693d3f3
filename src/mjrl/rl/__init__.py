"""RL layer: the algorithm interface, PPO, its networks and its observation normaliser. Knows
nothing of simulators: observations, rewards and done flags arrive as tensors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from mjrl.rl.algorithm import Algorithm, Observations
from mjrl.rl.config import AgentConfig, PolicyConfig, PpoConfig, RunnerConfig
from mjrl.rl.networks import ActorCritic, build_actor_critic

if TYPE_CHECKING:
    import torch

    from mjrl.distributed import DistContext

__all__ = [
    "ActorCritic",
    "AgentConfig",
    "Algorithm",
    "Observations",
    "PolicyConfig",
    "PpoConfig",
    "RunnerConfig",
    "build_actor_critic",
    "make_algorithm",
]


def make_algorithm(
    algorithm: PpoConfig,
    policy: PolicyConfig,
    obs_dims: Mapping[str, int],
    num_actions: int,
    num_envs: int,
    num_steps: int,
    ctx: DistContext,
    obs_std_floors: Mapping[str, torch.Tensor | None] | None = None,
) -> Algorithm:
    """The algorithm a run trains with, for `num_envs` envs with these observation groups and
    actions, and rollouts of `num_steps` steps (`obs_std_floors`: see `build_actor_critic`)."""
    from mjrl.rl.ppo import PPO

    actor_critic = build_actor_critic(obs_dims, num_actions, policy, ctx.device, obs_std_floors)
    return PPO(actor_critic, algorithm, ctx, num_envs, num_steps)
