"""Configs as typed, frozen dataclasses: to plain dicts (YAML, checkpoints) and back, and the
numeric ranges each config class declares in its `bounds`.

A config class may also declare:
- `flattened`: nested configs whose fields read as the parent's own (flags without a prefix,
  flat keys in files).
The keys older files named otherwise are `mjrl.compat`'s (renamed, retired, split sections).
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from typing import Any, Literal

from mjrl.compat import RENAMED_KEYS, RETIRED_KEYS, SPLIT_SECTIONS
from mjrl.errors import UsageError


def to_dict(cfg: Any) -> Any:
    """Dataclasses to nested dicts of plain values (tuples become lists), for YAML and checkpoints;
    the fields of a `flattened` nested config go into its parent's dict."""
    if dataclasses.is_dataclass(cfg):
        out = {}
        for f in dataclasses.fields(cfg):
            value = to_dict(getattr(cfg, f.name))
            out.update(value if f.name in _flattened(cfg) else {f.name: value})
        return out
    if isinstance(cfg, tuple):
        return [to_dict(v) for v in cfg]
    return cfg


def _flattened(cfg: Any) -> tuple[str, ...]:
    return getattr(type(cfg), "flattened", ())


def apply_dict(cfg: Any, values: dict, where: str = "") -> Any:
    """Return `cfg` with the (possibly partial, nested) `values` applied; unknown keys are errors.
    Keys of a `flattened` nested config may stand at this level (as `to_dict` writes them), and
    the keys `mjrl.compat` knows older files by load too; `where` (the path of `cfg` in the
    file, `env.`) names a key in messages."""
    hints = typing.get_type_hints(type(cfg))
    fields = {f.name: f for f in dataclasses.fields(cfg)}
    changes = {}
    values = _nest_flattened(cfg, _spread_split(cfg, values, where))
    classes = compat_names(cfg)
    for key, value in values.items():
        name = key.replace("-", "_")
        name = next((RENAMED_KEYS[f"{c}.{name}"] for c in classes if f"{c}.{name}" in RENAMED_KEYS), name)
        if any(f"{c}.{name}" in RETIRED_KEYS for c in classes):  # a key of an older file
            continue
        if name not in fields:
            raise UsageError(f"unknown config key '{where}{key}'; valid keys: {', '.join(fields)}")
        current = getattr(cfg, name)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise UsageError(f"config key {where}{key} must be a mapping")
            changes[name] = apply_dict(current, value, f"{where}{key}.")
        else:
            changes[name] = _coerce(value, hints[name], f"{where}{key}")
    return dataclasses.replace(cfg, **changes)


def _spread_split(cfg: Any, values: dict, where: str) -> dict:
    """`values` with each older section of `mjrl.compat.SPLIT_SECTIONS` spread over the sections
    that now hold its keys (a key of the older section stays an error if no section has it)."""
    values = dict(values)
    for old, sections in split_sections(cfg).items():
        if old not in values:
            continue
        if not isinstance(values[old], dict):
            raise UsageError(f"config key {where}{old} must be a mapping")
        for key, value in values.pop(old).items():
            owner = next((n for n in sections if key.replace("-", "_") in _field_names(getattr(cfg, n))), None)
            if owner is None:
                valid = ", ".join(name for n in sections for name in _field_names(getattr(cfg, n)))
                raise UsageError(f"unknown config key '{where}{old}.{key}'; valid keys: {valid}")
            values[owner] = {**values.get(owner, {}), key: value}
    return values


def split_sections(cfg: Any) -> dict[str, tuple[str, ...]]:
    """The older sections of `cfg`'s class -> the sections of `cfg` that hold their keys now."""
    prefixes = tuple(f"{name}." for name in compat_names(cfg))
    return {key.partition(".")[2]: sections for key, sections in SPLIT_SECTIONS.items() if key.startswith(prefixes)}


def compat_names(cfg: Any) -> tuple[str, ...]:
    """The class names `mjrl.compat` may know `cfg`'s keys by: its class's and those it derives
    from (`train`'s command is a `TrainConfig` with two fields more)."""
    return tuple(klass.__name__ for klass in type(cfg).__mro__ if dataclasses.is_dataclass(klass))


def _field_names(cfg: Any) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cfg))


