"""What a registered task provides: the contract lives in `mjrl.envs` (`mjrl.envs.task.Task`)."""

from mjrl.envs.task import Task

__all__ = ["Task"]
