"""Plugins: Python modules a command imports before it looks up its task or algorithm, so that
what they register (`mjrl.tasks.register_task`, `mjrl.rl.register_algorithm`,
`mjrl.sim.register_terrain_type`) exists. `train TASK --plugins my_robots my_algos ...`; the
run's config records them, so every rank, a resume and the launcher's workers import them too.
A plugin is a module on the Python path (installed, or found through PYTHONPATH), imported by
name: the workers the launcher spawns find it the same way."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path

from mjrl.errors import UsageError

FLAG = "--plugins"


def plugin_spans(args: list[str]) -> list[tuple[int, int, tuple[str, ...]]]:
    """Each `--plugins A B ...` (the values up to the next flag) or `--plugins=A,B` in args:
    (its first index, the index after it, the names it gives)."""
    spans = []
    for i, arg in enumerate(args):
        if arg.startswith(FLAG + "="):
            spans.append((i, i + 1, tuple(name for name in arg.split("=", 1)[1].split(",") if name)))
        elif arg == FLAG:
            end = next((j for j in range(i + 1, len(args)) if args[j].startswith("-")), len(args))
            if end == i + 1:
                raise UsageError(f"{FLAG} needs module names: {FLAG} MODULE [MODULE ...]")
            spans.append((i, end, tuple(args[i + 1 : end])))
    return spans


def read_plugins(args: list[str]) -> tuple[str, ...]:
    """The names the last `--plugins` gives (as the parser that reads them again takes the
    last), left in args."""
    spans = plugin_spans(args)
    return spans[-1][2] if spans else ()


def pop_plugins(args: list[str]) -> tuple[str, ...]:
    """`read_plugins`, every `--plugins` removed from args."""
    spans = plugin_spans(args)
    for start, end, _ in reversed(spans):
        del args[start:end]
    return spans[-1][2] if spans else ()


def spelled_out(args: list[str]) -> list[str]:
    """args with each `--plugins=A,B` written `--plugins A B`, as the config parser reads a list."""
    out = list(args)
    for start, end, names in reversed(plugin_spans(args)):
        out[start:end] = [FLAG, *names]
    return out


def import_plugins(names: Iterable[str]) -> None:
    """Import each module (once); a module that is not there is a usage error, one that fails
    inside keeps its traceback (it is the plugin's own error)."""
    for name in names:
        # A path (`./my_tasks.py`) where a module name belongs: importlib's own error is a
        # TypeError about relative imports.
        if name.endswith(".py") or "/" in name or "\\" in name:
            raise UsageError(
                f"{FLAG} {name}: give the module's name ({Path(name).stem}), with its folder on PYTHONPATH, "
                "not a file path"
            )
        if not all(part.isidentifier() for part in name.split(".")):
            raise UsageError(f"{FLAG} {name}: not a module name (names of letters, digits and _, joined by dots)")
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
                raise UsageError(
                    f"{FLAG} {name}: no such module on the Python path; install it or add its folder to PYTHONPATH"
                ) from None
            raise
