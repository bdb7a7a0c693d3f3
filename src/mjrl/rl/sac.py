"""Soft actor-critic for massively parallel envs (`--algo sac`): its update, in one file.

Read top to bottom, beside `critics.py` (`TwinCritic`, `n_step_returns`,
`project_onto_support`), `storage.py` (`ReplayRing`) and `networks.py`
(`SquashedGaussianPolicy`). SAC of the FastSAC/FastTD3 family:
- every env's transitions go into a replay ring on the env's device, written in place at
  each step (`process_env_step`), and are sampled as windows of `n_step` consecutive steps of
  one env;
- the critics learn n-step returns (`n_step_returns`), cut at an episode's end: a time-out is
  bootstrapped from its final observation, a termination is not;
- two distributional critics (C51: a categorical distribution over fixed atoms) with clipped
  double Q (the target distribution is the pessimistic target critic's; optionally the two's
  mixture, `SacConfig.clipped_double_q`) and Polyak-averaged
  target networks; a target distribution is projected back onto the atoms
  (`project_onto_support`), and the share that fell outside them is logged;
- a tanh-squashed Gaussian actor, its entropy temperature tuned to a target entropy;
- optionally left-right symmetry (`SacConfig.symmetry`): each window followed by its mirror
  image, and a mirror loss on the actor's mean.

The loop calls `update` after every `update_every` env steps (`Algorithm.update_every`).
Every decision in it (skip a step while the ring lacks data, or for a non-finite value on
any rank) is made on the device: nothing reads the device on the host, so the loop may
capture it. On several ranks each rank fills its own ring; gradients are averaged at every
step and the observation normalisers pool every rank's new observations, so the replicas stay
bit-identical (`parameter_checksum`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from mjrl.distributed import DistContext
from mjrl.errors import UsageError
from mjrl.fused import fuse
from mjrl.mirror import ColumnMirror
from mjrl.rl.algorithm import EnvInfo, NonFiniteUpdate, Observations, Transition, parameter_checksum
from mjrl.rl.config import PolicyConfig, SacConfig
from mjrl.rl.critics import TwinCritic, critics_value, n_step_returns, project_onto_support, target_distribution
from mjrl.rl.gradients import FlatGradients
from mjrl.rl.networks import SquashedGaussianPolicy, matmul_precision
from mjrl.rl.normalizer import RunningNormalizer, merge_all_into, warm_up_normalizers
from mjrl.rl.optim import Adam
from mjrl.rl.storage import Field, ReplayRing

SUMS = ("critic_loss", "actor_loss", "temperature", "entropy", "clipped_returns", "q_mean", "action_std",
        "symmetry_loss")  # fmt: skip
"""Summed over the gradient steps taken (`steps`); logged as means per step. `clipped_returns`:
the share of the target distributions' mass that fell outside the critics' support;
`symmetry_loss` (logged only with the mirror loss on): the actor's mirror loss."""


# ----------------------------------------------------------------------------------- SAC


