"""Parts of an env that keep state from one step to the next: the terrain and its curriculum, a
task's shared per-step state (the legged robots' swing timers and finite differences), and
whatever a task adds (a motion library, an object to handle).

`VecEnv` drives every component alike through the hooks below and special-cases none: it
builds the terrain's from the scene, the task's state from `TaskSpec.state`, and one per entry
of `TaskSpec.components`, in that order, and keeps them in `env.components` by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from mjrl.envs.env import VecEnv


class EnvComponent:
    """A component overrides the hooks it needs; the others do nothing. Like the rest of the env,
    a component writes its tensors in place and never reads the device on the host, so that a
    CUDA graph captured around a step replays it."""

    def update(self, env: VecEnv) -> None:
        """After each physics step's contact pass (and once when the env is built), before any
        term reads the state."""

    def reset(self, env: VecEnv, mask: torch.Tensor) -> None:
        """For the envs under `mask` being reset, after the reset events and commands."""

    def resume_state(self) -> dict[str, torch.Tensor]:
        """What a checkpoint keeps of this component (its keys unique among the env's)."""
        return {}

    def load_resume_state(self, saved: Mapping[str, torch.Tensor]) -> bool:
        """Take back what `resume_state` kept, where `saved` has it in the same shape (an older
        checkpoint, or one of another number of envs, may not). True when the envs must start
        their episodes afresh from the state it loaded."""
        return False

    def gauges(self) -> dict[str, torch.Tensor]:
        """Figures logged as means, `name -> [sum, count]` (float64) since the last call, so that
        ranks pool them by summing."""
        return {}
