"""Left-right mirroring of observation and action vectors, as data both layers share: the env
says how its columns mirror (by term and joint names), the learner applies it (symmetry
augmentation, the mirror loss) without knowing what a column means."""

from __future__ import annotations

import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class ColumnMirror:
    """The mirror image of a vector: column i of the image is `sign[i]` times column `source[i]`.

    Mirroring is a reflection, so applying it twice gives the vector back: `source` is its own
    inverse permutation and each column keeps its sign's partner (`check` verifies both)."""

    source: torch.Tensor
    """(k,) long: which column each column of the image is taken from."""
    sign: torch.Tensor
    """(k,) float: +1 or -1 per column of the image."""

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x[..., self.source] * self.sign

    @property
    def width(self) -> int:
        return int(self.source.shape[0])

    @staticmethod
    def identity(width: int) -> ColumnMirror:
        return ColumnMirror(torch.arange(width), torch.ones(width))

    @staticmethod
    def concat(parts: list[ColumnMirror]) -> ColumnMirror:
        """The mirror of the concatenated vectors: each part's columns shifted by the widths
        before it. Built on the CPU: a task's mirror functions may return parts made from the
        env's tensors, which live on its GPU, beside parts made from Python lists."""
        offsets = [0]
        for part in parts[:-1]:
            offsets.append(offsets[-1] + part.width)
        source = torch.cat([part.source.cpu() + offset for part, offset in zip(parts, offsets, strict=True)])
        return ColumnMirror(source, torch.cat([part.sign.cpu().float() for part in parts]))

    def repeat(self, times: int) -> ColumnMirror:
        """The mirror of `times` copies of the vector side by side (an observation's history)."""
        return ColumnMirror.concat([self] * times)

    def to(self, device: torch.device | str) -> ColumnMirror:
        return ColumnMirror(self.source.to(device), self.sign.to(device, torch.float32))

    def check(self, what: str) -> None:
        """Raise ValueError unless this is a reflection: an involutive permutation whose paired
        columns share a sign."""
        k = self.width
        if sorted(self.source.tolist()) != list(range(k)):
            raise ValueError(f"{what}: the mirror's sources are not a permutation of its {k} columns")
        if not torch.equal(self.source[self.source], torch.arange(k, device=self.source.device)):
            raise ValueError(f"{what}: mirroring twice does not give the columns back")
        if not torch.all(self.sign.abs() == 1) or not torch.equal(self.sign[self.source], self.sign):
            raise ValueError(f"{what}: signs must be +-1 and equal for columns that swap")
