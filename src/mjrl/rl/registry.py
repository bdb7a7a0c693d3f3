"""Algorithms by name: what a run trains with, chosen by `train ... --algo NAME`.

An algorithm registers an `AlgorithmSpec`: its settings' class, how to build it, what it refuses
before anything is built. PPO and distillation register here; a plugin module (`--plugins`)
registers its own the same way. The runner, the checkpoints and the launcher know algorithms
only through `Algorithm` (`mjrl.rl.algorithm`) and this registry.

Settings: the chosen algorithm's are the `--algorithm.*` section, typed by its `config` (PPO's
flags are those users always wrote; distillation's teacher is `--algorithm.teacher`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mjrl.errors import UsageError

if TYPE_CHECKING:
    from mjrl.distributed import DistContext
    from mjrl.rl.algorithm import Algorithm, EnvInfo
    from mjrl.rl.networks import ActorCritic


@dataclasses.dataclass(frozen=True)
class TaskFacts:
    """What an algorithm may check of a task before anything is built (on the host, cheaply)."""

    name: str
    observation_groups: set[str]
    symmetry_problem: Callable[[], str | None]
    """Why the task cannot mirror left and right, or None; computed when asked (it compiles the scene)."""


@dataclasses.dataclass(frozen=True)
class AlgorithmSpec:
    name: str
    """`--algo NAME`."""
    config: type
    """Its settings, a frozen dataclass with documented fields: the `--algorithm.*` section's type."""
    build: Callable[[Any, ActorCritic, EnvInfo, int, DistContext], Algorithm]
    """(the run's config, a fresh policy, the env, rollout length, context) -> the algorithm."""
    summary: str
    """One line for `train --help`."""
    check: Callable[[Any, TaskFacts], None] | None = None
    """Raise a `UsageError` for what the task or the other settings cannot train with."""
    policy_kind: str = "mlp"
    """The policy kind it trains under `--policy.kind auto` (`mjrl.rl.policies`)."""


_REGISTRY: dict[str, AlgorithmSpec] = {}


def register_algorithm(spec: AlgorithmSpec) -> None:
    """Make `spec` trainable as `--algo spec.name` (a name is registered once)."""
    if _REGISTRY.get(spec.name, spec) != spec:
        raise ValueError(f"algorithm {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec


def algorithm_names() -> list[str]:
    return sorted(_REGISTRY)


def describe_algorithms() -> str:
    width = max(map(len, _REGISTRY))
    return "\n".join(f"  {name:<{width}}  {_REGISTRY[name].summary}" for name in algorithm_names())


def algorithm_spec(name: str) -> AlgorithmSpec:
    if name not in _REGISTRY:
        raise UsageError(f"--algo {name}: no such algorithm; registered: {', '.join(algorithm_names())}")
    return _REGISTRY[name]


def chosen_name(algo: str) -> str:
    """The name `--algo` stands for: `auto`, what older runs recorded, is PPO (a run that
    distilled is read as `distillation`: `mjrl.compat.upgrade_config`)."""
    return "ppo" if algo == "auto" else algo


def policy_kind_of(kind: str, algo: str, rnn_type: str = "none") -> str:
    """The policy kind a run of `--algo algo` trains for `--policy.kind kind`: `auto` is the
    algorithm's own, `recurrent` in place of `mlp` with a `--policy.rnn-type`."""
    if kind != "auto":
        return kind
    own = algorithm_spec(chosen_name(algo)).policy_kind
    return "recurrent" if own == "mlp" and rnn_type != "none" else own


def chosen_spec(cfg: Any) -> AlgorithmSpec:
    """The algorithm a run config (`TrainConfig`; an `AgentConfig`, which names none: PPO) trains with."""
    return algorithm_spec(chosen_name(getattr(cfg, "algo", "ppo")))
