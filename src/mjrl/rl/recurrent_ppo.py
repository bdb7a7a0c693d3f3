"""PPO with a recurrent policy (`--policy.rnn-type lstm|gru`): what changes from `ppo.py`.

Collection carries each network's memory state per env, stores the state every step begins
from, and zeroes it where an episode ends; a time-out's bootstrap reads the final observation
through the critic's state from before that reset.

The update is PPO's (epochs x minibatches of the clipped surrogate, the same advantages), on
windows instead of single steps: each env's rollout is cut into windows of
`rnn_sequence_length` steps (`recurrent.cut_windows`), each replayed through the memory from
the state stored at its start (after `rnn_burn_in` steps without loss), the state zeroed where
an episode begins inside it. Minibatches are whole windows; every loss is a mean over the
windows' real steps (padding weighs 0), so every rollout step counts once, as in PPO.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from mjrl.distributed import DistContext
from mjrl.mirror import ColumnMirror
from mjrl.rl.algorithm import Observations
from mjrl.rl.config import PolicyConfig, PpoConfig
from mjrl.rl.ppo import PPO, gaussian_kl, mean, surrogate_loss, value_loss
from mjrl.rl.recurrent import RecurrentActorCritic, check_same_memory, cut_windows, reset_state, window_starts
from mjrl.rl.statistics import pool_rollout_statistics
from mjrl.rl.storage import Field, Rollout, compute_gae
from mjrl.rl.symmetry import mirrored_observations


def zero_after(states: torch.Tensor, originals: int) -> torch.Tensor:
    """Windows' stored states (B, S, H) with those after the first `originals` (mirror images) zeroed."""
    if states.shape[0] == originals:
        return states
    return torch.cat([states[:originals], torch.zeros_like(states[originals:])])


