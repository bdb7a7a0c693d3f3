"""The task registry: task name -> where its `Task` is defined, and a one-line summary.

Each package under `mjrl.tasks` registers its own tasks in a module named `registry` (see
`cartpole/registry.py`): adding a task package adds its tasks, with no list here to edit. A
registry module names its tasks' definitions as "module:attribute" and imports nothing heavy,
so listing the tasks (and refusing an unknown name) costs no simulator import; a task is
imported when it is asked for. Code outside the package (a test, a user's script) registers a
`Task` it built with `register_task(name, task, summary)`.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import pkgutil
from typing import Any

from mjrl.errors import UsageError


@dataclasses.dataclass(frozen=True)
class TaskEntry:
    target: Any
    """"module:attribute" of the `Task`, imported when first asked for, or the `Task` itself."""
    summary: str
    """One line for `train --help` and `mjrl tasks`."""


_REGISTRY: dict[str, TaskEntry] = {}
_discovered = False


def register_task(name: str, target: Any, summary: str) -> None:
    """Register a task under `name`: `target` is "module:attribute" naming its `Task`, or the
    `Task`. A name is registered once (a second registration of the same target is a no-op)."""
    entry = TaskEntry(target, summary)
    if _REGISTRY.get(name, entry) != entry:
        raise ValueError(f"task {name!r} is already registered as {_REGISTRY[name].target!r}")
    _REGISTRY[name] = entry


def _discover() -> dict[str, TaskEntry]:
    """Every task package's `registry` module, imported once."""
    global _discovered
    if not _discovered:
        _discovered = True
        for package in pkgutil.iter_modules(__path__):
            if package.ispkg and importlib.util.find_spec(f"{__name__}.{package.name}.registry"):
                importlib.import_module(f"{__name__}.{package.name}.registry")
    return _REGISTRY


def task_names() -> list[str]:
    return sorted(_discover())


def describe_tasks() -> str:
    tasks = _discover()
    width = max(map(len, tasks))
    return "\n".join(f"  {name:<{width}}  {tasks[name].summary}" for name in task_names())


def load_task(name: str):
    """The `mjrl.tasks.base.Task` registered as `name`; a UsageError names the valid ones."""
    tasks = _discover()
    if name not in tasks:
        raise UsageError(f"unknown task {name!r}; valid tasks: {', '.join(task_names())}")
    target = tasks[name].target
    if not isinstance(target, str):
        return target
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)
