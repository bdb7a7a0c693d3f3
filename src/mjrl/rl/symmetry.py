"""Left-right symmetry in the PPO update (`SymmetryConfig`), as rsl_rl does it: each minibatch
followed by its mirror image (augmentation), and a loss that asks the policy's mean on mirrored
observations to be the mirror image of its mean on the originals.

The mirrors (`ColumnMirror`, by "actor", "critic" and "actions") come from the env's terms
(`mjrl.envs.symmetry`); observations are mirrored raw, then normalised like the originals.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from mjrl.mirror import ColumnMirror
from mjrl.rl.networks import ActorCritic


def mirrored_observations(
    policy: ActorCritic, mirrors: Mapping[str, ColumnMirror], raw_actor: torch.Tensor, raw_critic: torch.Tensor
) -> dict[str, torch.Tensor]:
    """The rollout's observations mirrored, then normalised as the originals are."""
    return {
        "mirrored_actor_obs": policy.normalize_actor(mirrors["actor"](raw_actor)),
        "mirrored_critic_obs": policy.normalize_critic(mirrors["critic"](raw_critic)),
    }


def with_mirror_images(mb: dict[str, torch.Tensor], mirror_actions: ColumnMirror) -> dict[str, torch.Tensor]:
    """The minibatch followed by its mirror image: mirrored observations and actions, with the
    advantage, return, value and old log-probability of each original."""
    images = {
        "actor_obs": mb.pop("mirrored_actor_obs"),
        "critic_obs": mb.pop("mirrored_critic_obs"),
        "actions": mirror_actions(mb["actions"]),
    }
    return {k: torch.cat([v, images.get(k, v)]) for k, v in mb.items()}


def mirror_loss(
    policy: ActorCritic,
    mirror_actions: ColumnMirror,
    mb: dict[str, torch.Tensor],
    means: torch.Tensor,
    originals: int,
) -> torch.Tensor:
    """Mean squared error (over samples and actions) between the policy's mean on mirrored
    observations and the mirror image of its mean on the originals (held fixed: the images
    learn from the originals)."""
    augmented = means.shape[0] > originals  # then the images' means are computed already
    mirrored_means = means[originals:] if augmented else policy.mean_action(mb["mirrored_actor_obs"])
    target = mirror_actions(means[:originals]).detach()
    return ((mirrored_means - target) ** 2).mean()
