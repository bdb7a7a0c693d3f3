"""Proximal Policy Optimisation: its losses and the update, in one file.

Read top to bottom, beside `storage.py` (a `Rollout` holds one iteration's data,
`compute_gae` turns rewards into advantages and returns): `PPO` collects into its buffer through
the `Algorithm` interface (`act`, `process_env_step`, `compute_returns`) and `PPO.update` runs epochs x minibatches of
clipped-surrogate steps. Every statistic that must agree across ranks goes through `ctx` (the
distributed context); with one process those reductions are the identity.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from mjrl.distributed import DistContext
from mjrl.errors import UsageError
from mjrl.fused import fuse
from mjrl.mirror import ColumnMirror
from mjrl.rl.algorithm import NonFiniteUpdate, Observations, Transition, parameter_checksum
from mjrl.rl.config import PpoConfig
from mjrl.rl.gradients import FlatGradients, average_update, broadcast_learner_state
from mjrl.rl.networks import ActorCritic
from mjrl.rl.normalizer import warm_up_normalizers
from mjrl.rl.optim import Adam
from mjrl.rl.statistics import STEP_STATISTICS, StepTotals, pool_rollout_statistics, rollout_sums, update_metrics
from mjrl.rl.storage import Field, Rollout, compute_gae
from mjrl.rl.symmetry import mirror_loss, mirrored_observations, with_mirror_images


def gaussian_kl(
    mu_old: torch.Tensor, std_old: torch.Tensor, mu_new: torch.Tensor, std_new: torch.Tensor
) -> torch.Tensor:
    """KL(old || new) of diagonal Gaussians, summed over action dimensions, per sample."""
    return (torch.log(std_new / std_old) + (std_old**2 + (mu_old - mu_new) ** 2) / (2.0 * std_new**2) - 0.5).sum(-1)


def mean(x: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """The mean of `x`, or weighted by `weights` (a recurrent update's loss mask)."""
    return x.mean() if weights is None else (x * weights).sum() / weights.sum()


def surrogate_loss(
    ratio: torch.Tensor, advantages: torch.Tensor, clip: float, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """Clipped surrogate objective, as a loss (to minimise); `ratio` is pi_new(a|s) / pi_old(a|s)."""
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip, 1.0 + clip) * advantages
    return -mean(torch.min(unclipped, clipped), weights)


def value_loss(
    values: torch.Tensor, old: torch.Tensor, returns: torch.Tensor, clip: float, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """Squared error to the returns; with clip > 0, the pessimum of the clipped and unclipped
    prediction, so the value function cannot move far from the one that collected the data."""
    loss = (values - returns) ** 2
    if clip > 0:
        clipped = old + (values - old).clamp(-clip, clip)
        loss = torch.max(loss, (clipped - returns) ** 2)
    return mean(loss, weights)


class PPO:
    """PPO as an `Algorithm`: the runner calls `act` and `process_env_step` at every env step,
    then `compute_returns` and `update`."""

    MAX_CONSECUTIVE_SKIPS = 5
    update_every = 0  # on-policy: once per rollout

    def __init__(
        self,
        policy: ActorCritic,
        cfg: PpoConfig,
        ctx: DistContext,
        num_envs: int,
        num_steps: int,
        mirrors: Mapping[str, ColumnMirror] | None = None,
    ):
        self.policy = policy
        self.cfg = cfg
        self.ctx = ctx
        if cfg.symmetry.enabled and mirrors is None:
            raise ValueError("symmetry is on, but the env declares no mirrors")
        self.mirrors = mirrors if cfg.symmetry.enabled else None
        """How "actor", "critic" and "actions" mirror, when symmetry is on."""
        self.storage = Rollout(num_steps, num_envs, self.storage_fields(), ctx.device)
        self.last_values = torch.zeros(num_envs, device=ctx.device)
        self.optimizer = Adam(policy.parameters(), lr=cfg.learning_rate)
        self.params = self.optimizer.params
        # The gradients in one flat buffer, the actor's (with its log-std) first, so that each
        # network's clip is a slice; the KL and the loss travel with them.
        critic = {id(p) for p in policy.critic_parameters()}
        self.grad_order = [p for p in self.params if id(p) not in critic] + [p for p in self.params if id(p) in critic]
        self.actor_grad_size = sum(p.numel() for p in self.grad_order if id(p) not in critic)
        self.gradients = FlatGradients(self.grad_order, 2)
        self.generator = torch.Generator(device=ctx.device)
        self.consecutive_skips = torch.zeros((), dtype=torch.float64, device=ctx.device)
        """Gradient steps (updates, in "rollout" sync mode) skipped in a row for a non-finite value,
        counted on the device; `update_metrics` raises `NonFiniteUpdate` when it reaches
        `MAX_CONSECUTIVE_SKIPS`."""

    def storage_fields(self) -> dict[str, Field]:
        """What the rollout keeps of each step, by name."""
        dims, actions, scalar = self.policy.obs_dims, Field((self.policy.num_actions,)), Field()
        return {"actor_obs": Field((dims["actor"],)), "critic_obs": Field((dims["critic"],)), "actions": actions,
                **dict.fromkeys(("log_probs", "values", "rewards", "dones"), scalar), "action_mean": actions,
                "action_std": actions}  # fmt: skip

    def compile(self, rollout: bool, update: bool) -> None:
        """Fuse with `torch.compile`: with `rollout`, what `act` and `process_env_step` compute
        (the networks' forward passes, the sample's arithmetic, the storage's writes); with
        `update`, the losses of a minibatch step (both networks' passes and PPO's losses, their
        backward with them). Random draws and the gradient bookkeeping stay eager."""
        if rollout:
            self._act = fuse(self._act)
            self._store_step = fuse(self._store_step)
        if update:
            self._losses = fuse(self._losses)

    # ------------------------------------------------------------------------ collection

    @torch.no_grad()
    def act(self, obs: Observations) -> torch.Tensor:
        """Sample actions for raw observations (noise from this PPO's own generator) and store
        what the update needs of this step."""
        shape = (obs["actor"].shape[0], self.storage.actions.shape[-1])
        return self._act(obs, torch.randn(shape, device=obs["actor"].device, generator=self.generator))

    def _act(self, obs: Observations, noise: torch.Tensor) -> torch.Tensor:
        """`act` once its noise is drawn: tensor operations only, which `compile` fuses."""
        dist = self.policy.distribution(self.policy.normalize_actor(obs["actor"]))
        actions = dist.sample_from(noise)
        self.storage.store(
            actor_obs=obs["actor"],
            critic_obs=obs["critic"],
            actions=actions,
            log_probs=dist.log_prob(actions),
            values=self.value(obs["critic"]),
            action_mean=dist.mean,
            action_std=dist.stddev,
        )
        return actions

    @torch.no_grad()
    def process_env_step(self, t: Transition) -> None:
        self._store_step(t.rewards, t.terminated, t.truncated, t.final_obs["critic"])

    def _store_step(
        self, rewards: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor, final_critic_obs: torch.Tensor
    ) -> None:
        # Time-out bootstrapping: a truncated episode would have gone on, so its last reward
        # gets the discounted value of its true final observation.
        rewards = rewards + self.cfg.gamma * self.value(final_critic_obs) * truncated
        self.storage.store(rewards=rewards, dones=(terminated | truncated).float())
        self.storage.next_step()

    @torch.no_grad()
    def compute_returns(self, obs: Observations) -> None:
        self.last_values = self.value(obs["critic"])

    @torch.no_grad()
    def value(self, critic_obs: torch.Tensor) -> torch.Tensor:
        return self.policy.value(self.policy.normalize_critic(critic_obs))

    @torch.no_grad()
    def warm_up(self, obs: Observations, step: Callable[[torch.Tensor], Observations], steps: int) -> int:
        """Start the observation normalisers from one rollout of the untrained policy (every
        rank's) of up to `steps` steps (`warm_up_normalizers` says why), not from the first
        observations alone, unless `PpoConfig.warm_up_normalizers` is off; the env steps taken."""
        normalizers = {"actor": self.policy.actor_normalizer, "critic": self.policy.critic_normalizer}
        normalizers = {group: n for group, n in normalizers.items() if n is not None}
        steps = steps if self.cfg.warm_up_normalizers else 0
        return warm_up_normalizers(normalizers, obs, step, self.act, steps, self.ctx)

    # ---------------------------------------------------------------------------- update

    def update(self) -> dict[str, torch.Tensor]:
        """One PPO update on the collected rollout (see `update_on`); the buffer starts over."""
        sums = self.update_on(self.storage, self.last_values)
        self.storage.restart()
        return sums

    def update_metrics(self, totals: Mapping[str, float]) -> dict[str, float]:
        if totals["consecutive_skips"] >= self.MAX_CONSECUTIVE_SKIPS:
            raise NonFiniteUpdate(
                f"{int(totals['consecutive_skips'])} consecutive PPO updates had a non-finite loss or gradient; "
                "lower --algorithm.learning-rate or check the task's observations and rewards"
            )
        metrics = update_metrics(totals)
        if "symmetry_loss" in totals:
            metrics["symmetry_loss"] = totals["symmetry_loss"] / max(totals["steps"], 1.0)
        return {**metrics, "learning_rate": totals["learning_rate"], "action_std": totals["action_std"]}

    def update_on(self, buf: Rollout, last_values: torch.Tensor) -> dict[str, torch.Tensor]:
        """One PPO update on a rollout. Returns this rank's sums by name: over its minibatch
        steps (`STEP_STATISTICS`, the learning rate, the step count) and over its rollout (for the
        explained variance), for the caller to pool over ranks with its other metrics and turn
        into means with `update_metrics`."""
        cfg = self.cfg
        self.gradients.attach()
        batch, returns = self._rollout_batch(buf, last_values)
        size = batch["actions"].shape[0]
        mb_size = size // cfg.num_mini_batches

        # Every decision below (skip a step, change the learning rate) is made on the device:
        # the host never waits for a minibatch step to finish.
        per_step_sync = cfg.sync == "gradients"
        start = None if per_step_sync else self._snapshot()
        totals = StepTotals.zeros(self.ctx.device)
        for _ in range(cfg.num_learning_epochs):
            # A fresh permutation every epoch, applied once; minibatches are consecutive chunks.
            perm = torch.randperm(size, device=self.ctx.device, generator=self.generator)
            chunks = {k: v[perm].split(mb_size) for k, v in batch.items()}
            for i in range(len(chunks["actions"])):
                self._minibatch_step({k: chunk[i] for k, chunk in chunks.items()}, per_step_sync, totals)
        if not per_step_sync:
            kl_sum = totals.sums[STEP_STATISTICS.index("mean_kl")]
            self._average_rollout_update(start, kl_sum / totals.updates.clamp(min=1.0), totals.skipped)

        step_sums = dict(zip(STEP_STATISTICS, totals.sums.double().unbind(), strict=True))
        if self.mirrors is not None:
            step_sums["symmetry_loss"] = totals.symmetry.double()
        return {
            **step_sums,
            "mean_learning_rate": totals.learning_rate,
            "steps": totals.updates.double(),
            **rollout_sums(returns, buf.values),
        }

    def _rollout_batch(self, buf: Rollout, last_values: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """The rollout as one flat batch of samples, advantages computed (and normalised over
        every rank's rollout), and the returns."""
        cfg = self.cfg
        advantages, returns = compute_gae(buf.rewards, buf.values, buf.dones, last_values, cfg.gamma, cfg.lam)

        # Flatten (T, N) into one batch; normalise observations once with the statistics the
        # rollout was collected with, so the stored log-probs match. Mirror images (symmetry)
        # are mirrored raw and normalised alike.
        with torch.no_grad():
            raw_actor_obs, raw_critic_obs = buf.flat("actor_obs"), buf.flat("critic_obs")
            actor_obs = self.policy.normalize_actor(raw_actor_obs)
            critic_obs = self.policy.normalize_critic(raw_critic_obs)
            images = {}
            if self.mirrors is not None:
                images = mirrored_observations(self.policy, self.mirrors, raw_actor_obs, raw_critic_obs)

        # One all-reduce pools what must agree across ranks: the advantages' moments (they are
        # normalised with the statistics of every rank's rollout) and the rollout's observation
        # moments, merged into the normalisers now for the next rollout.
        adv_mean, adv_std = pool_rollout_statistics(self.ctx, self.policy, advantages, buf)
        if cfg.normalize_advantages:
            advantages = (advantages - adv_mean) / (adv_std + 1e-8)
        batch = {
            "actor_obs": actor_obs,
            "critic_obs": critic_obs,
            "actions": buf.flat("actions"),
            "log_probs": buf.flat("log_probs"),
            "values": buf.flat("values"),
            "advantages": advantages.flatten(),
            "returns": returns.flatten(),
            "mu": buf.flat("action_mean"),
            "std": buf.flat("action_std"),
            **images,
        }
        return batch, returns

    def _minibatch_step(self, mb: dict[str, torch.Tensor], per_step_sync: bool, totals: StepTotals) -> None:
        """One gradient step on a minibatch (and its mirror image), added to `totals`."""
        cfg = self.cfg
        originals = mb["actions"].shape[0]
        if cfg.symmetry.augment:
            mb = with_mirror_images(mb, self.mirrors["actions"])

        # Losses of the current policy on this minibatch (and its mirror image).
        loss, statistics, symmetry = self._losses(mb, originals)
        kl = statistics[STEP_STATISTICS.index("mean_kl")]

        # Gradients, KL and a non-finite flag: averaged over ranks in one all-reduce in
        # "gradients" mode, kept local in "rollout" mode. A non-finite value anywhere
        # skips the step (on every rank, in "gradients" mode).
        with self.policy.matmul_precision():
            grads = torch.autograd.grad(loss, self.grad_order)
        # One copy into the flat buffer that the all-reduce, the clip and Adam read
        # (a backward into views of it adds into each one: a kernel per parameter).
        self.gradients.fill(grads, [kl, loss])
        scalars, skip = self.gradients.average(self.ctx, per_step_sync)
        kl_mean = scalars[0]

        # Adaptive learning rate from the rank-averaged KL: every rank computes the
        # same rate itself.
        if per_step_sync and cfg.schedule == "adaptive":
            self._adapt_learning_rate(kl_mean, skip)

        self.clip_gradients()
        self.optimizer.step(skip)
        totals.sums += torch.where(skip, 0.0, statistics)
        if self.mirrors is not None:
            totals.symmetry += torch.where(skip, 0.0, symmetry.detach())
        totals.learning_rate += torch.where(skip, 0.0, self.optimizer.lr)
        totals.updates += ~skip
        totals.skipped |= skip
        if per_step_sync:
            self._count_skip(skip)

    def _losses(
        self, mb: dict[str, torch.Tensor], originals: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """The loss to descend on a minibatch (and its mirror image), the step's statistics in
        STEP_STATISTICS' order, and the mirror loss (None without symmetry): torch operations
        only, no host read, so a compiler may fuse them (`scripts/bench_update.py --modes
        compile`)."""
        cfg = self.cfg
        dist = self.policy.distribution(mb["actor_obs"])
        entropy = dist.entropy().mean()
        values = self.policy.value(mb["critic_obs"])
        ratio = torch.exp(dist.log_prob(mb["actions"]) - mb["log_probs"])
        surrogate = surrogate_loss(ratio, mb["advantages"], cfg.clip_param)
        v_loss = value_loss(values, mb["values"], mb["returns"], cfg.value_clip_param)
        loss = surrogate + cfg.value_loss_coef * v_loss - cfg.entropy_coef * entropy
        symmetry = None
        if self.mirrors is not None:
            symmetry = mirror_loss(self.policy, self.mirrors["actions"], mb, dist.mean, originals)
            loss = loss + cfg.symmetry.mirror_loss_coef * symmetry
        with torch.no_grad():
            # Against the old policy on the original samples: it never saw the images.
            mu, std = dist.mean[:originals], dist.stddev[:originals]
            kl = gaussian_kl(mb["mu"][:originals], mb["std"][:originals], mu, std).mean()
            clip_fraction = ((ratio - 1.0).abs() > cfg.clip_param).float().mean()
            statistics = torch.stack([surrogate, v_loss, entropy, kl, clip_fraction])
        return loss, statistics, symmetry

    def clip_gradients(self) -> None:
        """Scale gradients down to a norm of at most `max_grad_norm`: the global norm, or the
        actor's (with its log-std) and the critic's separately."""
        flat, size = self.gradients.buffer, self.gradients.size
        if self.cfg.clip_networks_separately:
            parts = (flat[: self.actor_grad_size], flat[self.actor_grad_size : size])
        else:
            parts = (flat[:size],)
        for part in parts:
            norm = torch.linalg.vector_norm(part)
            part.mul_((self.cfg.max_grad_norm / (norm + 1e-6)).clamp(max=1.0))

    def _count_skip(self, skip: torch.Tensor) -> None:
        """One more skip in a row, or none since the last step taken."""
        self.consecutive_skips.add_(1.0).mul_(skip)

    # ------------------------------------------------------------------ "rollout" sync mode

    def _snapshot(self) -> list[torch.Tensor]:
        return [t.detach().clone() for t in [*self.params, *self.optimizer.tensors()]]

    def _average_rollout_update(
        self, start: list[torch.Tensor], local_kl: torch.Tensor, local_skip: torch.Tensor
    ) -> None:
        """The update's change averaged over ranks (`average_update`), then the skip count and
        the adaptive rate from the averaged KL."""
        kl, any_skip = average_update(self.ctx, [*self.params, *self.optimizer.tensors()], start, local_kl, local_skip)
        self._count_skip(any_skip)
        if self.cfg.schedule == "adaptive":
            self._adapt_learning_rate(kl, any_skip)

    # ------------------------------------------------------------------------------ common

    def inference_policy(self) -> ActorCritic:
        return self.policy

    def log_values(self) -> dict[str, torch.Tensor]:
        return {
            "learning_rate": self.optimizer.lr,
            "action_std": self.policy.noise_std().mean(),
            "consecutive_skips": self.consecutive_skips,
        }

    def state_dict(self) -> dict[str, Any]:
        """The checkpoint entries `policy`, `optimizer` and `learning_rate` (the generator is
        checkpointed by the runner, with the other random streams)."""
        return {
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "learning_rate": self.learning_rate,
        }

    def load_state_dict(self, state: Mapping[str, Any], weights_only: bool = False) -> None:
        if "teacher" in state:
            raise UsageError("this checkpoint is a distillation's: continue it with --algo distillation")
        self.policy.load_state_dict(state["policy"])
        if not weights_only:
            self.optimizer.load_state_dict(state["optimizer"])
            self.set_learning_rate(state["learning_rate"])

    def broadcast_from_main(self) -> None:
        """Weights, normaliser statistics and Adam's moments as tensors, then the learning rate."""
        broadcast_learner_state(self.ctx, list(self.policy.state_dict().values()), self.optimizer)

    def parameters(self) -> list[torch.Tensor]:
        return self.params

    def parameter_checksum(self) -> torch.Tensor:
        return parameter_checksum(self.params)

    def _adapt_learning_rate(self, kl: torch.Tensor, skip: torch.Tensor) -> None:
        """Divide the rate by 1.5 (down to 1e-5) when the KL is above twice its target, multiply
        it by 1.5 (up to 1e-2) when below half; on the device, in float64 as on the host before,
        and not where the step is skipped."""
        rate, kl, target = self.optimizer.lr, kl.double(), self.cfg.desired_kl
        lower, higher = (rate / 1.5).clamp(min=1e-5), (rate * 1.5).clamp(max=1e-2)
        adapted = torch.where(kl > 2.0 * target, lower, torch.where((kl > 0.0) & (kl < 0.5 * target), higher, rate))
        torch.where(skip, rate, adapted, out=rate)

    @property
    def learning_rate(self) -> float:
        """The current rate, read on the host (for checkpoints and reports, not in the loop)."""
        return self.optimizer.lr.item()

    def set_learning_rate(self, learning_rate: float) -> None:
        self.optimizer.lr.fill_(learning_rate)