class RecurrentPPO(PPO):
    """PPO for a `RecurrentActorCritic`: the same `Algorithm`, with states carried and windows."""

    def __init__(
        self, policy: RecurrentActorCritic, cfg: PpoConfig, policy_cfg: PolicyConfig, ctx: DistContext,
        num_envs: int, num_steps: int, mirrors: Mapping[str, ColumnMirror] | None = None,
    ) -> None:  # fmt: skip
        super().__init__(policy, cfg, ctx, num_envs, num_steps, mirrors)
        self.states = policy.initial_states(num_envs, ctx.device)
        """Each memory's state for the coming step, (S, N, H) by network, updated in place."""
        self.episode_start = torch.ones(num_envs, dtype=torch.bool, device=ctx.device)
        """Whether the coming step is an episode's first (where `update` zeroes a window's state)."""
        self.policy_cfg = policy_cfg
        length = min(policy_cfg.rnn_sequence_length, num_steps)
        self.windows = cut_windows(num_steps, num_envs, length, policy_cfg.rnn_burn_in, ctx.device)

    def storage_fields(self) -> dict[str, Field]:
        """PPO's, the state each step begins from (per env: S x H) and whether it begins an episode."""
        fields = super().storage_fields()
        for net, memory in self.policy.memories.items():
            fields[f"{net}_state"] = Field((memory.state_layers, memory.hidden_size))
        return {**fields, "starts": Field(dtype=torch.bool)}

    # ------------------------------------------------------------------------ collection

    def _act(self, obs: Observations, noise: torch.Tensor) -> torch.Tensor:
        """PPO's `_act` through the memories: the states before the step are stored, then advanced."""
        policy, states = self.policy, self.states
        self.storage.store(starts=self.episode_start, **{f"{n}_state": s.transpose(0, 1) for n, s in states.items()})
        features, actor_state = policy.step_features("actor", policy.normalize_actor(obs["actor"]), states.get("actor"))
        dist = policy.distribution(features)
        actions = dist.sample_from(noise)
        values, critic_state = self._values(obs["critic"])
        self.storage.store(
            actor_obs=obs["actor"], critic_obs=obs["critic"], actions=actions, log_probs=dist.log_prob(actions),
            values=values, action_mean=dist.mean, action_std=dist.stddev,
        )  # fmt: skip
        for net, new in (("actor", actor_state), ("critic", critic_state)):
            if net in states:
                states[net].copy_(new)
        return actions

    def _values(self, critic_obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Values of raw critic observations from the critic's current state, and its next state."""
        features, state = self.policy.step_features(
            "critic", self.policy.normalize_critic(critic_obs), self.states.get("critic")
        )
        return self.policy.value(features), state

    def _store_step(
        self, rewards: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor, final_critic_obs: torch.Tensor
    ) -> None:
        # A time-out's bootstrap: the final observation read through the critic's state after
        # the episode's last step, before the reset below.
        rewards = rewards + self.cfg.gamma * self._values(final_critic_obs)[0] * truncated
        dones = terminated | truncated
        for state in self.states.values():
            state.copy_(reset_state(state, dones))
        self.episode_start.copy_(dones)
        self.storage.store(rewards=rewards, dones=dones.float())
        self.storage.next_step()

    @torch.no_grad()
    def value(self, critic_obs: torch.Tensor) -> torch.Tensor:
        """Values through the critic's current state (PPO's `compute_returns` reads them)."""
        return self._values(critic_obs)[0]

    @torch.no_grad()
    def warm_up(self, obs: Observations, step: Callable[[torch.Tensor], Observations], steps: int) -> int:
        """PPO's warm-up of the normalisers; its steps do not reset the states at episode ends,
        so training starts them at zero."""
        taken = super().warm_up(obs, step, steps)
        for state in self.states.values():
            state.zero_()
        self.episode_start.fill_(True)
        return taken

    # ---------------------------------------------------------------------------- update

    def _rollout_batch(self, buf: Rollout, last_values: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """The rollout as windows (B of them, batch-first: PPO's update permutes and splits the
        first dimension), advantages normalised over every rank's rollout as in PPO."""
        cfg, policy, w = self.cfg, self.policy, self.windows
        advantages, returns = compute_gae(buf.rewards, buf.values, buf.dones, last_values, cfg.gamma, cfg.lam)
        with torch.no_grad():  # with the statistics the rollout was collected with, before they move
            actor_obs = policy.normalize_actor(buf.actor_obs)
            critic_obs = policy.normalize_critic(buf.critic_obs)
            images = {}
            if self.mirrors is not None:
                images = mirrored_observations(policy, self.mirrors, buf.actor_obs, buf.critic_obs)
        adv_mean, adv_std = pool_rollout_statistics(self.ctx, policy, advantages, buf)
        if cfg.normalize_advantages:
            advantages = (advantages - adv_mean) / (adv_std + 1e-8)

        def windowed(x: torch.Tensor) -> torch.Tensor:  # (T, N, ...) -> (B, W, ...)
            return x[w.step, w.env].transpose(0, 1)

        step, env = w.first
        batch = {
            "actor_obs": windowed(actor_obs), "critic_obs": windowed(critic_obs), "actions": windowed(buf.actions),
            "log_probs": windowed(buf.log_probs), "values": windowed(buf.values),
            "advantages": windowed(advantages), "returns": windowed(returns), "mu": windowed(buf.action_mean),
            "std": windowed(buf.action_std), "starts": window_starts(w, buf.starts).T, "valid": w.valid.T,
            "weights": w.loss.T.float(),
            **{f"{net}_state": buf.fields[f"{net}_state"][step, env] for net in policy.memories},
            **{name: windowed(image) for name, image in images.items()},
        }  # fmt: skip
        return batch, returns

    def _losses(
        self, mb: dict[str, torch.Tensor], originals: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """PPO's losses on a minibatch of windows (b, W, ...; the first `originals` not mirror
        images): each network replays its windows from their stored states, through their
        burn-in; means over the steps whose loss counts."""
        cfg, policy, burn_in = self.cfg, self.policy, self.policy_cfg.rnn_burn_in
        seq = {k: v.transpose(0, 1) for k, v in mb.items() if not k.endswith("_state")}  # (W, b, ...)
        # A state cannot be mirrored: a mirror image runs from a zero state through its burn-in.
        states = {net: zero_after(mb[f"{net}_state"], originals).transpose(0, 1) for net in policy.memories}

        def features(net: str, obs: torch.Tensor | None = None, zero: bool = False) -> torch.Tensor:
            """`net`'s MLP input over the windows: of the minibatch's observations (or `obs`) from
            the stored states (or zero states)."""
            state = states.get(net)
            state = torch.zeros_like(state) if zero and state is not None else state
            obs = seq[f"{net}_obs"] if obs is None else obs
            valid = seq["valid"] if self.windows.padded else None
            return policy.window_features(net, obs, state, seq["starts"], valid, burn_in)

        dist = policy.distribution(features("actor"))
        values = policy.value(features("critic"))
        tail = {k: v[burn_in:] for k, v in seq.items()}  # the positions after the burn-in
        weights = tail["weights"]
        entropy = mean(dist.entropy(), weights)
        ratio = torch.exp(dist.log_prob(tail["actions"]) - tail["log_probs"])
        surrogate = surrogate_loss(ratio, tail["advantages"], cfg.clip_param, weights)
        v_loss = value_loss(values, tail["values"], tail["returns"], cfg.value_clip_param, weights)
        loss = surrogate + cfg.value_loss_coef * v_loss - cfg.entropy_coef * entropy
        symmetry = None
        if self.mirrors is not None:
            mirrored_obs = seq.get("mirrored_actor_obs")  # (without augmentation)
            symmetry = self._mirror_loss(dist.mean, originals, weights[:, :originals], features, mirrored_obs)
            loss = loss + cfg.symmetry.mirror_loss_coef * symmetry
        with torch.no_grad():  # against the old policy on the originals: it never saw the images
            own = weights[:, :originals]
            kl = mean(gaussian_kl(tail["mu"][:, :originals], tail["std"][:, :originals], dist.mean[:, :originals],
                                  dist.stddev[:, :originals]), own)  # fmt: skip
            clip_fraction = mean(((ratio - 1.0).abs() > cfg.clip_param).float(), weights)
            statistics = torch.stack([surrogate, v_loss, entropy, kl, clip_fraction])
        return loss, statistics, symmetry

    def _mirror_loss(
        self, means: torch.Tensor, originals: int, weights: torch.Tensor, features: Callable,
        mirrored_obs: torch.Tensor | None,
    ) -> torch.Tensor:  # fmt: skip
        """The mean on mirrored windows against the mirror image of the originals' (held fixed),
        over the originals' counted steps; without augmentation the images run here, from zero."""
        if means.shape[1] > originals:  # augmented: the images' means are computed already
            mirrored = means[:, originals:]
        else:
            mirrored = self.policy.mean_action(features("actor", mirrored_obs, zero=True))
        target = self.mirrors["actions"](means[:, :originals]).detach()
        return mean(((mirrored - target) ** 2).mean(-1), weights)

    # ------------------------------------------------------------------------------ common

    def load_state_dict(self, state: Mapping, weights_only: bool = False) -> None:
        """PPO's, for a checkpoint of the same memory; the states start at zero, as the env's
        episodes do on a resume."""
        check_same_memory(state.get("config", {}).get("policy", {}), self.policy_cfg)
        super().load_state_dict(state, weights_only)
        for memory_state in self.states.values():
            memory_state.zero_()
        self.episode_start.fill_(True)
