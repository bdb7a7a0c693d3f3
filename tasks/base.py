"""What a registered task provides: its name, default configs and how to build its terms."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from mjrl.envs import EnvConfig, TaskSpec, VecEnv
from mjrl.rl.config import AgentConfig


@dataclasses.dataclass(frozen=True)
class Task:
    name: str
    env_cfg: EnvConfig
    """Default env config (a task-specific subclass of EnvConfig)."""
    agent_cfg: AgentConfig
    """Default PPO and runner settings."""
    build: Callable[[EnvConfig], TaskSpec]
    """Builds the task's MJCF path and terms from a (possibly user-modified) env config."""
    play_metrics: Callable[[VecEnv], dict[str, torch.Tensor]] | None = None
    """Per-env values that `play` averages over every evaluated step and reports as
    `mean_<name>` (e.g. velocity-tracking errors); None for none."""
