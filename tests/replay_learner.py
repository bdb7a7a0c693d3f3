"""An off-policy learner, written for a test and registered from it as `--algo replay-test`: no
edit under the runner, the env or the learners. It keeps a replay buffer of transitions that it
fills while the envs step, and takes gradient steps from it between env steps: a one-step
actor-critic on replayed transitions (the critic by TD(0), the actor by the TD error's sign).
Checkpoints hold its buffer; on several ranks each rank keeps its own buffer and the gradients
are averaged, so the ranks stay in lockstep.

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
from mjrl.rl.algorithm import EnvInfo, Observations, parameter_checksum
from mjrl.rl.networks import ActorCritic
from mjrl.rl.optim import Adam


@dataclasses.dataclass(frozen=True)
class ReplayConfig:
    """The replay learner's settings (`--algorithm.*` when `--algo replay-test`)."""

    learning_rate: float = 3e-4
    """Adam's learning rate."""
    buffer_size: int = 2048
    """Transitions kept per rank (the oldest are overwritten)."""
    batch_size: int = 128
    """Transitions per gradient step."""
    updates_per_step: int = 1
    """Gradient steps after each env step, once the buffer holds a batch."""
    gamma: float = 0.95
    """Discount factor."""

    bounds: ClassVar[dict] = {"learning_rate": "> 0", "buffer_size": ">= 1", "batch_size": ">= 1"}


class ReplayLearner:
    def __init__(self, policy: ActorCritic, cfg: ReplayConfig, env: EnvInfo, ctx: DistContext):
        self.policy, self.cfg, self.ctx = policy, cfg, ctx
        self.params = [p for p in policy.parameters() if p.requires_grad]
        self.optimizer = Adam(self.params, lr=cfg.learning_rate)
        self.generator = torch.Generator(device=ctx.device)
        n, dev = cfg.buffer_size, ctx.device
        dims = {"obs": env.obs_dims["actor"], "critic": env.obs_dims["critic"]}
        self.replay = {
            "obs": torch.zeros(n, dims["obs"], device=dev),
            "critic": torch.zeros(n, dims["critic"], device=dev),
            "action": torch.zeros(n, env.num_actions, device=dev),
            "reward": torch.zeros(n, device=dev),
            "terminated": torch.zeros(n, device=dev),
            "next_critic": torch.zeros(n, dims["critic"], device=dev),
            "written": torch.zeros((), dtype=torch.long, device=dev),  # transitions ever stored
        }
        self._pending: dict[str, torch.Tensor] | None = None  # the last step, waiting for its next state
        self._sums = torch.zeros(2, dtype=torch.float64, device=dev)  # TD loss, gradient steps

    # ------------------------------------------------------------------ collecting and learning

    def act(self, obs: Observations) -> torch.Tensor:
        self._complete(obs)
        with torch.no_grad():
            actions = self.policy.distribution(self.policy.normalize_actor(obs["actor"])).sample(self.generator)
        self._pending = {"obs": obs["actor"].clone(), "critic": obs["critic"].clone(), "action": actions}
        return actions

    def process_env_step(self, rewards, terminated, truncated, extras: dict[str, Any]) -> None:
        done = (terminated | truncated).unsqueeze(1)
        self._pending |= {"reward": rewards, "terminated": terminated.float(), "done": done}
        self._pending["final_critic"] = extras["final_obs"]["critic"]

    def compute_returns(self, obs: Observations) -> None:
        self._complete(obs)

    def _complete(self, obs: Observations) -> None:
        """Store the pending transitions, whose next state is `obs` (or the final observation
        of an episode that ended), then learn from the buffer: updates between env steps."""
        if self._pending is None or "reward" not in self._pending:
            return
        p, self._pending = self._pending, None
        p["next_critic"] = torch.where(p.pop("done"), p.pop("final_critic"), obs["critic"])
        n = p["obs"].shape[0]
        rows = (self.replay["written"] + torch.arange(n, device=self.ctx.device)) % self.cfg.buffer_size
        for key, value in p.items():
            self.replay[key].index_copy_(0, rows, value.float())
        self.replay["written"] += n
        if int(self.replay["written"]) >= self.cfg.batch_size:  # eager only: this learner is a test's
            for _ in range(self.cfg.updates_per_step):
                self._gradient_step()

    @torch.enable_grad()  # the runner collects under no_grad; learning here needs the graph
    def _gradient_step(self) -> None:
        cfg, policy = self.cfg, self.policy
        filled = torch.clamp(self.replay["written"], max=cfg.buffer_size)
        index = (torch.rand(cfg.batch_size, generator=self.generator, device=self.ctx.device) * filled).long()
        batch = {key: value[index] for key, value in self.replay.items() if key != "written"}
        with torch.no_grad():
            target = batch["reward"] + cfg.gamma * (1 - batch["terminated"]) * policy.value(
                policy.normalize_critic(batch["next_critic"])
            )
        value = policy.value(policy.normalize_critic(batch["critic"]))
        td = target - value
        log_prob = policy.distribution(policy.normalize_actor(batch["obs"])).log_prob(batch["action"])
        loss = td.pow(2).mean() - (log_prob * td.detach().sign()).mean()
        grads = torch.autograd.grad(loss, self.params)
        flat = self.ctx.all_reduce_mean(torch.cat([g.reshape(-1) for g in grads]))  # ranks in lockstep
        for param, grad in zip(self.params, flat.split([p.numel() for p in self.params]), strict=True):
            param.grad = grad.view_as(param)
        self.optimizer.step()
        self._sums += torch.stack([td.detach().pow(2).mean().double(), torch.ones((), dtype=torch.float64)])

    def update(self) -> dict[str, torch.Tensor]:
        """The learning happened between env steps: report it, pooled by the runner."""
        sums, self._sums = self._sums, torch.zeros_like(self._sums)
        return {"td_loss_sum": sums[0], "steps": sums[1]}

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
            "replay": {key: value.clone() for key, value in self.replay.items()},
        }

    def load_state_dict(self, state: Mapping[str, Any], weights_only: bool = False) -> None:
        self.policy.load_state_dict(state["policy"])
        if not weights_only:
            self.optimizer.load_state_dict(state["optimizer"])
            for key, value in state["replay"].items():
                self.replay[key].copy_(value)

    def broadcast_from_main(self) -> None:
        self.ctx.broadcast_tensors([*self.policy.state_dict().values(), *self.optimizer.tensors()])

    def parameters(self) -> list[torch.Tensor]:
        return self.params

    def parameter_checksum(self) -> torch.Tensor:
        return parameter_checksum(self.params)


def build(cfg: Any, policy: ActorCritic, env: EnvInfo, num_steps: int, ctx: DistContext) -> ReplayLearner:
    return ReplayLearner(policy, cfg.algorithm, env, ctx)


register_algorithm(AlgorithmSpec("replay-test", ReplayConfig, build, "a test's off-policy learner (tests/)"))
