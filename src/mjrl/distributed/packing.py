"""Named values in one flat vector: one collective carries them all, and they come back by name.

A collective costs about the same whatever its size (a launch and a round trip between ranks),
so metrics, statistics and counters travel together in one vector. Packing them by name, not by
position, means that adding, removing or reordering a field cannot mislabel another one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

import torch

Reduction = Literal["sum", "max"]


class Collectives(Protocol):
    """The collectives of `DistContext` that a pack uses (a protocol: no import cycle)."""

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor: ...

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor: ...

    def all_reduce_mean(self, tensor: torch.Tensor) -> torch.Tensor: ...

    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> torch.Tensor: ...


def split_like(flat: torch.Tensor, like: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Views of consecutive pieces of `flat`, shaped like each tensor of `like` in turn: the
    inverse of `torch.cat([t.reshape(-1) for t in like])`."""
    pieces = flat.split([t.numel() for t in like])
    return [piece.view(t.shape) for piece, t in zip(pieces, like, strict=True)]


class NamedPack:
    """Named tensors (scalars or any shape) packed into one flat vector of `dtype`, each with the
    reduction that pools it over ranks in `all_gather`: a sum (counts, sums of statistics) or a
    maximum (timings of the slowest rank, a stop signal)."""

    def __init__(self, dtype: torch.dtype = torch.float64, device: torch.device | str = "cpu"):
        self.dtype = dtype
        self.device = torch.device(device)
        self._values: dict[str, torch.Tensor] = {}
        self._reductions: dict[str, Reduction] = {}

    def add(self, name: str, value: torch.Tensor | float | Sequence[float], reduce: Reduction = "sum") -> NamedPack:
        if name in self._values:
            raise ValueError(f"field {name!r} is packed twice")
        # A Python number is made in the pack's dtype: torch would make a float32 of it first
        # (rank 0's learning rate was broadcast rounded to float32 before).
        value = value if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=self.dtype)
        self._values[name] = value.to(self.device, self.dtype)
        self._reductions[name] = reduce
        return self

    def add_all(self, values: Mapping[str, torch.Tensor | float], reduce: Reduction = "sum") -> NamedPack:
        for name, value in values.items():
            self.add(name, value, reduce)
        return self

    @property
    def names(self) -> list[str]:
        return list(self._values)

    def flat(self) -> torch.Tensor:
        """Every field, flattened and concatenated in the order they were added."""
        if not self._values:
            return torch.zeros(0, dtype=self.dtype, device=self.device)
        return torch.cat([value.reshape(-1) for value in self._values.values()])

    def unpack(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """The fields of a vector laid out like `flat()`, by name (views of `flat`)."""
        if flat.numel() != sum(v.numel() for v in self._values.values()):
            raise ValueError(f"a vector of {flat.numel()} values does not hold the fields {self.names}")
        return dict(zip(self._values, split_like(flat, list(self._values.values())), strict=True))

    def all_gather(self, ctx: Collectives) -> dict[str, torch.Tensor]:
        """Every rank's fields in one all_gather, each pooled by its reduction, on the host (where
        metrics are read; one copy for all of them)."""
        return self.unpack(self._pooled(ctx).cpu())

    def all_gather_values(self, ctx: Collectives) -> dict[str, float]:
        """`all_gather` of scalar fields, as Python numbers: the one read of the device that a
        training iteration makes."""
        wide = [name for name, value in self._values.items() if value.numel() != 1]
        if wide:
            raise ValueError(f"fields {wide} are not scalars")
        return dict(zip(self._values, self._pooled(ctx).tolist(), strict=True))

    def _pooled(self, ctx: Collectives) -> torch.Tensor:
        gathered = ctx.all_gather(self.flat())
        return torch.where(self._max_mask(gathered.device), gathered.max(dim=0).values, gathered.sum(dim=0))

    def all_reduce_sum(self, ctx: Collectives) -> dict[str, torch.Tensor]:
        """Every field summed over ranks in one all-reduce (on the pack's device)."""
        self._only("sum")
        return self.unpack(ctx.all_reduce_sum(self.flat()))

    def all_reduce_mean(self, ctx: Collectives) -> dict[str, torch.Tensor]:
        """Every field averaged over ranks in one all-reduce (on the pack's device)."""
        self._only("sum")
        return self.unpack(ctx.all_reduce_mean(self.flat()))

    def broadcast(self, ctx: Collectives, src: int = 0) -> dict[str, torch.Tensor]:
        """Rank `src`'s fields on every rank, in one broadcast."""
        return self.unpack(ctx.broadcast(self.flat(), src=src))

    def _max_mask(self, device: torch.device) -> torch.Tensor:
        """True at the elements of the fields pooled by their maximum."""
        flags = [torch.full((v.numel(),), self._reductions[k] == "max") for k, v in self._values.items()]
        return (torch.cat(flags) if flags else torch.zeros(0, dtype=torch.bool)).to(device)

    def _only(self, reduction: Reduction) -> None:
        other = [name for name, r in self._reductions.items() if r != reduction]
        if other:
            raise ValueError(f"fields {other} need another reduction than this collective's {reduction}")
