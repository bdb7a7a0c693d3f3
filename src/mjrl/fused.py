"""The one home of `torch.compile` in mjrl (`--runner.compile`): `fuse(fn)` returns a `Fused`
callable, which calls `fn` compiled and keeps `fn` itself as the reference. Beside the layers,
like `obs_spec.py`: the env and the learners both fuse their pure tensor work.

One class for every compiled call, so that code that must see compiled calls as such finds them:
the CPU emulation of CUDA graphs (`tests/capture.py`) runs them compiled inside an emulated
capture, as a real capture holds their kernels, where torch would otherwise fall back to the
eager code under its recording mode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


class Fused:
    """`fn` through `torch.compile` (static shapes), compiled at its first call."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.eager = fn
        """The function itself, the reference the compiled code is tested against."""
        self.compiled = torch.compile(fn, dynamic=False)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.compiled(*args, **kwargs)


def fuse(fn: Callable[..., Any]) -> Fused:
    """`fn`, fused by `torch.compile` into few kernels at its first call."""
    return Fused(fn)
