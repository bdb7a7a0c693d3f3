"""What learners collect into: named per-step fields, preallocated on the device and written
in place (so that a captured loop writes where its replay is), and generalised advantage
estimation (`compute_gae`, PPO's).

Two shapes of storage, one way of declaring them (`Field`: a per-env shape and a dtype, by name):
- `Rollout`: one iteration's steps, (T, N, ...) per field, written at a step index kept on the
  device. Its consumers read it as flat batches of T x N samples (`flat`: PPO, distillation);
  sequences cut at episode ends (recurrent policies) are the next consumer to add here.
- `ReplayRing`: the newest `capacity` transitions, (capacity, ...) per field, written at a
  cursor kept on the device, sampled uniformly as rows or as windows of consecutive steps of
  one env (n-step returns) (off-policy learners: SAC, `tests/replay_learner.py`).
  Its `state_dict` is an algorithm's bulky state (`Algorithm.bulk_state`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import torch

from mjrl.rl.algorithm import write_at_step


@dataclasses.dataclass(frozen=True)
class Field:
    """One named per-step field of a storage: its shape per env (() for a scalar) and dtype."""

    shape: tuple[int, ...] = ()
    dtype: torch.dtype = torch.float32


class Rollout:
    """One iteration of experience: named (T, N, *shape) tensors, read as attributes
    (`rollout.rewards`). Observations are stored raw; they are normalised with the statistics
    that were in force while they were collected."""

    def __init__(self, steps: int, envs: int, fields: Mapping[str, Field], device: torch.device) -> None:
        taken = sorted(name for name in fields if hasattr(Rollout, name) or name in ("fields", "step"))
        if taken:
            raise ValueError(f"rollout fields {taken} would be hidden by its own attributes: rename them")
        self.fields = {
            name: torch.zeros(steps, envs, *f.shape, dtype=f.dtype, device=device) for name, f in fields.items()
        }
        self.step = torch.zeros(1, dtype=torch.long, device=device)
        """(1,) long: the step the next `store` writes, on the device (see `write_at_step`)."""

    def __getattr__(self, name: str) -> torch.Tensor:
        fields = self.__dict__.get("fields", {})
        if name not in fields:
            raise AttributeError(f"this rollout stores no field {name!r}; it stores {', '.join(fields)}")
        return fields[name]

    def store(self, **values: torch.Tensor) -> None:
        """Write fields of the current step (the step advances with `next_step`)."""
        for name, value in values.items():
            write_at_step(self.fields[name], self.step, value)

    def next_step(self) -> None:
        self.step += 1

    def restart(self) -> None:
        self.step.zero_()

    def flat(self, name: str) -> torch.Tensor:
        """A field as T x N samples, (T * N, *shape): what a flat-batch learner shuffles."""
        return self.fields[name].flatten(0, 1)


class ReplayRing:
    """The newest `capacity` transitions: named (capacity, *shape) tensors, written in place
    at a cursor on the device (`written`, every row ever added), so that adding and sampling
    never read the device on the host and may be captured."""

    def __init__(self, capacity: int, fields: Mapping[str, Field], device: torch.device) -> None:
        self.capacity = capacity
        self.fields = {
            name: torch.zeros(capacity, *f.shape, dtype=f.dtype, device=device) for name, f in fields.items()
        }
        self.written = torch.zeros((), dtype=torch.long, device=device)
        """Rows ever added (the oldest are overwritten once it passes `capacity`)."""

    def add(self, **rows: torch.Tensor) -> None:
        """Append a batch of rows, (n, *shape) per field (every field, the same n)."""
        n = next(iter(rows.values())).shape[0]
        index = (self.written + torch.arange(n, device=self.written.device)) % self.capacity
        for name, value in rows.items():
            self.fields[name].index_copy_(0, index, value.to(self.fields[name].dtype))
        self.written += n

    def filled(self) -> torch.Tensor:
        """Rows that hold a transition, as a 0-d tensor."""
        return torch.clamp(self.written, max=self.capacity)

    def sample(self, batch_size: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """`batch_size` rows drawn uniformly with replacement from the filled ones (row 0's
        zeros while the ring is empty: a learner gates its step on `written`)."""
        draw = torch.rand(batch_size, generator=generator, device=self.written.device)
        index = (draw * self.filled()).long()
        return {name: value[index] for name, value in self.fields.items()}

    def windows_held(self, length: int, envs: int) -> torch.Tensor:
        """Whole windows of `length` steps per env the ring holds (see `sample_windows`), as a 0-d tensor."""
        held = torch.clamp(self.written // envs, max=self.capacity // envs)
        return (held - length + 1).clamp(min=0)

    def sample_windows(
        self, batch_size: int, length: int, envs: int, generator: torch.Generator
    ) -> dict[str, torch.Tensor]:
        """`batch_size` windows of `length` consecutive steps of one env each, (batch_size,
        length, *shape) per field, drawn uniformly with replacement among those the ring holds
        whole: for a ring written a step of every env at a time (`add` of `envs` rows, env e's
        row e) with a capacity a multiple of `envs`, so that env e's step s is row
        (s x envs + e) % capacity. Until one window is held, windows of stale rows (a learner
        gates its step on `windows_held`). n-step returns read their steps from a window."""
        rows = self.window_rows(batch_size, length, envs, generator)
        return {name: value[rows] for name, value in self.fields.items()}

    def window_rows(self, batch_size: int, length: int, envs: int, generator: torch.Generator) -> torch.Tensor:
        """The rows of `sample_windows`' windows, (batch_size, length): for a learner that reads
        some fields at some steps of a window only."""
        device = self.written.device
        steps_held = self.capacity // envs
        written = self.written // envs
        held = torch.clamp(written, max=steps_held)
        count = (held - length + 1).clamp(min=1)
        start = written - held + (torch.rand(batch_size, generator=generator, device=device) * count).long()
        env = (torch.rand(batch_size, generator=generator, device=device) * envs).long()
        steps = start.unsqueeze(1) + torch.arange(length, device=device)
        return (steps % steps_held) * envs + env.unsqueeze(1)

    def newest(self, rows: int, names: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
        """The `rows` rows added last (at most `capacity`), oldest first: of the fields `names`
        (default: every field)."""
        index = (self.written - rows + torch.arange(rows, device=self.written.device)) % self.capacity
        return {name: self.fields[name][index] for name in (names or self.fields)}

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {**{name: value.clone() for name, value in self.fields.items()}, "written": self.written.clone()}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        for name, value in self.fields.items():
            value.copy_(state[name])
        self.written.copy_(state["written"])


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_values: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over (T, N) tensors.

    `dones[t]` marks that the episode ended after step t (terminated or truncated): nothing is
    bootstrapped across it. Truncated episodes already carry gamma * V(final obs) in their
    reward, so their value is not lost. Returns (advantages, returns).
    """
    # The one-step errors of every step at once; only the discounted sum runs backwards, two
    # kernels a step (the same operations, in the same order, as a step-by-step loop).
    not_done = 1.0 - dones
    next_values = torch.cat([values[1:], last_values.unsqueeze(0)])
    deltas = rewards + gamma * next_values * not_done - values
    decay = gamma * lam * not_done
    advantages = torch.empty_like(rewards)
    next_advantage = torch.zeros_like(last_values)
    for t in reversed(range(rewards.shape[0])):
        next_advantage = torch.add(deltas[t], decay[t] * next_advantage, out=advantages[t])
    return advantages, advantages + values
