"""What every command shares: turning argv into a config, and bad input into one line + exit 2."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar
from unittest import mock

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

    def parse() -> T:
        return tyro.cli(cls, default=default, args=args, prog=prog, description=description,
                        config=(tyro.conf.FlagConversionOff,))  # fmt: skip

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return parse()
    except SystemExit as exc:
        if exc.code in (0, None):
            raise
    text = _error_box(parse)
    unknown = unknown_flags_message(text, args, default)
    raise UsageError(f"{unknown} (see `{prog} --help`)" if unknown else _one_line(text, prog))


def _error_box(parse: Callable[[], Any]) -> str:
    """tyro's error box for arguments it refused, parsed again for the message alone: as wide as
    its lines (at the terminal's width it cuts a long path mid-token) and without the colour
    codes a terminal gets."""
    captured = io.StringIO()
    wide = mock.patch.dict(os.environ, COLUMNS="100000")
    with wide, contextlib.redirect_stderr(captured), contextlib.suppress(SystemExit):
        parse()
    return re.sub(r"\x1b\[[0-9;]*m", "", captured.getvalue())


def _one_line(text: str, prog: str) -> str:
    """tyro's (unwrapped) box as one line: its title (the top border's) unless the text repeats
    it, the text of its first section, and the form a refused value must take where the box
    gives one (the row after "Argument helptext:")."""
    rows = text.splitlines()
    sections: list[list[str]] = [[]]
    for row in rows[1:]:
        inner = row.strip().strip("│╰╯").strip()
        if inner and set(inner) == {"─"}:  # a rule between sections, or the bottom border
            sections.append([])
        elif inner and not inner.startswith("For full helptext"):
            sections[-1].append(inner)
    title = re.sub(r"^[╭─\s]+|[─╮\s]+$", "", rows[0]) if rows else ""
    body = "; ".join(sections[0])
    parts = [body] if body.lower().startswith(title.lower()) else [title, body]
    helptext = next((section for section in sections[1:] if section[:1] == ["Argument helptext:"]), [])
    if len(helptext) > 1:
        parts.append(f"expected {helptext[1]}")
    message = "; ".join(part for part in parts if part) or "invalid arguments"
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
