"""What `PPO.update` reports, by name: sums that add up over ranks, and the metrics made of them.

The update returns sums, not means, so that the runner can pool them over ranks in its one
gather of the iteration's metrics; `update_metrics` turns the pooled sums into the logged
figures.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import torch

from mjrl.distributed import DistContext
from mjrl.distributed.packing import NamedPack
from mjrl.rl.networks import ActorCritic
from mjrl.rl.normalizer import moment_sums, update_from_sums
from mjrl.rl.storage import Rollout

STEP_STATISTICS = ("surrogate_loss", "value_loss", "entropy", "mean_kl", "clip_fraction")
"""Summed over the minibatch steps; logged as means per step. `clip_fraction`: the fraction of a
minibatch's samples whose probability ratio left [1 - clip, 1 + clip]."""

ROLLOUT_SUMS = ("samples", "return_sum", "return_sq_sum", "residual_sum", "residual_sq_sum")
"""Summed over the rollout's samples, for the explained variance (residual: return - value)."""


def rollout_sums(returns: torch.Tensor, values: torch.Tensor) -> dict[str, torch.Tensor]:
    """This rank's sums of the returns and of the value function's residuals, in float64."""
    r = returns.double().reshape(-1)
    d = r - values.double().reshape(-1)
    count = r.new_full((), float(r.numel()))  # made on the device: a CUDA graph cannot copy from the host
    sums = (count, r.sum(), (r * r).sum(), d.sum(), (d * d).sum())
    return dict(zip(ROLLOUT_SUMS, sums, strict=True))


def explained_variance(totals: Mapping[str, float]) -> float:
    """1 - Var(returns - values) / Var(returns) over the pooled samples of every rank: 1 for a
    perfect value function, 0 for one that predicts the mean return, NaN if the returns do not
    vary."""
    n = totals["samples"]
    if n <= 0:
        return math.nan
    var_returns = totals["return_sq_sum"] / n - (totals["return_sum"] / n) ** 2
    var_residuals = totals["residual_sq_sum"] / n - (totals["residual_sum"] / n) ** 2
    return 1.0 - var_residuals / var_returns if var_returns > 0 else math.nan


def update_metrics(totals: Mapping[str, float]) -> dict[str, float]:
    """The logged figures of an update from its sums pooled over ranks: means over every
    minibatch step of every rank, and the explained variance of the rollout."""
    steps = max(totals["steps"], 1.0)
    means = {name: totals[name] / steps for name in (*STEP_STATISTICS, "mean_learning_rate")}
    return {**means, "explained_variance": explained_variance(totals)}


@dataclasses.dataclass
class StepTotals:
    """What an update's minibatch steps add up, on the device (a skipped step adds nothing)."""

    sums: torch.Tensor
    """`STEP_STATISTICS`, summed."""
    symmetry: torch.Tensor
    """The mirror loss, summed."""
    updates: torch.Tensor
    """Steps taken (float32, as the KL mean divides by it)."""
    skipped: torch.Tensor
    """Whether any step was skipped."""
    learning_rate: torch.Tensor
    """The rate each step used (the adaptive schedule moves it within the update), summed."""

    @classmethod
    def zeros(cls, device: torch.device) -> StepTotals:
        return cls(
            sums=torch.zeros(len(STEP_STATISTICS), device=device),
            symmetry=torch.zeros((), device=device),
            updates=torch.zeros((), device=device),
            skipped=torch.zeros((), dtype=torch.bool, device=device),
            learning_rate=torch.zeros((), dtype=torch.float64, device=device),
        )


def pool_rollout_statistics(
    ctx: DistContext, policy: ActorCritic, advantages: torch.Tensor, buf: Rollout
) -> tuple[torch.Tensor, torch.Tensor]:
    """The advantages' mean and standard deviation over every rank's rollout, in one all-reduce
    that also pools the rollout's observation moments, merged into the policy's normalisers
    for the next rollout."""
    observations = {
        group: (normalizer, obs)
        for group, normalizer, obs in (
            ("actor", policy.actor_normalizer, buf.actor_obs),
            ("critic", policy.critic_normalizer, buf.critic_obs),
        )
        if normalizer is not None
    }
    a = advantages.double()
    pack = NamedPack(torch.float64, a.device)
    # The count made on the device (`full`), not copied from the host: a CUDA graph cannot copy.
    count = torch.full((), float(a.numel()), dtype=a.dtype, device=a.device)
    pack.add("advantages", torch.stack([a.sum(), (a * a).sum(), count]))
    for group, (_, obs) in observations.items():
        pack.add(f"{group}_observations", moment_sums(obs))
    pooled = pack.all_reduce_sum(ctx)
    for group, (normalizer, _) in observations.items():
        update_from_sums(normalizer, pooled[f"{group}_observations"])
    total, squares, count = pooled["advantages"].unbind()
    mean = total / count
    return mean, (squares / count - mean**2).clamp(min=0.0).sqrt()
