"""Empirical observation normaliser with float64 running statistics.

Statistics are merged batch by batch with the parallel-variance formula (Chan et al.), so the
result equals the mean and variance of all data seen, independent of how it was batched; the
same formula merges the statistics of several ranks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from mjrl.distributed import DistContext


class RunningNormalizer(nn.Module):
    def __init__(
        self,
        dim: int,
        eps: float = 1e-8,
        clip: float = 10.0,
        std_offset: float = 0.0,
        std_floor: torch.Tensor | None = None,
    ):
        super().__init__()
        self.eps = eps
        self.clip = clip
        self.std_offset = std_offset
        """Added to the std before dividing: with 0, a feature with almost no spread (a balanced
        pole's angle, a noise-only input) is scaled up to unit variance; rsl_rl adds 0.01."""
        # Per feature, the smallest std it is divided by (0: none). The task sets it; it is saved
        # with the statistics, so a trained policy keeps the floor it was trained with.
        floor = torch.zeros(dim, dtype=torch.float64) if std_floor is None else std_floor.double()
        self.register_buffer("std_floor", floor)
        self.register_buffer("mean", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("var", torch.ones(dim, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        # Per dtype, the statistics' versions the scale was made from and the scale (mean, 1 / std).
        self._scale_keys: dict[torch.dtype, tuple] = {}
        self._scales: dict[torch.dtype, tuple[torch.Tensor, torch.Tensor]] = {}
        self._floor_key: tuple | None = None
        self._plain = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # (x - mean) / (sqrt(var + eps) + std_offset), clipped. Balance shows the offset's
        # effect both ways: with one global gradient clip, rsl_rl's 0.01 halved its return (444
        # and 511 against 947); with the networks clipped apart and warmed-up statistics it
        # raised it (docs/benchmarks.md). Features with no spread at the start are handled where
        # the statistics are initialised (runner.start).
        mean, inv_std = self._scale(x.dtype)
        return ((x - mean) * inv_std).clamp(-self.clip, self.clip)

    def std(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The denominators of the normalisation in `dtype`: sqrt(var + eps) + std_offset, at
        least `std_floor`."""
        return torch.maximum(torch.sqrt(self.var.to(dtype) + self.eps) + self.std_offset, self.std_floor.to(dtype))

    def _scale(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and 1 / `std` in `dtype`, remade only when the statistics change (an
        update, a broadcast, a load: any in-place write bumps a tensor's version), not at every
        env step: each operation costs host time on a GPU. The two tensors are made once per
        dtype and rewritten in place, so that a CUDA graph which read them at its capture reads
        the new scale at its replays (a captured rollout remakes them at its first `act`: the
        update before it changed the statistics)."""
        if torch.compiler.is_compiling():
            # Compiled code fuses the formula into its own kernels, and the cache's keys (a
            # tensor's address and version, a host read of the floor) cannot be traced.
            return self.mean.to(dtype), 1.0 / self.std(dtype)
        mean, var, floor = self.mean, self.var, self.std_floor
        key = tuple((t.data_ptr(), t._version) for t in (mean, var, floor))
        if self._scale_keys.get(dtype) != key:
            plain = self._plain_formula()
            inv_std = torch.rsqrt(self.var.to(dtype) + self.eps) if plain else 1.0 / self.std(dtype)
            if dtype not in self._scales:
                self._scales[dtype] = (torch.empty_like(mean, dtype=dtype), torch.empty_like(inv_std))
            self._scales[dtype][0].copy_(mean)
            self._scales[dtype][1].copy_(inv_std)
            self._scale_keys[dtype] = key
        return self._scales[dtype]

    def _plain_formula(self) -> bool:
        """rsqrt without an offset or a floor: the formula every result before them was
        measured with. Read on the host only when the floor changes (a load)."""
        key = (self.std_floor.data_ptr(), self.std_floor._version)
        if self._floor_key != key:
            self._plain = not self.std_offset and not bool(self.std_floor.any())
            self._floor_key = key
        return self._plain

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: object) -> None:
        # Checkpoints written before the floor was saved keep the floor the task gives now.
        state_dict.setdefault(prefix + "std_floor", self.std_floor.clone())
        super()._load_from_state_dict(state_dict, prefix, *args)

    @torch.no_grad()
    def reset(self) -> None:
        """Forget every statistic: mean 0, variance 1, no data."""
        self.mean.zero_()
        self.var.fill_(1.0)
        self.count.zero_()

    @torch.no_grad()
    def update(self, moments: torch.Tensor) -> None:
        """Merge [count, mean..., M2...] of new data (M2: its sums of squared deviations) into the
        running statistics."""
        dim = self.mean.shape[0]
        n_b, mean_b, m2_b = moments[0], moments[1 : 1 + dim], moments[1 + dim :]
        n_a = self.count
        n = n_a + n_b
        delta = mean_b - self.mean
        m2 = self.var * n_a + m2_b + delta**2 * n_a * n_b / n
        self.mean += delta * n_b / n
        self.var.copy_(m2 / n)
        self.count.copy_(n)


def moment_sums(x: torch.Tensor) -> torch.Tensor:
    """[count, sums..., sums of squares...] of a (..., dim) batch in float64: statistics that
    add up over batches and ranks (one all-reduce pools them)."""
    x = x.reshape(-1, x.shape[-1]).double()
    count = x.new_full((1,), float(x.shape[0]))  # made on the device: a CUDA graph cannot copy from the host
    return torch.cat([count, x.sum(dim=0), (x * x).sum(dim=0)])


def update_from_sums(normalizer: RunningNormalizer, sums: torch.Tensor) -> None:
    """Merge pooled `moment_sums` into the normaliser's running statistics."""
    dim = normalizer.mean.shape[0]
    n, total, squares = sums[0:1], sums[1 : 1 + dim], sums[1 + dim :]
    mean = total / n
    normalizer.update(torch.cat([n, mean, (squares - n * mean**2).clamp(min=0.0)]))


def merge_into(normalizer: RunningNormalizer, obs: torch.Tensor, ctx: DistContext) -> None:
    """Update `normalizer` with `obs` from every rank (one all-reduce of their moment sums), so
    each rank ends with the statistics of the pooled data."""
    merge_all_into([(normalizer, obs)], ctx)


def merge_all_into(pairs: Sequence[tuple[RunningNormalizer, torch.Tensor]], ctx: DistContext) -> None:
    """`merge_into` for several normalisers, each with its observations, in one all-reduce."""
    sums = [moment_sums(obs) for _, obs in pairs]
    pooled = ctx.all_reduce_sum(torch.cat(sums))
    for (normalizer, _), part in zip(pairs, pooled.split([len(x) for x in sums]), strict=True):
        update_from_sums(normalizer, part)


@torch.no_grad()
def warm_up_normalizers(
    normalizers: Mapping[str, RunningNormalizer],
    obs: Mapping[str, torch.Tensor],
    step: Callable[[torch.Tensor], Mapping[str, torch.Tensor]],
    act: Callable[[Mapping[str, torch.Tensor]], torch.Tensor],
    steps: int,
    ctx: DistContext,
) -> int:
    """Start the normalisers of these observation groups from the first observations and
    `steps` env steps of `act` (every rank's data pooled); returns the steps taken.

    Why: at a reset every robot is near its home pose, so statistics of the first observations
    are far too narrow (the quadruped's joint velocities: std 1.4 there against 5.9 under the
    first policy). Normalised with them, iteration 0's inputs were twice as large as later ones
    and its first update moved the policy by a KL of 0.3 against about 0.013 afterwards, which
    drove the adaptive learning rate to its floor.

    The policy acting in the warm-up sees the first observations' statistics; then all the
    observations seen replace those. Features that still do not vary (a last action before any
    action) keep unit variance: their scale is unknown, and a tiny one would blow up the first
    rollout's deviations."""
    steps = steps if normalizers else 0

    def merge(group: str, seen: torch.Tensor) -> None:
        normalizer = normalizers[group]
        normalizer.reset()
        merge_into(normalizer, seen, ctx)
        normalizer.var.masked_fill_(normalizer.var < 1e-6, 1.0)

    # Copies: the env writes each step's observations into the same tensors.
    seen = {group: [obs[group].clone()] for group in normalizers}
    for group in normalizers:
        merge(group, obs[group])
    for _ in range(steps):
        obs = step(act(obs))
        for group in normalizers:
            seen[group].append(obs[group].clone())
    for group in normalizers:
        merge(group, torch.cat(seen[group]))
    return steps
