"""The task contract: what a registered task provides to the trainer, `play` and export."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from mjrl.envs.env import EnvConfig, TaskSpec, VecEnv

if TYPE_CHECKING:  # rl and envs are peers: a task names PPO's settings, the env never reads them
    from mjrl.rl.config import AgentConfig


@dataclasses.dataclass(frozen=True)
class Task:
    """A task: its name, default configs and how to build its terms."""

    name: str
    """The registered name (`train NAME`)."""
    env_cfg: EnvConfig
    """Default env config (a task-specific subclass of EnvConfig)."""
    agent_cfg: AgentConfig
    """Default PPO and runner settings."""
    build: Callable[[EnvConfig], TaskSpec]
    """Builds the task's MJCF path and terms from a (possibly user-modified) env config."""
    play_metrics: Callable[[VecEnv], dict[str, torch.Tensor]] | None = None
    """Per-env values that `play` averages over every evaluated step and reports as
    `mean_<name>` (e.g. velocity-tracking errors); None for none."""