class SAC:
    """SAC as an `Algorithm`: the runner calls `act` and `process_env_step` at every env step and
    `update` after every `update_every` of them."""

    MAX_CONSECUTIVE_SKIPS = 1000
    """Gradient steps skipped in a row for a non-finite value before the run stops (a step
    skipped for lack of data does not count)."""

    def __init__(
        self,
        policy: SquashedGaussianPolicy,
        cfg: SacConfig,
        policy_cfg: PolicyConfig,
        env: EnvInfo,
        ctx: DistContext,
        mirrors: Mapping[str, ColumnMirror] | None = None,
    ) -> None:
        self.policy, self.cfg, self.ctx = policy, cfg, ctx
        if cfg.symmetry.enabled and mirrors is None:
            raise ValueError("symmetry is on, but the env declares no mirrors")
        self.mirrors = mirrors if cfg.symmetry.enabled else None
        """How "actor", "critic" and "actions" mirror, when symmetry is on."""
        self.batch_rows = cfg.batch_size * (2 if cfg.symmetry.augment else 1)
        """Rows of each gradient step: the sampled windows, and their mirror images with `augment`."""
        self.num_envs = env.num_envs
        self.update_every = cfg.update_every
        device = ctx.device
        policy.actor.bound.fill_(cfg.action_bound)
        critic_dim, num_actions = env.obs_dims["critic"], env.num_actions

        # The critics, their targets and what they read: the critic group, normalised apart.
        self.critic = TwinCritic(critic_dim, num_actions, policy_cfg.critic_hidden_dims, policy_cfg.activation,
                                 cfg.num_atoms, cfg.critic_layer_norm).to(device)  # fmt: skip
        self.target = copy.deepcopy(self.critic).requires_grad_(False)
        self.critic_normalizer = None
        if policy_cfg.normalize_observations and env.obs_spec["critic"].normalize:
            offset, floor = policy_cfg.obs_std_offset, env.obs_std_floors.get("critic")
            self.critic_normalizer = RunningNormalizer(critic_dim, std_offset=offset, std_floor=floor).to(device)
        self.precision = policy_cfg.precision
        self.atoms = torch.linspace(-1.0, 1.0, cfg.num_atoms, device=device) * cfg.v_max
        """The critics' support; with `v_max` 0, set from the rewards at the first update."""
        self.support_set = cfg.v_max > 0

        # The temperature (its log, learned) and the optimizers.
        self.log_alpha = nn.Parameter(torch.tensor(math.log(cfg.init_temperature), device=device))
        self.target_entropy = cfg.target_entropy * num_actions
        self.actor_params = [*policy.actor.parameters()]
        self.critic_params = [*self.critic.parameters()]
        self.actor_optimizer = Adam([*self.actor_params, self.log_alpha], lr=cfg.learning_rate)
        self.critic_optimizer = Adam(self.critic_params, lr=cfg.learning_rate)
        # Each step's gradients in one flat buffer per optimizer, averaged over ranks in one
        # all-reduce with the scalars that travel with them.
        self.critic_gradients = FlatGradients(self.critic_params, 3)  # loss, clipped share, lacking data
        self.actor_gradients = FlatGradients([*self.actor_params, self.log_alpha], 2)  # loss, entropy
        self.consecutive_skips = torch.zeros((), dtype=torch.float64, device=device)
        self.generator = torch.Generator(device=device)

        # The ring: every env's steps, a step of all envs at a time (row e is env e's).
        actor, critic = Field((env.obs_dims["actor"],)), Field((critic_dim,))
        fields = {"actor": actor, "critic": critic, "action": Field((num_actions,)), "reward": Field(),
                  "terminated": Field(dtype=torch.bool), "truncated": Field(dtype=torch.bool),
                  "next_actor": actor, "next_critic": critic}  # fmt: skip
        self.ring = ReplayRing(cfg.buffer_steps * env.num_envs, fields, device)

    def compile(self, rollout: bool, update: bool) -> None:
        """Fuse with `torch.compile`: with `rollout`, the actor's sampling; with `update`, the
        critics' and the actor's losses. Random draws and the gradient bookkeeping stay eager."""
        if rollout:
            self._act = fuse(self._act)
        if update:
            self._critic_loss = fuse(self._critic_loss)
            self._actor_losses = fuse(self._actor_losses)

    # ------------------------------------------------------------------------ collection

    @torch.no_grad()
    def act(self, obs: Observations) -> torch.Tensor:
        """Actions sampled for raw observations (noise from this SAC's own generator)."""
        noise = torch.randn(obs["actor"].shape[0], self.policy.num_actions, device=obs["actor"].device,
                            generator=self.generator)  # fmt: skip
        return self._act(obs["actor"], noise)

    def _act(self, raw_actor_obs: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return self.policy.sample(self.policy.normalize_actor(raw_actor_obs), noise)[0]

    @torch.no_grad()
    def process_env_step(self, t: Transition) -> None:
        """Every env's transition into the ring, in place. The next state of an ended episode is
        its final observation, so that a time-out is bootstrapped from it."""
        self.ring.add(actor=t.obs["actor"], critic=t.obs["critic"], action=t.actions, reward=t.rewards,
                      terminated=t.terminated, truncated=t.truncated, next_actor=t.final_obs["actor"],
                      next_critic=t.final_obs["critic"])  # fmt: skip

    def compute_returns(self, obs: Observations) -> None:
        """Never called: SAC updates every `update_every` steps, not once per rollout."""

    @torch.no_grad()
    def warm_up(self, obs: Observations, step: Callable[[torch.Tensor], Observations], steps: int) -> int:
        """Start the observation normalisers from one rollout of the untrained policy (see
        `SacConfig.warm_up_normalizers`); returns the env steps it took."""
        normalizers = {"actor": self.policy.actor_normalizer, "critic": self.critic_normalizer}
        normalizers = {group: n for group, n in normalizers.items() if n is not None}
        steps = steps if self.cfg.warm_up_normalizers else 0
        return warm_up_normalizers(normalizers, obs, step, self.act, steps, self.ctx)

    # ---------------------------------------------------------------------------- update

    def update(self) -> dict[str, torch.Tensor]:
        """`updates_per_step` gradient steps on windows drawn from the ring, after the
        normalisers have taken in the newest steps' observations (every rank's)."""
        if not self.support_set:
            self._set_support()
        normalizers = {"actor": self.policy.actor_normalizer, "critic": self.critic_normalizer}
        newest = self.ring.newest(self.update_every * self.num_envs, list(normalizers))
        pairs = [(normalizer, newest[group]) for group, normalizer in normalizers.items() if normalizer is not None]
        if pairs:  # both groups' statistics in one all-reduce
            merge_all_into(pairs, self.ctx)
        sums = torch.zeros(len(SUMS) + 1, dtype=torch.float64, device=self.ctx.device)
        for _ in range(self.cfg.updates_per_step):
            sums += self._gradient_step()
        return dict(zip((*SUMS, "steps"), sums.unbind(), strict=True))

    def _set_support(self) -> None:
        """The critics' atoms from the reward scale: [-v, v], v bounding a return of the rewards
        seen so far (every rank's ring): the largest |reward| of a step that ended its episode,
        earned once, plus the largest of any other step over (1 - gamma); times the margin.
        Counting an end's reward as if earned every step made the quadruped's support +-1012,
        atoms 20 apart, for returns within about [-11, 3] (docs/benchmarks.md, "SAC", session
        30). Once per run, at its first update (which a session always runs eagerly), on the device."""
        reward, ended = self.ring.fields["reward"].abs(), self.ring.fields["terminated"]
        scales = torch.stack([reward.masked_fill(~ended, 0.0).max(), reward.masked_fill(ended, 0.0).max()])
        end, step = self.ctx.all_gather(scales).amax(dim=0).unbind()
        v_max = (end + step.clamp(min=1e-3) / (1.0 - self.cfg.gamma)) * self.cfg.support_margin
        self.atoms.copy_(torch.linspace(-1.0, 1.0, self.cfg.num_atoms, device=self.atoms.device) * v_max)
        self.support_set = True

    def _gradient_step(self) -> torch.Tensor:
        """One step of the critics, then of the actor and the temperature, then the targets;
        this step's figures (SUMS, then 1) where it was taken, zeros where it was skipped."""
        cfg, n = self.cfg, self.cfg.n_step
        rows = self.ring.window_rows(cfg.batch_size, n, self.num_envs, self.generator)
        # Until the ring holds `learning_starts` steps (a whole window at least) on every rank,
        # steps are taken and undone on the device.
        held = self.ring.windows_held(n, self.num_envs)
        lacking = (held < max(cfg.learning_starts - n + 1, 1)).float()
        noise = torch.randn(2, self.batch_rows, self.policy.num_actions, device=self.ctx.device,
                            generator=self.generator)  # fmt: skip

        # The critics: cross-entropy to the projected n-step soft target distribution.
        critic_loss, clipped, obs = self._critic_loss(rows, noise[0])
        grads = torch.autograd.grad(critic_loss, self.critic_params)
        self.critic_gradients.fill(grads, [critic_loss, clipped, lacking])
        scalars, nonfinite = self.critic_gradients.average(self.ctx)
        skip = nonfinite | (scalars[2] > 0)
        self._clip(self.critic_gradients)
        self.critic_optimizer.step(skip)

        # The actor against the critics just updated, and the temperature toward the target entropy.
        actor_loss, alpha_loss, stats = self._actor_losses(obs, noise[1])
        # One backward pass for both: each loss reaches only its own parameters (the actor's
        # loss reads the temperature detached, the temperature's the log-probabilities).
        grads = torch.autograd.grad(actor_loss + alpha_loss, [*self.actor_params, self.log_alpha])
        self.actor_gradients.fill(grads, [actor_loss, stats[1]])
        _, actor_nonfinite = self.actor_gradients.average(self.ctx)
        actor_skip = actor_nonfinite | skip
        self._clip(self.actor_gradients, self.log_alpha.numel())
        self.actor_optimizer.step(actor_skip)

        # The targets follow the critics.
        with torch.no_grad():
            target = [*self.target.parameters()]
            torch._foreach_lerp_(target, self.critic_params, cfg.tau)
        self.consecutive_skips.add_(1.0).mul_((nonfinite | actor_nonfinite).double())
        taken = (~actor_skip).double()
        figures = torch.stack([scalars[0], actor_loss.detach(), self.log_alpha.detach().exp(), stats[1],
                               scalars[1], stats[0], stats[2], stats[3]]).double()  # fmt: skip
        return torch.cat([figures * taken, taken.reshape(1)])

    def _normalize(self, group: str, raw: torch.Tensor) -> torch.Tensor:
        """Raw observations of a group ("actor" or "critic"), normalised as the group is."""
        if group == "actor":
            return self.policy.normalize_actor(raw)
        return self.critic_normalizer(raw) if self.critic_normalizer is not None else raw

    def _windows(self, rows: torch.Tensor) -> dict[str, torch.Tensor]:
        """What a batch of windows (their rows of the ring, (B, n)) gives the losses: n-step
        returns and bootstrap discounts, the first step's raw observations and action, and the
        raw observations after the window's last step. With symmetry augmentation, followed by
        their mirror images (the same returns: the task's rewards do not tell left from right);
        with the mirror loss alone, the first actor observations' images apart."""
        fields = self.ring.fields
        returns, discount, last = n_step_returns(fields["reward"][rows], fields["terminated"][rows],
                                                 fields["truncated"][rows], self.cfg.gamma)  # fmt: skip
        first, end = rows[:, 0], rows.gather(1, last.unsqueeze(1)).squeeze(1)
        batch = {"returns": returns, "discount": discount, "actor": fields["actor"][first],
                 "critic": fields["critic"][first], "action": fields["action"][first],
                 "next_actor": fields["next_actor"][end], "next_critic": fields["next_critic"][end]}  # fmt: skip
        if self.mirrors is None:
            return batch
        actor, critic = self.mirrors["actor"], self.mirrors["critic"]
        mirror = {"actor": actor, "next_actor": actor, "critic": critic, "next_critic": critic,
                  "action": self.mirrors["actions"]}  # fmt: skip
        if not self.cfg.symmetry.augment:
            return batch | {"mirrored_actor": mirror["actor"](batch["actor"])}
        return {name: torch.cat([x, mirror[name](x) if name in mirror else x]) for name, x in batch.items()}

    def _critic_loss(
        self, rows: torch.Tensor, noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """The critics' loss on a batch of windows (their rows of the ring, (B, n)), the share of
        clipped target mass, and the windows' first observations, normalised (the actor's step
        reads them): tensor operations only, which `compile` fuses. Observations are read at a
        window's first and last steps only."""
        batch = self._windows(rows)
        returns, discount = batch["returns"], batch["discount"]
        obs = {group: self._normalize(group, batch[group]) for group in ("actor", "critic")}
        if "mirrored_actor" in batch:
            obs["mirrored_actor"] = self._normalize("actor", batch["mirrored_actor"])
        with torch.no_grad():
            # The soft value after the window: the target critics at the policy's next action,
            # less the temperature times its log-probability; the distribution learned from is the
            # pessimistic critic's (clipped double Q) or the two's mixture (`target_distribution`).
            next_actor = self._normalize("actor", batch["next_actor"])
            next_critic = self._normalize("critic", batch["next_critic"])
            next_actions, next_log_prob = self.policy.sample(next_actor, noise)
            with matmul_precision(self.precision, returns.device):
                probs = torch.softmax(self.target(next_critic, next_actions), dim=-1)
            next_probs = target_distribution(probs, self.atoms, self.cfg.clipped_double_q)
            alpha = self.log_alpha.exp()
            target_atoms = returns.unsqueeze(1) + discount.unsqueeze(1) * (
                self.atoms - alpha * next_log_prob.unsqueeze(1)
            )
            target, clipped = project_onto_support(self.atoms, target_atoms, next_probs)
        with matmul_precision(self.precision, returns.device):
            logits = self.critic(obs["critic"], batch["action"])
        loss = -(target * torch.log_softmax(logits, dim=-1)).sum(dim=-1).mean(dim=-1).sum()
        return loss, clipped.mean(), obs

    def _actor_losses(
        self, obs: dict[str, torch.Tensor], noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The actor's loss (the temperature times the log-probability less the critics' return
        of its actions, `critics_value`, plus the mirror loss), the temperature's, and (mean Q,
        entropy, mean std, mirror loss) on the critic step's normalised observations."""
        actor_obs = obs["actor"]
        actions, log_prob = self.policy.sample(actor_obs, noise)
        with matmul_precision(self.precision, actor_obs.device):
            probs = torch.softmax(self.critic(obs["critic"], actions), dim=-1)
        q = critics_value(probs, self.atoms, self.cfg.clipped_double_q)
        actor_loss = (self.log_alpha.detach().exp() * log_prob - q).mean()
        alpha_loss = -(self.log_alpha * (log_prob.detach() + self.target_entropy)).mean()
        mirror_loss = self._mirror_loss(obs)
        actor_loss = actor_loss + self.cfg.symmetry.mirror_loss_coef * mirror_loss
        with torch.no_grad():
            std = self.policy.actor.mean_and_log_std(actor_obs)[1].exp().mean()
            stats = torch.stack([q.mean(), -log_prob.mean(), std, mirror_loss.detach()])
        return actor_loss, alpha_loss, stats

    def _mirror_loss(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Mean squared distance between the actor's mean on mirrored observations and the mirror
        image of its mean on the originals (held fixed); zero without the mirror loss."""
        if self.mirrors is None or self.cfg.symmetry.mirror_loss_coef == 0:
            return obs["actor"].new_zeros(())
        if self.cfg.symmetry.augment:  # the batch's second half holds the images
            originals, images = obs["actor"].chunk(2)
        else:
            originals, images = obs["actor"], obs["mirrored_actor"]
        with self.policy.matmul_precision():  # the deterministic actions, bound x tanh(mean)
            target = self.mirrors["actions"](self.policy.actor(originals).float()).detach()
            return ((self.policy.actor(images).float() - target) ** 2).mean()

    def _clip(self, gradients: FlatGradients, tail: int = 0) -> None:
        """Scale a network's gradients down to a norm of `max_grad_norm` (0: no clip); the last
        `tail` entries (the temperature's) are left as they are."""
        if self.cfg.max_grad_norm > 0:
            part = gradients.buffer[: gradients.size - tail]
            part.mul_((self.cfg.max_grad_norm / (torch.linalg.vector_norm(part) + 1e-6)).clamp(max=1.0))

    def update_metrics(self, totals: Mapping[str, float]) -> dict[str, float]:
        if totals["consecutive_skips"] >= self.MAX_CONSECUTIVE_SKIPS:
            raise NonFiniteUpdate(
                f"{int(totals['consecutive_skips'])} consecutive SAC steps had a non-finite loss or gradient; "
                "lower --algorithm.learning-rate or check the task's observations and rewards"
            )
        steps = max(totals["steps"], 1.0)
        logged = [name for name in SUMS if name != "symmetry_loss" or self.cfg.symmetry.mirror_loss_coef > 0]
        return {
            **{name: totals[name] / steps for name in logged},
            "gradient_steps": totals["steps"],
            "learning_rate": totals["learning_rate"],
        }

    def log_values(self) -> dict[str, torch.Tensor]:
        return {"learning_rate": self.critic_optimizer.lr, "consecutive_skips": self.consecutive_skips}

    # ---------------------------------------------------------------- state and replicas

    def inference_policy(self) -> SquashedGaussianPolicy:
        return self.policy

    def _learner_modules(self) -> dict[str, nn.Module]:
        modules = {"critic": self.critic, "target": self.target}
        if self.critic_normalizer is not None:
            modules["critic_normalizer"] = self.critic_normalizer
        return modules

    def state_dict(self) -> dict[str, Any]:
        """The checkpoint entries `policy` (what play and export read), `sac` (the critics, their
        targets, the critic normaliser, the temperature, the support) and `optimizer`."""
        sac = {name: module.state_dict() for name, module in self._learner_modules().items()}
        sac |= {"log_alpha": self.log_alpha.detach().clone(), "atoms": self.atoms.clone(),
                "support_set": self.support_set}  # fmt: skip
        optimizer = {"actor": self.actor_optimizer.state_dict(), "critic": self.critic_optimizer.state_dict()}
        return {"policy": self.policy.state_dict(), "sac": sac, "optimizer": optimizer}

    def load_state_dict(self, state: Mapping[str, Any], weights_only: bool = False) -> None:
        if "sac" not in state:
            raise UsageError("this checkpoint is not SAC's: continue it with the --algo it was trained with")
        self.policy.load_state_dict(state["policy"])
        if weights_only:
            return
        for name, module in self._learner_modules().items():
            module.load_state_dict(state["sac"][name])
        with torch.no_grad():
            self.log_alpha.copy_(state["sac"]["log_alpha"])
        self.atoms.copy_(state["sac"]["atoms"])
        self.support_set = bool(state["sac"]["support_set"])
        self.actor_optimizer.load_state_dict(state["optimizer"]["actor"])
        self.critic_optimizer.load_state_dict(state["optimizer"]["critic"])

    def bulk_state(self) -> dict[str, torch.Tensor]:
        """The ring, for `bulk_<iteration>.pt` beside the checkpoint."""
        return self.ring.state_dict()

    def load_bulk_state(self, state: Mapping[str, torch.Tensor]) -> None:
        self.ring.load_state_dict(state)

    def broadcast_from_main(self) -> None:
        """Rank 0's weights, normalisers, targets, temperature, support and optimizer states."""
        learner = [t for module in self._learner_modules().values() for t in module.state_dict().values()]
        self.ctx.broadcast_tensors(
            [*self.policy.state_dict().values(), *learner, self.log_alpha.data, self.atoms,
             *self.actor_optimizer.tensors(), *self.critic_optimizer.tensors()]
        )  # fmt: skip
        # Whether the support is set, as rank 0 has it (a resumed rank 0 has it from its
        # checkpoint, the others not): every rank then sets it at the same update, or none does.
        self.support_set = bool(self.atoms[-1] > 0)

    def parameters(self) -> list[torch.Tensor]:
        return [*self.actor_params, *self.critic_params]

    def parameter_checksum(self) -> torch.Tensor:
        return parameter_checksum([*self.actor_params, *self.critic_params, self.log_alpha])