def _nest_flattened(cfg: Any, values: dict) -> dict:
    """`values` with the keys of `flattened` nested configs moved under their config's name."""
    values = dict(values)
    for name in _flattened(cfg):
        inner = {f.name for f in dataclasses.fields(getattr(cfg, name))}
        moved = {k: values.pop(k) for k in list(values) if k.replace("-", "_") in inner}
        if moved:
            values[name] = {**values.get(name, {}), **moved}
    return values


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """`value` from a YAML file as a value of type `hint`, or a UsageError naming the key: the
    dataclasses themselves check nothing, and a wrong type fails much later with a traceback."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin is Literal:
        if value not in args:
            raise UsageError(f"config key {where}: {value!r} is not one of {args}")
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, option, where)
            except UsageError:
                continue
        raise UsageError(f"config key {where}: expected {_type_name(hint)}, got {value!r}")
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise UsageError(f"config key {where}: expected a list of {_type_name(hint)}, got {value!r}")
        hints = [args[0]] * len(value) if len(args) == 2 and args[1] is Ellipsis else list(args)
        if len(hints) != len(value):
            raise UsageError(f"config key {where}: expected a list of {len(hints)} items, got {value!r}")
        return tuple(_coerce(v, h, f"{where}[{i}]") for i, (v, h) in enumerate(zip(value, hints, strict=True)))
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    # bool is an int to Python, not to a config: `num_envs: true` is a mistake.
    if isinstance(hint, type) and (not isinstance(value, hint) or (hint is not bool and isinstance(value, bool))):
        raise UsageError(f"config key {where}: expected {_type_name(hint)}, got {value!r}")
    return value


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) is tuple:
        return " ".join(dict.fromkeys(_type_name(a) for a in typing.get_args(hint) if a is not Ellipsis))
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(hint))
    return "null" if hint is type(None) else getattr(hint, "__name__", str(hint))


# The rules a config class may declare for its numeric fields, in its `bounds` class attribute
# (a field name -> a rule or a tuple of rules). Numbers: ">= 1", "> 0", "<= 1", "< 1", or an
# interval "(0, 1]"; they apply to each element of a tuple field. "ordered": a (low, high)
# range with low <= high.
_COMPARISON = re.compile(r"^(>=|>|<=|<)\s*(\S+)$")
_INTERVAL = re.compile(r"^([\[(])\s*([^,]+?)\s*,\s*([^\])]+?)\s*([\])])$")
_WORDS = {">=": "at least", ">": "greater than", "<=": "at most", "<": "less than"}


def field_rules(cls: type) -> dict[str, tuple[str, ...]]:
    """The `bounds` of `cls` and of the config classes it derives from (a task's env config
    inherits EnvConfig's)."""
    rules: dict[str, tuple[str, ...]] = {}
    for klass in reversed(cls.__mro__):
        for name, rule in vars(klass).get("bounds", {}).items():
            rules[name] = (rule,) if isinstance(rule, str) else tuple(rule)
    return rules


def rule_holds(rule: str, value: Any) -> bool:
    if value is None:  # an optional field left unset (SimConfig.nconmax)
        return True
    if rule == "ordered":
        return list(value) == sorted(value)
    items = value if isinstance(value, tuple) else (value,)
    if match := _COMPARISON.match(rule):
        op, bound = match.group(1), float(match.group(2))
        compare = {">=": float.__ge__, ">": float.__gt__, "<=": float.__le__, "<": float.__lt__}[op]
        return all(compare(float(x), bound) for x in items)
    match = _INTERVAL.match(rule)
    if match is None:
        raise ValueError(f"malformed bounds rule {rule!r}")
    low, high = float(match.group(2)), float(match.group(3))
    closed_low, closed_high = match.group(1) == "[", match.group(4) == "]"
    return all(
        (low <= x if closed_low else low < x) and (x <= high if closed_high else x < high) for x in map(float, items)
    )


def describe_rule(rule: str, value: Any) -> str:
    if rule == "ordered":
        return "a range LOW HIGH with LOW <= HIGH"
    each = "each " if isinstance(value, tuple) else ""
    if match := _COMPARISON.match(rule):
        return f"{each}{_WORDS[match.group(1)]} {match.group(2)}"
    return f"{each}in {rule}"


def check_numbers(cfg: Any, where: str = "") -> None:
    """Every numeric field of `cfg` and of its nested configs (a task's included) must be finite
    and obey its class's `bounds`. The fields are walked, not listed, so a new field is checked
    for finiteness from the start and for its range once it declares one."""
    rules = field_rules(type(cfg))
    names = [f.name for f in dataclasses.fields(cfg)]
    if unknown := set(rules) - set(names):
        raise TypeError(f"{type(cfg).__name__}.bounds names fields it does not have: {sorted(unknown)}")
    for name in names:
        value = getattr(cfg, name)
        if dataclasses.is_dataclass(value):
            check_numbers(value, where if name in _flattened(cfg) else f"{where}{name}.")
            continue
        flag = "--" + f"{where}{name}".replace("_", "-")
        items = value if isinstance(value, tuple) else (value,)
        if any(isinstance(x, float) and not math.isfinite(x) for x in items):
            raise UsageError(f"{flag} must be a finite number (got {_text(value)})")
        for rule in rules.get(name, ()):
            if not rule_holds(rule, value):
                raise UsageError(f"{flag} must be {describe_rule(rule, value)} (got {_text(value)})")


def _text(value: Any) -> str:
    return " ".join(map(str, value)) if isinstance(value, tuple) else str(value)
