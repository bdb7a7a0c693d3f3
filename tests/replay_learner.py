"""An off-policy learner, written for a test and registered from it as `--algo replay-test`: no
edit under the runner, the env or the learners. It keeps a replay ring of transitions, fed by
`process_env_step`, and learns from it in the updates the loop schedules after every
`update_every` env steps (`Algorithm.update_every`): a one-step actor-critic on replayed
transitions (the critic by TD(0), bootstrapping time-outs but not terminations; the actor by
the TD error's sign). Its ring is bulky state (`bulk_state`): saved beside a checkpoint, not in
it. On several ranks each rank keeps its own ring and the gradients are averaged, so the ranks
stay in lockstep. Nothing in it reads the device on the host, so the loop may capture it.

Imported by name (`replay_learner`): a worker process the launcher spawns imports it when it
unpickles the run's config, whose `algorithm` section is a `ReplayConfig`, and so registers it
too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import torch

from mjrl.distributed import DistContext
from mjrl.rl import AlgorithmSpec, register_algorithm
from mjrl.rl.algorithm import EnvInfo, Observations, Transition, parameter_checksum
from mjrl.rl.networks import ActorCritic
from mjrl.rl.optim import Adam
from mjrl.rl.storage import Field, ReplayRing


@dataclasses.dataclass(frozen=True)
class ReplayConfig:
    """The replay learner's settings (`--algorithm.*` when `--algo replay-test`)."""

    learning_rate: float = 3e-4
    """Adam's learning rate."""
    buffer_size: int = 2048
    """Transitions kept per rank (the oldest are overwritten)."""
    batch_size: int = 128
    """Transitions per gradient step."""
    update_every: int = 1
    """Env steps between updates."""
    updates_per_step: int = 1
    """Gradient steps per update, once the ring holds a batch."""
    gamma: float = 0.95
    """Discount factor."""

    bounds: ClassVar[dict] = {"learning_rate": "> 0", "buffer_size": ">= 1", "batch_size": ">= 1",
                              "update_every": ">= 1"}  # fmt: skip


class ReplayLearner:
    def __init__(self, policy: ActorCritic, cfg: ReplayConfig, env: EnvInfo, ctx: DistContext):
        self.policy, self.cfg, self.ctx = policy, cfg, ctx
        self.update_every = cfg.update_every
        self.params = [p for p in policy.parameters() if p.requires_grad]
        self.optimizer = Adam(self.params, lr=cfg.learning_rate)
        self.generator = torch.Generator(device=ctx.device)
        actor, critic = Field((env.obs_dims["actor"],)), Field((env.obs_dims["critic"],))
        fields = {"obs": actor, "critic": critic, "action": Field((env.num_actions,)), "reward": Field(),
                  "terminated": Field(), "next_critic": critic}  # fmt: skip
        self.replay = ReplayRing(cfg.buffer_size, fields, ctx.device)

    # ------------------------------------------------------------------ collecting and learning

    @torch.no_grad()
    def act(self, obs: Observations) -> torch.Tensor:
        return self.policy.distribution(self.policy.normalize_actor(obs["actor"])).sample(self.generator)

    @torch.no_grad()
    def process_env_step(self, t: Transition) -> None:
        """Write the transitions into the ring in place. The next state of a time-out is its final
        observation (`final_obs`), so that it is bootstrapped; a termination's is masked later."""
        self.replay.add(obs=t.obs["actor"], critic=t.obs["critic"], action=t.actions, reward=t.rewards,
                        terminated=t.terminated, next_critic=t.final_obs["critic"])  # fmt: skip

    def compute_returns(self, obs: Observations) -> None:
        """Never called: this learner updates every `update_every` steps, not once per rollout."""

    def update(self) -> dict[str, torch.Tensor]:
        """`updates_per_step` gradient steps on batches drawn from the ring; a step before the
        ring holds a batch is taken and undone on the device (no host read decides it)."""
        sums = torch.zeros(2, dtype=torch.float64, device=self.ctx.device)  # TD loss, gradient steps
        for _ in range(self.cfg.updates_per_step):
            sums += self._gradient_step()
        return {"td_loss_sum": sums[0], "steps": sums[1]}

    def _gradient_step(self) -> torch.Tensor:
        cfg, policy = self.cfg, self.policy
        batch = self.replay.sample(cfg.batch_size, self.generator)
        with torch.no_grad():
            target = batch["reward"] + cfg.gamma * (1 - batch["terminated"]) * policy.value(
                policy.normalize_critic(batch["next_critic"])
            )
        value = policy.value(policy.normalize_critic(batch["critic"]))
        td = target - value
        log_prob = policy.distribution(policy.normalize_actor(batch["obs"])).log_prob(batch["action"])
        loss = td.pow(2).mean() - (log_prob * td.detach().sign()).mean()
        grads = torch.autograd.grad(loss, self.params)
        # The gradients averaged over ranks, with whether any rank's ring still lacks a batch (a
        # rank resumed without its ring starts it empty): every rank steps, or skips, alike.
        lacking = (self.replay.written < cfg.batch_size).float().reshape(1)
        flat = self.ctx.all_reduce_mean(torch.cat([*(g.reshape(-1) for g in grads), lacking]))
        for param, grad in zip(self.params, flat[:-1].split([p.numel() for p in self.params]), strict=True):
            param.grad = grad.view_as(param)
        skip = flat[-1] > 0
        self.optimizer.step(skip)
        taken = (~skip).double()
        return torch.stack([td.detach().pow(2).mean().double() * taken, taken])

    def update_metrics(self, totals: Mapping[str, float]) -> dict[str, float]:
        td_loss = totals["td_loss_sum"] / max(totals["steps"], 1.0)
        return {"td_loss": td_loss, "gradient_steps": totals["steps"], "learning_rate": totals["learning_rate"]}

    def log_values(self) -> dict[str, torch.Tensor]:
        return {"learning_rate": self.optimizer.lr.clone(), "action_std": self.policy.noise_std().mean().double()}

    def warm_up(self, obs: Observations, step: Callable, steps: int) -> int:
        return 0  # no normaliser warm-up: the policy's normalisers stay as built

    # --------------------------------------------------------------------- state and replicas

    def inference_policy(self) -> ActorCritic:
        return self.policy

    def state_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "learning_rate": self.optimizer.lr.item(),
        }

    def load_state_dict(self, state: Mapping[str, Any], weights_only: bool = False) -> None:
        self.policy.load_state_dict(state["policy"])
        if not weights_only:
            self.optimizer.load_state_dict(state["optimizer"])

    def bulk_state(self) -> dict[str, torch.Tensor]:
        """The ring, for `bulk_<iteration>.pt` beside the checkpoint."""
        return self.replay.state_dict()

    def load_bulk_state(self, state: Mapping[str, torch.Tensor]) -> None:
        self.replay.load_state_dict(state)

    def broadcast_from_main(self) -> None:
        self.ctx.broadcast_tensors([*self.policy.state_dict().values(), *self.optimizer.tensors()])

    def parameters(self) -> list[torch.Tensor]:
        return self.params

    def parameter_checksum(self) -> torch.Tensor:
        return parameter_checksum(self.params)


def build(cfg: Any, policy: ActorCritic, env: EnvInfo, num_steps: int, ctx: DistContext) -> ReplayLearner:
    return ReplayLearner(policy, cfg.algorithm, env, ctx)


register_algorithm(AlgorithmSpec("replay-test", ReplayConfig, build, "a test's off-policy learner (tests/)"))
