"""Flags users already know, and one line for the ones nobody knows.

A command line written for mjrl before its agent settings split into `--runner.*`,
`--algorithm.*` and `--policy.*`, or for mjlab, keeps working: each old spelling is rewritten to
the flag that holds its value now, with one note naming that flag. Any other unknown flag is
refused with the closest real flags.
"""

from __future__ import annotations

import dataclasses
import difflib
import sys
import typing
from typing import Any, TextIO

import tyro

from mjrl.compat import FLAG_SPELLINGS
from mjrl.config import split_sections
from mjrl.errors import UsageError


def rename_known_flags(args: list[str], default: Any, notes: TextIO | None = None) -> list[str]:
    """`args` with every former or mjlab spelling replaced by the flag of `default`'s config that
    holds its value now; one note per replaced flag goes to `notes` (stderr)."""
    notes = notes or sys.stderr
    flags = set(known_flags(default))
    out = []
    for arg in args:
        name, sep, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        new = _new_name(name, default, flags)
        if new is None:
            out.append(arg)
            continue
        print(f"note: {name} is now {new}", file=notes)
        out.append(f"{new}{sep}{value}")
    return out


def _new_name(name: str, default: Any, flags: set[str]) -> str | None:
    if not name.startswith("--") or name in flags:
        return None
    spelled = name.replace("_", "-")
    if spelled in FLAG_SPELLINGS:
        new = FLAG_SPELLINGS[spelled]
        if new == "--env.num-envs" and "--num-envs" in flags:
            new = "--num-envs"  # play's own count, which its env is built with
        return new if new in flags else None
    for old, sections in split_sections(default).items():
        if spelled.startswith(f"--{old}."):
            rest = spelled.removeprefix(f"--{old}.")
            return next((f"--{s}.{rest}" for s in sections if f"--{s}.{rest}" in flags), None)
    return None


def moved_distillation_flags(args: list[str], algo: str | None, notes: TextIO | None = None) -> tuple[str | None, bool]:
    """Read, in place, the flags of distillation's former section as they meant. Naming a
    teacher (`--distillation.teacher RUN`) chose distillation: its flags become `--algorithm.*`
    and choose `--algo distillation`, and the `--algorithm.*` flags beside them, PPO's then,
    which distillation ignored, are dropped. Without a teacher they chose PPO and are dropped.
    One note per flag. Returns (the algorithm: `algo`, or distillation when a teacher chose it;
    whether one did). Another algorithm named beside a teacher is a usage error."""
    notes = notes or sys.stderr
    former = [i for i, arg in enumerate(args) if _flag_name(arg).startswith("--distillation.")]
    if not former:
        return algo, False
    teacher = next((_flag_value(args, i) for i in former if _flag_name(args[i]) == "--distillation.teacher"), "")
    if not teacher:
        for name in _drop_flags(args, former):
            print(f"note: {name} names no teacher: ignored, PPO trains as before", file=notes)
        return algo, False
    if algo not in (None, "auto", "distillation"):
        raise UsageError(f"--distillation.teacher chooses distillation (now --algo distillation --algorithm.teacher), "
                         f"but --algo {algo} does not distil: drop one")  # fmt: skip
    ppo = [i for i, arg in enumerate(args) if _flag_name(arg).startswith("--algorithm.")]
    for i in former:
        name = _flag_name(args[i])
        new = "--algorithm." + name.removeprefix("--distillation.")
        print(f"note: {name} is now {new}, with --algo distillation", file=notes)
        args[i] = new + args[i][len(args[i].partition("=")[0]) :]
    for name in _drop_flags(args, ppo):
        print(f"note: {name} beside --distillation.teacher was PPO's, which distillation ignored: dropped", file=notes)
    return "distillation", True


def _flag_name(arg: str) -> str:
    return arg.partition("=")[0].replace("_", "-") if arg.startswith("--") else ""


def _flag_value(args: list[str], i: int) -> str:
    """The value of the flag at `i` (`--flag=value`, or the next argument)."""
    _, sep, value = args[i].partition("=")
    if sep:
        return value
    return args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else ""


def _drop_flags(args: list[str], positions: list[int]) -> list[str]:
    """Remove the flags at `positions`, each with its values (up to the next flag); their names."""
    names, keep, i = [], [], 0
    while i < len(args):
        if i not in positions:
            keep.append(args[i])
            i += 1
            continue
        names.append(_flag_name(args[i]))
        inline = "=" in args[i]
        i += 1
        while not inline and i < len(args) and not args[i].startswith("--"):
            i += 1  # its values
    args[:] = keep
    return names


def known_flags(default: Any) -> list[str]:
    """Every flag of a config: its fields, nested configs as dotted names (`--env.num-envs`),
    a `flattened` nested config's fields at its parent's level."""
    names = []

    def walk(cfg: Any, prefix: str) -> None:
        flattened = getattr(type(cfg), "flattened", ())
        hints = typing.get_type_hints(type(cfg), include_extras=True)
        for field in dataclasses.fields(cfg):
            if tyro.conf.Positional in getattr(hints[field.name], "__metadata__", ()):
                continue  # given by position, not by a flag
            value = getattr(cfg, field.name)
            name = field.name.replace("_", "-")
            if dataclasses.is_dataclass(value):
                walk(value, prefix if field.name in flattened else f"{prefix}{name}.")
            else:
                names.append(f"--{prefix}{name}")

    walk(default, "")
    return names


def unknown_flags_message(tyro_text: str, args: list[str], default: Any) -> str | None:
    """One line naming the flags of `args` that `default`'s config lacks, with the closest real
    ones; None when tyro's error was about something else. The names come from `args`, not from
    tyro's box, which wraps long lists at the console's width."""
    if "Unrecognized option" not in tyro_text:
        return None
    flags = known_flags(default)
    given = dict.fromkeys(arg.split("=", 1)[0] for arg in args if arg.startswith("--"))  # in order, once
    unknown = [name for name in given if name not in flags]
    if not unknown:
        return None
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, flags, n=3, cutoff=0.75)
        parts.append(f"{name} (did you mean {' or '.join(close)}?)" if close else f"{name} (no flag is close)")
    noun = "flag" if len(parts) == 1 else "flags"
    return f"unknown {noun} {'; '.join(parts)}"
