"""What the env counts between two reads by the runner: each reward term's sum, each
termination's count, the envs reset for a non-finite state, and the env steps whose rewards
count. Float64 tensors on the device, accumulated without a host sync, pooled over ranks by
summing; the runner turns them into the iteration's metrics (`mjrl.runner.metrics`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

GAUGE_PARTS = (":sum", ":count")
"""Suffixes of a gauge's sum and count in `VecEnv.pop_statistics()`."""


class TermTotals:
    """Running totals of the reward and termination terms, by their logged names."""

    def __init__(self, rewards: Sequence[str], terminations: Sequence[str], num_envs: int, device: torch.device):
        self.names = [f"reward/{k}" for k in rewards] + [f"termination/{k}" for k in terminations]
        self.num_envs = num_envs
        self.reward_sums = torch.zeros(len(rewards), dtype=torch.float64, device=device)
        self.termination_counts = torch.zeros(len(terminations), dtype=torch.float64, device=device)
        self.nonfinite = torch.zeros((), dtype=torch.float64, device=device)
        self.steps = torch.zeros((), dtype=torch.long, device=device)
        """Env steps since the last `pop` (a tensor: a Python counter would stay as captured)."""

    def add_step(self, term_values: torch.Tensor, nonfinite: torch.Tensor) -> None:
        """One env step's weighted reward terms, (terms, num_envs), and its non-finite envs. The
        sums are taken after the mask: one NaN env would make every term's sum NaN, and the
        iteration's reward metrics null."""
        self.nonfinite += nonfinite.sum()
        self.reward_sums += term_values.masked_fill(nonfinite, 0.0).sum(dim=1)
        self.steps += 1

    def add_terminations(self, fired: torch.Tensor) -> None:
        """One env step's stacked termination terms, (terminations, num_envs) bool."""
        self.termination_counts += fired.sum(dim=1)

    def pop(self) -> dict[str, torch.Tensor]:
        """Since the last call: each reward term's sum, each termination's count, the non-finite
        resets and the env steps whose rewards count (`nonfinite_resets`, `reward_steps`); then
        zeroes them."""
        # Env steps whose rewards count: every env of every step, less the non-finite ones.
        reward_steps = self.steps * self.num_envs - self.nonfinite
        out = torch.cat([self.reward_sums, self.termination_counts, self.nonfinite.view(1), reward_steps.view(1)])
        for total in (self.reward_sums, self.termination_counts, self.nonfinite, self.steps):
            total.zero_()
        names = [*self.names, "nonfinite_resets", "reward_steps"]
        return dict(zip(names, out.unbind(), strict=True))
