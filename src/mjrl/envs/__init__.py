"""Env layer: a batched env assembled from small terms over the simulation's torch tensors."""

from mjrl.envs.env import (
    EnvConfig,
    EventTerm,
    ObsTerm,
    RewardTerm,
    TaskSpec,
    TerminationTerm,
    VecEnv,
)
from mjrl.envs.task import Task

__all__ = ["EnvConfig", "EventTerm", "ObsTerm", "RewardTerm", "Task", "TaskSpec", "TerminationTerm", "VecEnv"]
