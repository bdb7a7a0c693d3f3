"""The task contract: what a registered task provides to the trainer, `play` and export."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import torch

from mjrl.envs.env import VecEnv
from mjrl.envs.spec import EnvConfig, TaskSpec

# The agent's config type (mjrl.rl.config.AgentConfig) is a parameter: envs and rl are peers,
# and the env never reads PPO's settings.
AgentT = TypeVar("AgentT")


@dataclasses.dataclass(frozen=True)
class Task(Generic[AgentT]):
    """A task: its name, default configs and how to build its terms."""

    name: str
    """The registered name (`train NAME`)."""
    env_cfg: EnvConfig
    """Default env config (a task-specific subclass of EnvConfig)."""
    agent_cfg: AgentT
    """Default settings of the training loop, the algorithm and the policy (`AgentConfig`)."""
    build: Callable[[EnvConfig], TaskSpec]
    """Builds the task's MJCF path and terms from a (possibly user-modified) env config."""
    play_metrics: Callable[[VecEnv], dict[str, torch.Tensor]] | None = None
    """Per-env values that `play` averages over every evaluated step and reports as
    `mean_<name>` (e.g. velocity-tracking errors); None for none."""
    algorithm_settings: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    """Settings measured for this task with an algorithm other than its agent's, by the
    algorithm's registered name: a partial config as a preset holds one (sections `env`,
    `runner`, `algorithm`, `policy`), over the defaults when that algorithm trains it, so that
    `train TASK --algo sac` starts from what was found to work (`TrainConfig.for_task`)."""
