"""RL layer: the algorithm interface, PPO, its networks and its observation normaliser. Knows
nothing of simulators: observations, rewards and done flags arrive as tensors."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mjrl.rl.algorithm import Algorithm, EnvInfo, Observations
from mjrl.rl.config import AgentConfig, PolicyConfig, PpoConfig, RunnerConfig, SymmetryConfig
from mjrl.rl.networks import ActorCritic, build_actor_critic

if TYPE_CHECKING:
    from mjrl.distributed import DistContext

__all__ = [
    "ActorCritic",
    "AgentConfig",
    "Algorithm",
    "EnvInfo",
    "Observations",
    "PolicyConfig",
    "PpoConfig",
    "RunnerConfig",
    "SymmetryConfig",
    "build_actor_critic",
    "make_algorithm",
]


def make_algorithm(
    algorithm: PpoConfig, policy: PolicyConfig, env: EnvInfo, num_steps: int, ctx: DistContext
) -> Algorithm:
    """The algorithm a run trains with on `env`, for rollouts of `num_steps` steps."""
    from mjrl.rl.ppo import PPO

    actor_critic = build_actor_critic(env.obs_dims, env.num_actions, policy, ctx.device, env.obs_std_floors)
    return PPO(actor_critic, algorithm, ctx, env.num_envs, num_steps, env.mirrors)
