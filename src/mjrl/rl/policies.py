"""Policy kinds: the networks an algorithm trains, registered by name (`--policy.kind`).

A kind builds a module from the env's observation spec (`mjrl.obs_spec`: shape, dtype and
normalisation per group), its number of actions and the run's `PolicyConfig`. `mlp`
(`ActorCritic`: a Gaussian MLP actor, an MLP value critic, observation normalisers) is mjrl's
own; a plugin registers more (`register_policy_kind`), and a run records its kind in its
config, so that play, export and distillation rebuild it unasked.

Whatever algorithm trained it, a policy is used one way (`TrainedPolicy`): the deterministic
action for raw actor observations, `reset(dones)` where episodes ended (a recurrent core
forgets its state there), and `deployable()`, the module export writes. What an algorithm
needs beyond that is its own contract: PPO, distillation and the test's replay learner train
`ActorCritic`'s interface, so a kind for them subclasses it (`tests/policy_kind.py`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import torch
from torch import nn

from mjrl.errors import UsageError
from mjrl.obs_spec import ObsGroupSpec
from mjrl.rl.config import PolicyConfig, saved_policy_config
from mjrl.rl.networks import ActorCritic, build_actor_critic, build_squashed


class TrainedPolicy(Protocol):
    """What play, evaluation, video and export use of any trained policy (an `nn.Module`)."""

    def act_deterministic(self, raw_actor_obs: torch.Tensor) -> torch.Tensor:
        """The policy's action for raw (unnormalised) actor observations, without exploration."""
        ...

    def reset(self, dones: torch.Tensor) -> None:
        """Episodes ended where `dones` (num_envs,) is True: forget what was carried for them."""
        ...

    def deployable(
        self, action_offset: torch.Tensor | None = None, action_scale: torch.Tensor | float = 1.0,
        action_clip: float = math.inf,
    ) -> nn.Module:  # fmt: skip
        """A self-contained float32 CPU module for export: raw actor observations in, actions
        out (the actuator targets `offset + scale * clip(action)` when `action_offset` is given)."""
        ...


PolicyBuilder = Callable[[Mapping[str, ObsGroupSpec], int, PolicyConfig, torch.device], nn.Module]
"""(the observation spec by group, number of actions, settings, device) -> a fresh policy on
`device`."""


@dataclasses.dataclass(frozen=True)
class PolicyKind:
    name: str
    """`--policy.kind NAME`."""
    build: PolicyBuilder
    summary: str
    """One line for `mjrl list`-style listings and errors."""


_KINDS: dict[str, PolicyKind] = {}


def register_policy_kind(kind: PolicyKind) -> None:
    """Make `kind` trainable as `--policy.kind kind.name` (a name is registered once)."""
    if _KINDS.get(kind.name, kind) != kind:
        raise ValueError(f"policy kind {kind.name!r} is already registered")
    _KINDS[kind.name] = kind


def policy_kind_names() -> list[str]:
    return sorted(_KINDS)


def check_policy_kind(name: str) -> None:
    if name != "auto" and name not in _KINDS:
        raise UsageError(
            f"--policy.kind {name}: no such policy kind; registered: {', '.join(policy_kind_names())} "
            "(a plugin's kind needs --plugins MODULE)"
        )


def build_policy(
    obs_spec: Mapping[str, ObsGroupSpec], num_actions: int, cfg: PolicyConfig, device: torch.device, algo: str = "ppo"
) -> nn.Module:
    """A fresh policy of `cfg.kind` (`auto`: `algo`'s own kind) for an env's observation groups
    and actions."""
    from mjrl.rl.registry import policy_kind_of

    kind = policy_kind_of(cfg.kind, algo, cfg.rnn_type)
    check_policy_kind(kind)
    return _KINDS[kind].build(obs_spec, num_actions, cfg, device)


def load_policy(
    checkpoint: Mapping[str, Any],
    source: Any,
    default: PolicyConfig,
    obs_spec: Mapping[str, ObsGroupSpec],
    num_actions: int,
    device: torch.device,
) -> nn.Module:
    """The one way to rebuild a trained policy, whatever algorithm trained it: the kind and
    settings it was trained with (its config in `checkpoint`, `default` filling what older runs
    lack; the run's recorded plugins imported first, for a kind one of them registers), its
    weights loaded (weights that do not fit are a usage error naming `source`), in eval mode and
    without gradients."""
    from mjrl.checkpoint import load_weights
    from mjrl.plugins import import_plugins

    config = checkpoint["config"]
    import_plugins(config.get("plugins", ()))
    saved = saved_policy_config(config, default)
    # `auto` is the kind of the algorithm that trained it (runs before `algo` was recorded: PPO).
    policy = build_policy(obs_spec, num_actions, saved, device, config.get("algo", "ppo"))
    load_weights(lambda: policy.load_state_dict(checkpoint["policy"]), source)
    return policy.eval().requires_grad_(False)


def build_mlp(
    obs_spec: Mapping[str, ObsGroupSpec], num_actions: int, cfg: PolicyConfig, device: torch.device
) -> ActorCritic:
    """The `mlp` kind: an `ActorCritic` for the spec's widths, with a normaliser (and its std
    floors) for each group the spec lets one scale. A kind that changes one of its parts starts
    here (`tests/policy_kind.py`)."""
    return build_actor_critic(*_widths_floors_normalized(obs_spec, num_actions, cfg, device))


def _build_squashed(
    obs_spec: Mapping[str, ObsGroupSpec], num_actions: int, cfg: PolicyConfig, device: torch.device
) -> nn.Module:
    return build_squashed(*_widths_floors_normalized(obs_spec, num_actions, cfg, device))


def _widths_floors_normalized(
    obs_spec: Mapping[str, ObsGroupSpec], num_actions: int, cfg: PolicyConfig, device: torch.device
) -> tuple:
    """The arguments of the MLP builders (`build_actor_critic`, `build_squashed`) from a spec:
    each group's width, its std floors, and the groups a normaliser may scale."""
    widths = {group: spec.width for group, spec in obs_spec.items()}
    floors = {group: spec.std_floor for group, spec in obs_spec.items()}
    normalized = [group for group, spec in obs_spec.items() if spec.normalize]
    return widths, num_actions, cfg, device, floors, normalized


def _build_recurrent(
    obs_spec: Mapping[str, ObsGroupSpec], num_actions: int, cfg: PolicyConfig, device: torch.device
) -> nn.Module:
    from mjrl.rl.recurrent import RecurrentActorCritic

    widths, _, _, _, floors, normalized = _widths_floors_normalized(obs_spec, num_actions, cfg, device)
    return RecurrentActorCritic(
        widths, num_actions, cfg, actor_std_floor=floors.get("actor"), critic_std_floor=floors.get("critic"),
        normalized_groups=normalized,
    ).to(device)  # fmt: skip


register_policy_kind(PolicyKind("mlp", build_mlp, "Gaussian MLP actor and MLP value critic (ActorCritic)"))
register_policy_kind(
    PolicyKind("recurrent", _build_recurrent, "ActorCritic reading through an LSTM or GRU (--policy.rnn-type)")
)
register_policy_kind(
    PolicyKind("squashed", _build_squashed, "tanh-squashed Gaussian MLP actor, state-dependent std (SAC's)")
)
