"""A rollout's storage and the advantages computed from it: what an on-policy learner collects
into during an iteration (`RolloutBuffer`) and generalised advantage estimation
(`compute_gae`), PPO's."""

from __future__ import annotations

import dataclasses

import torch

from mjrl.rl.algorithm import write_at_step


@dataclasses.dataclass
class RolloutBuffer:
    """One iteration of experience, (T, N, ...) tensors. Observations are stored raw; they are
    normalised with the statistics that were in force while they were collected."""

    actor_obs: torch.Tensor
    critic_obs: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor
    dones: torch.Tensor
    action_mean: torch.Tensor
    action_std: torch.Tensor
    step: torch.Tensor
    """(1,) long: the step the next `store` writes, on the device (see `write_at_step`)."""

    @classmethod
    def allocate(
        cls, steps: int, envs: int, actor_dim: int, critic_dim: int, num_actions: int, device: torch.device
    ) -> RolloutBuffer:
        def zeros(*shape: int) -> torch.Tensor:
            return torch.zeros(steps, envs, *shape, device=device)

        return cls(
            zeros(actor_dim),
            zeros(critic_dim),
            zeros(num_actions),
            zeros(),
            zeros(),
            zeros(),
            zeros(),
            zeros(num_actions),
            zeros(num_actions),
            torch.zeros(1, dtype=torch.long, device=device),
        )

    def store(self, **fields: torch.Tensor) -> None:
        """Write fields of the current step (the step advances with `next_step`)."""
        for name, value in fields.items():
            write_at_step(getattr(self, name), self.step, value)

    def next_step(self) -> None:
        self.step += 1

    def restart(self) -> None:
        self.step.zero_()


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_values: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over (T, N) tensors.

    `dones[t]` marks that the episode ended after step t (terminated or truncated): nothing is
    bootstrapped across it. Truncated episodes already carry gamma * V(final obs) in their
    reward, so their value is not lost. Returns (advantages, returns).
    """
    # The one-step errors of every step at once; only the discounted sum runs backwards, two
    # kernels a step (the same operations, in the same order, as a step-by-step loop).
    not_done = 1.0 - dones
    next_values = torch.cat([values[1:], last_values.unsqueeze(0)])
    deltas = rewards + gamma * next_values * not_done - values
    decay = gamma * lam * not_done
    advantages = torch.empty_like(rewards)
    next_advantage = torch.zeros_like(last_values)
    for t in reversed(range(rewards.shape[0])):
        next_advantage = torch.add(deltas[t], decay[t] * next_advantage, out=advantages[t])
    return advantages, advantages + values
