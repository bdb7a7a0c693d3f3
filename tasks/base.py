"""What a registered task provides: its name, default configs and how to build its terms."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from mjrl.envs import EnvConfig, TaskSpec
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
