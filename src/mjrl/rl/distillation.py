"""Teacher-student distillation (DAgger), rsl_rl's second algorithm, as an `Algorithm`.

The student acts (its mean plus a fixed exploration noise) and the teacher, a trained policy
that reads the env's "teacher" observation group, labels every state the student reaches with
the action it would take. The update fits the student's mean to those labels (mean squared
error): learning on its own rollouts, the student sees the states its own mistakes lead to, and
learns how the teacher recovers from them. Rewards are not used.

The student is an `ActorCritic` like PPO's, so play, evaluation and export read it unchanged;
its critic is not trained. The teacher is loaded from its run directory or checkpoint file, and
its weights are kept in the student's checkpoints: a resumed student learns from the teacher it
started with, even if the teacher's run has trained on (the teacher's files must still be
there, for its shapes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from mjrl.checkpoint import load_checkpoint, load_newest_checkpoint
from mjrl.distributed import DistContext
from mjrl.errors import UsageError
from mjrl.obs_spec import flat_spec
from mjrl.rl.algorithm import EnvInfo, Observations, Transition, parameter_checksum
from mjrl.rl.config import DistillationConfig, PolicyConfig
from mjrl.rl.gradients import FlatGradients, broadcast_learner_state
from mjrl.rl.networks import ActorCritic
from mjrl.rl.normalizer import merge_into, warm_up_normalizers
from mjrl.rl.optim import Adam
from mjrl.rl.policies import load_policy
from mjrl.rl.storage import Field, Rollout

TEACHER_GROUP = "teacher"
"""The observation group the teacher reads: the actor observations of the task it was trained on."""


def load_teacher(cfg: DistillationConfig, env: EnvInfo, device: torch.device) -> ActorCritic:
    """The teacher's policy, from the newest checkpoint of a run directory or from a file,
    checked against the env: its actor must read the "teacher" group and output the env's actions."""
    source = Path(cfg.teacher)
    path, state = load_newest_checkpoint(source) if source.is_dir() else (source, load_checkpoint(source))
    dims = {"actor": state["obs_dims"]["actor"], "critic": state["obs_dims"]["critic"]}
    if TEACHER_GROUP not in env.obs_dims:
        raise UsageError(f"--algo distillation needs a task with a {TEACHER_GROUP!r} observation group")
    if (dims["actor"], state["num_actions"]) != (env.obs_dims[TEACHER_GROUP], env.num_actions):
        raise UsageError(
            f"teacher {cfg.teacher} reads {dims['actor']} observations and acts on {state['num_actions']} joints; "
            f"this task's teacher group has {env.obs_dims[TEACHER_GROUP]} and it has {env.num_actions} actions"
        )
    return load_policy(state, path, PolicyConfig(), flat_spec(dims), state["num_actions"], device)


