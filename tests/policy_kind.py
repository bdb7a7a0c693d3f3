"""A policy kind written for a test and registered from it as `--policy.kind layernorm-mlp`: no
edit under `src/`. Its actor normalises each layer's input (a LayerNorm ahead of the MLP), so
it is not the built-in `mlp`, and it subclasses `ActorCritic`, the interface PPO trains.

Imported by name (`policy_kind`, with `--plugins policy_kind`); a run records its plugins, so
`play` and `mjrl export` import it again from the checkpoint's config, unasked.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from mjrl.obs_spec import ObsGroupSpec
from mjrl.rl import PolicyConfig, PolicyKind, register_policy_kind
from mjrl.rl.networks import ActorCritic
from mjrl.rl.policies import build_mlp


def build(obs_spec: Mapping[str, ObsGroupSpec], num_actions: int, cfg: PolicyConfig,
          device: torch.device) -> ActorCritic:  # fmt: skip
    policy = build_mlp(obs_spec, num_actions, cfg, device)
    policy.actor = nn.Sequential(nn.LayerNorm(obs_spec["actor"].width), *policy.actor).to(device)
    return policy


register_policy_kind(PolicyKind("layernorm-mlp", build, "a test's MLP actor with a LayerNorm ahead (tests/)"))
