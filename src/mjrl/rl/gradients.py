"""What every gradient learner shares across ranks, written once: its gradients averaged in one
all-reduce with the scalars that travel with them (or, synchronising once per update, the
update's change), and its weights, optimizer state and learning rate broadcast from rank 0 (PPO
and distillation use them; a new algorithm should too)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from mjrl.distributed import DistContext
from mjrl.distributed.packing import NamedPack, split_like
from mjrl.rl.optim import Adam


class FlatGradients:
    """The gradients of `params` in one flat buffer, then `scalars` slots (a loss, a KL) and a
    non-finite flag. Every parameter's `.grad` is a view into the buffer, so the finite check,
    the all-reduce and a clip are one operation each on the buffer or a slice of it, not one
    per parameter tensor (each costs host time on a GPU, whatever its size), and the optimizer
    reads what the all-reduce averaged without a copy."""

    def __init__(self, params: Sequence[torch.Tensor], scalars: int) -> None:
        self.params = list(params)
        self.size = sum(p.numel() for p in self.params)
        """Gradient entries: `buffer[:size]`."""
        self.scalars = scalars
        self.buffer = torch.zeros(self.size + scalars + 1, device=self.params[0].device)
        self.attach()

    def attach(self) -> None:
        """(Re)make every parameter's `.grad` a view into the buffer (in case some code replaced
        them meanwhile)."""
        for p, grad in zip(self.params, split_like(self.buffer[: self.size], self.params), strict=True):
            p.grad = grad.view_as(p)

    def fill(self, grads: Sequence[torch.Tensor], scalars: Sequence[torch.Tensor]) -> None:
        """Write a step's gradients (in the order of `params`) and scalars, and whether any of
        them is not finite."""
        n = self.size
        torch.cat([grad.reshape(-1) for grad in grads], out=self.buffer[:n])
        self.buffer[n : n + self.scalars] = torch.stack([s.detach() for s in scalars])
        self.buffer[n + self.scalars] = (~torch.isfinite(self.buffer[: n + self.scalars]).all()).float()

    def average(self, ctx: DistContext, synchronise: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """(the scalars, whether to skip the step), as tensors. With `synchronise`, everything is
        first averaged over ranks in one all-reduce, non-finite values zeroed: a flag raised on
        any rank makes every rank skip."""
        if synchronise and ctx.issues_collectives:
            self.buffer.nan_to_num_(0.0, 0.0, 0.0)
            ctx.all_reduce_mean(self.buffer)
        n = self.size
        return self.buffer[n : n + self.scalars], self.buffer[n + self.scalars] > 0


def broadcast_learner_state(ctx: DistContext, tensors: Sequence[torch.Tensor], optimizer: Adam) -> None:
    """Rank 0's `tensors` (weights, normaliser statistics), Adam's moments, then its learning
    rate, to every rank."""
    if not ctx.issues_collectives:
        return
    ctx.broadcast_tensors([*tensors, *optimizer.tensors()])
    rate = NamedPack(torch.float64, ctx.device).add("learning_rate", optimizer.lr).broadcast(ctx)
    optimizer.lr.copy_(rate["learning_rate"].view(()))


def average_update(
    ctx: DistContext,
    tensors: Sequence[torch.Tensor],
    start: Sequence[torch.Tensor],
    kl: torch.Tensor,
    skip: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Synchronising once per update (PPO's "rollout" mode): the change of `tensors` (parameters
    and optimizer state) since `start` averaged over ranks in one all-reduce with the KL and the
    skip flag, written back; if any rank met a non-finite value, every rank returns to `start`.
    Returns (the averaged KL, whether any rank skipped)."""
    deltas = [(now.detach() - before).reshape(-1) for now, before in zip(tensors, start, strict=True)]
    pack = NamedPack(torch.float32, kl.device)
    pack.add("deltas", torch.cat(deltas)).add("kl", kl).add("skip", skip.float())
    mean = pack.all_reduce_mean(ctx)
    any_skip = mean["skip"] > 0
    with torch.no_grad():
        for tensor, before, delta in zip(tensors, start, split_like(mean["deltas"], tensors), strict=True):
            tensor.copy_(torch.where(any_skip, before, before + delta.to(tensor.dtype)))
    return mean["kl"], any_skip
