"""Env layer: a batched env assembled from small terms over the simulation's torch tensors.

`terms` holds robot-agnostic terms for floating-base robots, which read a `RobotConfig`
resolved when the env is built (`robot`)."""

from mjrl.envs.component import EnvComponent
from mjrl.envs.env import VecEnv
from mjrl.envs.robot import Robot, RobotConfig
from mjrl.envs.spec import (
    CommandTerm,
    EnvConfig,
    EventTerm,
    ObsGroup,
    ObsTerm,
    RewardTerm,
    TaskSpec,
    TerminationTerm,
    check_task_spec,
)
from mjrl.envs.symmetry import symmetry_problem
from mjrl.envs.task import Task

__all__ = [
    "CommandTerm",
    "EnvComponent",
    "EnvConfig",
    "EventTerm",
    "ObsGroup",
    "ObsTerm",
    "RewardTerm",
    "Robot",
    "RobotConfig",
    "Task",
    "TaskSpec",
    "TerminationTerm",
    "VecEnv",
    "check_task_spec",
    "symmetry_problem",
]
