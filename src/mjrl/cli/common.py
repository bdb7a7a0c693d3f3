"""What every command shares: turning argv into a config, and bad input into one line + exit 2."""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import tyro
import yaml

from mjrl.cli.flags import rename_known_flags, unknown_flags_message
from mjrl.errors import UsageError

T = TypeVar("T")


def run_command(prog: str, body: Callable[[list[str]], int], argv: list[str] | None = None) -> int:
    """Run `body(argv)`; a UsageError becomes `prog: error: ...` on stderr and exit code 2."""
    try:
        return body(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130


def parse_flags(cls: Any, default: T, args: list[str], prog: str, description: str) -> T:
    """tyro over `cls` with explicit booleans (`--resume True`). Former and mjlab spellings of
    flags are rewritten with a note (`rename_known_flags`); tyro's boxed error message is
    condensed to one line, an unknown flag named with the closest real ones, and raised as a
    UsageError; --help prints as usual."""
    args = rename_known_flags(args, default)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return tyro.cli(
                cls,
                default=default,
                args=args,
                prog=prog,
                description=description,
                config=(tyro.conf.FlagConversionOff,),
            )
    except SystemExit as exc:
        if exc.code in (0, None):
            raise
        text = captured.getvalue()
        unknown = unknown_flags_message(text, args, default)
        raise UsageError(f"{unknown} (see `{prog} --help`)" if unknown else _one_line(text, prog)) from None


def _one_line(text: str, prog: str) -> str:
    """tyro's boxed message as "title; text": the title in the box's top border, the text its
    first section (wrapped at the terminal's width: rejoined with spaces), up to the first rule."""
    rows = [re.sub(r"^[│╭╰─\s]+|[│╮╯─\s]+$", "", row) for row in text.splitlines()]
    title, body = (rows[0], rows[1:]) if rows else ("", [])
    section = []
    for row in body:
        if not row or set(row) == {"─"} or row.startswith("For full helptext"):
            break
        section.append(row)
    message = "; ".join(part for part in (title, " ".join(section)) if part) or "invalid arguments"
    return f"{message} (see `{prog} --help`)"


def pop_task(args: list[str], usage: str) -> Any:
    """The task named by `args[0]` (popped from args); None after printing `usage` and the task
    list when there is no task or the first argument asks for help."""
    from mjrl.plugins import import_plugins, pop_plugins
    from mjrl.tasks import describe_tasks, load_task

    import_plugins(pop_plugins(args))  # a task a plugin registers (`--plugins MODULE ...`)
    if not args or args[0] in ("-h", "--help"):
        print(f"{usage}\n\ntasks:\n{describe_tasks()}")
        return None
    return load_task(args.pop(0))


def peek_option(args: list[str], name: str) -> str | None:
    """The value of `--name VALUE` or `--name=VALUE` in args (left in place; the last one when
    given twice, as the flag parser reads it), or None. A flag without its value is refused."""
    value = None
    for i, arg in enumerate(args):
        if arg == name:
            if i + 1 >= len(args):
                raise UsageError(f"{name} needs a value")
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def preset_names() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("mjrl.presets").iterdir() if p.name.endswith(".yaml"))


def read_yaml(path: Path | Any, what: str) -> dict:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise UsageError(f"{what} {path} is a directory; give a YAML file") from None
    except UnicodeDecodeError:
        raise UsageError(f"{what} {path} is not a text file; give a YAML file") from None
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"{what} {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{what} {path} must hold a mapping of config keys")
    return data


def load_preset(name: str) -> dict:
    path = resources.files("mjrl.presets") / f"{name}.yaml"
    if not path.is_file():
        raise UsageError(f"unknown preset {name!r}; valid presets: {', '.join(preset_names())}")
    return read_yaml(path, "preset")
