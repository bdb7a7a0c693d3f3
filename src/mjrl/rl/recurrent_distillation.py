"""Distillation (DAgger) into a recurrent student (`--algo distillation --policy.rnn-type
lstm|gru`): what changes from `distillation.py`.

The student acts through its memory on its own rollouts: its state is carried per env, stored
at every step and zeroed where an episode ends, as in `recurrent_ppo.py`. The update fits the
student's means to the teacher's labels over windows of the rollout replayed from their stored
states (`recurrent.cut_windows`: sequence length and burn-in from `--policy.*`), minibatches of
whole windows, the loss a mean over the windows' real steps. A recurrent teacher carries its
own state (`act_deterministic`), reset by the base class where episodes end.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from mjrl.distributed import DistContext
from mjrl.rl.algorithm import Observations, Transition
from mjrl.rl.config import DistillationConfig, PolicyConfig
from mjrl.rl.distillation import TEACHER_GROUP, Distillation
from mjrl.rl.normalizer import merge_into
from mjrl.rl.recurrent import RecurrentActorCritic, check_same_memory, cut_windows, reset_state, window_starts
from mjrl.rl.storage import Field


class RecurrentDistillation(Distillation):
    """DAgger for a `RecurrentActorCritic` student: the same `Algorithm`, with its state carried
    and windows in the update."""

    def __init__(
        self, student: RecurrentActorCritic, teacher: torch.nn.Module, cfg: DistillationConfig,
        policy_cfg: PolicyConfig, ctx: DistContext, num_envs: int, num_steps: int,
    ) -> None:  # fmt: skip
        super().__init__(student, teacher, cfg, ctx, num_envs, num_steps)
        self.policy_cfg = policy_cfg
        self.state = student.memories["actor"].initial_state(num_envs, ctx.device)
        """The student's state for the coming step, (S, N, H), updated in place."""
        self.episode_start = torch.ones(num_envs, dtype=torch.bool, device=ctx.device)
        length = min(policy_cfg.rnn_sequence_length, num_steps)
        self.windows = cut_windows(num_steps, num_envs, length, policy_cfg.rnn_burn_in, ctx.device)

    def trained_parameters(self) -> list[torch.nn.Parameter]:
        """The actor's memory, then its MLP."""
        return [*self.policy.memories["actor"].parameters(), *super().trained_parameters()]

    def storage_fields(self) -> dict[str, Field]:
        memory = self.policy.memories["actor"]
        state = Field((memory.state_layers, memory.hidden_size))
        return {**super().storage_fields(), "state": state, "starts": Field(dtype=torch.bool)}

    @torch.no_grad()
    def act(self, obs: Observations) -> torch.Tensor:
        """The student's noised actions through its memory; the teacher's labels, the state the
        step begins from and whether it begins an episode are stored."""
        labels = self.teacher.act_deterministic(obs[TEACHER_GROUP])
        self.storage.store(student_obs=obs["actor"], teacher_actions=labels, state=self.state.transpose(0, 1),
                           starts=self.episode_start)  # fmt: skip
        features, new = self.policy.step_features("actor", self.policy.normalize_actor(obs["actor"]), self.state)
        self.state.copy_(new)
        return self.policy.distribution(features).sample(self.generator)

    def process_env_step(self, transition: Transition) -> None:
        dones = transition.terminated | transition.truncated
        self.state.copy_(reset_state(self.state, dones))
        self.episode_start.copy_(dones)
        super().process_env_step(transition)

    @torch.no_grad()
    def warm_up(self, obs: Observations, step: Callable[[torch.Tensor], Observations], steps: int) -> int:
        """The base warm-up; its steps reset no state at episode ends, so training starts them at zero."""
        taken = super().warm_up(obs, step, steps)
        self.state.zero_()
        self.episode_start.fill_(True)
        return taken

    def update(self) -> dict[str, torch.Tensor]:
        """Epochs x minibatches of whole windows: the student's means, replayed from the stored
        states, against the labels, a mean over the steps whose loss counts; gradients averaged
        over ranks at every step."""
        cfg, storage, policy, w = self.cfg, self.storage, self.policy, self.windows
        raw = storage.student_obs
        with torch.no_grad():
            obs = policy.normalize_actor(raw)  # with the statistics the actions were drawn with
        if policy.actor_normalizer is not None:  # for the next rollout, pooled over ranks
            merge_into(policy.actor_normalizer, raw.flatten(0, 1), self.ctx)
        step, env = w.first
        windows = {  # (W, B, ...), and the stored states (S, B, H)
            "obs": obs[w.step, w.env], "labels": storage.teacher_actions[w.step, w.env],
            "starts": window_starts(w, storage.starts), "valid": w.valid, "weights": w.loss.float(),
        }  # fmt: skip
        states = storage.state[step, env].transpose(0, 1)
        self.gradients.attach()
        loss_sum = torch.zeros((), dtype=torch.float64, device=obs.device)
        updates = torch.zeros((), dtype=torch.float64, device=obs.device)
        count = w.step.shape[1]
        for _ in range(cfg.num_learning_epochs):
            perm = torch.randperm(count, device=obs.device, generator=self.generator)
            for batch in perm.split(count // cfg.num_mini_batches):
                mb = {name: value[:, batch] for name, value in windows.items()}
                loss = self._window_loss(mb, states[:, batch])
                with policy.matmul_precision():
                    grads = torch.autograd.grad(loss, self.params, allow_unused=True, materialize_grads=True)
                self.gradients.fill(grads, [loss])
                _, skip = self.gradients.average(self.ctx)
                torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm)
                self.optimizer.step(skip)
                loss_sum += torch.where(skip, 0.0, loss.detach().double())
                updates += ~skip
        storage.restart()
        return {"behavior_loss": loss_sum, "steps": updates}

    def _window_loss(self, mb: Mapping[str, torch.Tensor], state: torch.Tensor) -> torch.Tensor:
        """Squared distance of the student's means from the labels, over the counted steps."""
        burn_in = self.policy_cfg.rnn_burn_in
        valid = mb["valid"] if self.windows.padded else None
        features = self.policy.window_features("actor", mb["obs"], state, mb["starts"], valid, burn_in)
        error = ((self.policy.mean_action(features) - mb["labels"][burn_in:]) ** 2).mean(-1)
        weights = mb["weights"][burn_in:]
        return (error * weights).sum() / weights.sum()

    def load_state_dict(self, state: Mapping, weights_only: bool = False) -> None:
        """The base's, for a checkpoint of the same memory; the state starts at zero, as the
        env's episodes do on a resume."""
        check_same_memory(state.get("config", {}).get("policy", {}), self.policy_cfg)
        super().load_state_dict(state, weights_only)
        self.state.zero_()
        self.episode_start.fill_(True)
