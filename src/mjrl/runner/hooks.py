"""Code a run adds at the training loop's fixed points, without the loop knowing what it does:
`--fault`'s injections for the fault-tolerance tests (`faults.py`), or a probe of a user's own
(a plugin builds one and passes it to `mjrl.runner.start.train`)."""

from __future__ import annotations

import torch

from mjrl.rl import Algorithm


class LoopHook:
    """The loop's fixed points; each does nothing unless overridden."""

    def iteration_start(self, iteration: int, algorithm: Algorithm) -> bool:
        """Before iteration `iteration` (0-based), and once more before the last save with the
        count of iterations done. Returns whether this iteration's rollout must run eagerly,
        because `actions` will do something in it (a captured rollout keeps what `actions` did
        while it was captured)."""
        return False

    def actions(self, actions: torch.Tensor) -> torch.Tensor:
        """The actions of a rollout step as the env will get them (the rollout stores the
        policy's own)."""
        return actions