class Distillation:
    """DAgger as an `Algorithm`: the runner calls `act` and `process_env_step` at every env
    step, then `compute_returns` and `update`."""

    update_every = 0  # once per rollout

    def __init__(
        self,
        student: ActorCritic,
        teacher: ActorCritic,
        cfg: DistillationConfig,
        ctx: DistContext,
        num_envs: int,
        num_steps: int,
    ):
        self.policy = student
        self.teacher = teacher
        self.cfg = cfg
        self.ctx = ctx
        self.storage = Rollout(num_steps, num_envs, self.storage_fields(), ctx.device)
        self.optimizer = Adam(self.trained_parameters(), lr=cfg.learning_rate)
        self.params = self.optimizer.params
        self.gradients = FlatGradients(self.params, 1)  # the loss travels with them
        self.generator = torch.Generator(device=ctx.device)

    def trained_parameters(self) -> list[torch.nn.Parameter]:
        """Only the actor's mean learns: the exploration noise stays at the policy's
        init_noise_std, and the critic is not trained."""
        return list(self.policy.actor.parameters())

    def storage_fields(self) -> dict[str, Field]:
        """One rollout: the student's raw observations and the teacher's actions."""
        return {"student_obs": Field((self.policy.obs_dims["actor"],)),
                "teacher_actions": Field((self.policy.num_actions,))}  # fmt: skip

    def compile(self, rollout: bool, update: bool) -> None:
        """Nothing to fuse: `act` and the behaviour-cloning loss are the networks' passes and a
        few kernels more."""

    # ------------------------------------------------------------------------ collection

    @torch.no_grad()
    def act(self, obs: Observations) -> torch.Tensor:
        """The student's actions, noised from this algorithm's generator; the teacher's actions
        for the same states are stored as labels."""
        self.storage.store(student_obs=obs["actor"], teacher_actions=self.teacher.act_deterministic(obs[TEACHER_GROUP]))
        dist = self.policy.distribution(self.policy.normalize_actor(obs["actor"]))
        return dist.sample(self.generator)

    def process_env_step(self, transition: Transition) -> None:
        # A recurrent teacher forgets the episodes that ended (an MLP's reset does nothing).
        self.teacher.reset(transition.terminated | transition.truncated)
        self.storage.next_step()

    def compute_returns(self, obs: Observations) -> None:
        """Nothing to bootstrap: the labels do not depend on what comes after."""

    @torch.no_grad()
    def warm_up(self, obs: Observations, step: Callable[[torch.Tensor], Observations], steps: int) -> int:
        """The student's normaliser from one rollout (see `warm_up_normalizers`)."""
        normalizers = {"actor": self.policy.actor_normalizer} if self.policy.actor_normalizer is not None else {}
        steps = steps if self.cfg.warm_up_normalizers else 0
        taken = warm_up_normalizers(normalizers, obs, step, self.act, steps, self.ctx)
        # Its steps reset nothing where episodes ended: a recurrent teacher starts afresh.
        self.teacher.reset(torch.ones(obs["actor"].shape[0], dtype=torch.bool, device=obs["actor"].device))
        return taken

    # ---------------------------------------------------------------------------- update

    def update(self) -> dict[str, torch.Tensor]:
        """Epochs x minibatches of the behaviour-cloning loss on the rollout; gradients are
        averaged over ranks at every step."""
        cfg, storage = self.cfg, self.storage
        raw = storage.flat("student_obs")
        with torch.no_grad():
            obs = self.policy.normalize_actor(raw)  # with the statistics the actions were drawn with
        labels = storage.flat("teacher_actions")
        if self.policy.actor_normalizer is not None:  # for the next rollout, pooled over ranks
            merge_into(self.policy.actor_normalizer, raw, self.ctx)
        size = obs.shape[0]
        self.gradients.attach()
        loss_sum = torch.zeros((), dtype=torch.float64, device=obs.device)
        updates = torch.zeros((), dtype=torch.float64, device=obs.device)
        for _ in range(cfg.num_learning_epochs):
            perm = torch.randperm(size, device=obs.device, generator=self.generator)
            for batch in perm.split(size // cfg.num_mini_batches):
                # Squared distance of the student's mean from the teacher's action.
                loss = ((self.policy.mean_action(obs[batch]) - labels[batch]) ** 2).mean()
                with self.policy.matmul_precision():
                    # The log-std does not move the mean: its gradient is zero, not absent.
                    grads = torch.autograd.grad(loss, self.params, allow_unused=True, materialize_grads=True)
                # Averaged over ranks with the loss; a non-finite value on any rank skips the step.
                self.gradients.fill(grads, [loss])
                _, skip = self.gradients.average(self.ctx)
                torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm)
                self.optimizer.step(skip)  # decided on the device: the host does not wait
                loss_sum += torch.where(skip, 0.0, loss.detach().double())
                updates += ~skip
        storage.restart()
        return {"behavior_loss": loss_sum, "steps": updates}

    def update_metrics(self, totals: Mapping[str, float]) -> dict[str, float]:
        return {
            "behavior_loss": totals["behavior_loss"] / max(totals["steps"], 1.0),
            "learning_rate": totals["learning_rate"],
            "action_std": totals["action_std"],
        }

    # ------------------------------------------------------------------------------ common

    def log_values(self) -> dict[str, torch.Tensor]:
        return {"learning_rate": self.optimizer.lr, "action_std": self.policy.noise_std().mean()}

    def inference_policy(self) -> ActorCritic:
        return self.policy

    def state_dict(self) -> dict[str, Any]:
        """The checkpoint entries `policy` (the student), `optimizer`, `learning_rate` and `teacher`."""
        return {
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "learning_rate": self.optimizer.lr.item(),
            "teacher": self.teacher.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any], weights_only: bool = False) -> None:
        if "teacher" not in state:
            raise UsageError("this checkpoint is not a distillation's: continue it with its own --algo")
        self.policy.load_state_dict(state["policy"])
        self.teacher.load_state_dict(state["teacher"])  # the teacher it was trained with
        if not weights_only:
            self.optimizer.load_state_dict(state["optimizer"])

    def broadcast_from_main(self) -> None:
        tensors = [*self.policy.state_dict().values(), *self.teacher.state_dict().values()]
        broadcast_learner_state(self.ctx, tensors, self.optimizer)

    def parameters(self) -> list[torch.Tensor]:
        return self.params

    def parameter_checksum(self) -> torch.Tensor:
        return parameter_checksum(self.params)
