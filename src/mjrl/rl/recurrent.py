"""Recurrent memory for policies (issue 63): an LSTM or GRU ahead of a policy's MLP heads, its
state carried per env between steps and zeroed where an episode begins, and the cutting of a
rollout into the fixed-length sequences that truncated backpropagation runs over.

A state is one tensor, (S, N, H): the GRU's hidden state per layer (S = layers), or the LSTM's
hidden states then its cell states (S = 2 x layers), so that a rollout stores it per step as
one field and a checkpoint, a broadcast or an export carries it as one tensor.

Sequences have fixed shapes, so that the update can be captured as a CUDA graph: each env's T
steps are cut into chunks of `length` steps (the last padded and masked), each read after
`burn_in` steps that precede it in the rollout (run without loss, to bring the state stored at
their start up to date with the current weights). An episode that ends inside a window does
not pass its state on: the state is zeroed at the first step of the next episode, as during
the rollout, which is the same as cutting the window there and padding both parts.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch
from torch import nn

RnnType = Literal["lstm", "gru"]


class Memory(nn.Module):
    """An LSTM or GRU of `num_layers` layers of `hidden_size`, read one step at a time (the
    rollout, play, export) or over a window of steps with episode starts inside (the update)."""

    def __init__(self, input_dim: int, rnn_type: RnnType, hidden_size: int, num_layers: int = 1) -> None:
        super().__init__()
        if rnn_type not in ("lstm", "gru"):
            raise ValueError(f"rnn_type {rnn_type!r}: lstm or gru")
        self.rnn_type, self.hidden_size, self.num_layers = rnn_type, hidden_size, num_layers
        rnn = nn.LSTM if rnn_type == "lstm" else nn.GRU
        self.rnn = rnn(input_dim, hidden_size, num_layers)

    @property
    def state_layers(self) -> int:
        """S of a state (S, N, H): the layers' hidden states, and for an LSTM their cell states."""
        return self.num_layers * (2 if self.rnn_type == "lstm" else 1)

    def initial_state(self, num_envs: int, device: torch.device | None = None) -> torch.Tensor:
        """The zero state an episode begins with, (S, N, H)."""
        return torch.zeros(self.state_layers, num_envs, self.hidden_size, device=device)

    def _unpack(self, state: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        if self.rnn_type == "gru":
            return state.contiguous()
        h, c = state.chunk(2)
        return h.contiguous(), c.contiguous()

    def _pack(self, state: torch.Tensor | tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return torch.cat(state) if isinstance(state, tuple) else state

    def step(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step for every env: inputs (N, D), state (S, N, H) -> outputs (N, H), next state."""
        out, new = self.rnn(x.unsqueeze(0), self._unpack(state))
        return out.squeeze(0), self._pack(new)

    def forward(
        self, x: torch.Tensor, state: torch.Tensor, starts: torch.Tensor, valid: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A window of steps: inputs (L, B, D), the state before its first step (S, B, H), where
        an episode begins (L, B) bool (the state is zeroed before that step, so neither the
        state nor its gradient crosses an episode's end) and, optionally, which positions are
        steps at all (L, B) bool (padding leaves the state as it is) -> outputs (L, B, H; those
        of padding are meaningless), the state after the last step."""
        outputs = []
        for t in range(x.shape[0]):
            state = reset_state(state, starts[t])
            out, new = self.step(x[t], state)
            state = new if valid is None else torch.where(valid[t].view(1, -1, 1), new, state)
            outputs.append(out)
        return torch.stack(outputs), state


def reset_state(state: torch.Tensor, dones: torch.Tensor) -> torch.Tensor:
    """The state (S, N, H) with the envs whose episode ended (`dones`, (N,) bool) zeroed."""
    return torch.where(dones.view(1, -1, 1), 0.0, state)  # (not a product: a non-finite state is dropped too)


@dataclasses.dataclass(frozen=True)
class Windows:
    """Where the update's windows read a rollout of T steps of N envs: each env's steps cut into
    ceil(T / length) chunks, each window the chunk and the `burn_in` steps before it (fewer at
    the rollout's start). Every tensor is (burn_in + length, B) with B = N x chunks, windows in
    env-major order (env 0's chunks first)."""

    step: torch.Tensor
    """long: the rollout step each position reads (clamped into [0, T - 1] where padded: a window
    whose burn-in would begin before the rollout reads the state stored at its first step)."""
    env: torch.Tensor
    """long: the env each position reads."""
    valid: torch.Tensor
    """bool: a step of the rollout (False: padding before the rollout's start or after its end)."""
    loss: torch.Tensor
    """bool: a valid step of the chunk itself, whose loss counts (False: burn-in and padding)."""

    @property
    def first(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(step, env) of each window's first position, (B,) each: where its stored state is read."""
        return self.step[0], self.env[0]


def cut_windows(steps: int, envs: int, length: int, burn_in: int = 0, device: torch.device | None = None) -> Windows:
    """The windows of a rollout of `steps` x `envs` (see `Windows`): fixed shapes for any data."""
    if length < 1 or burn_in < 0:
        raise ValueError(f"sequence length {length} must be at least 1 and burn-in {burn_in} at least 0")
    chunks = -(-steps // length)
    offsets = torch.arange(-burn_in, length, device=device)  # (W,) positions relative to a chunk's start
    starts = torch.arange(chunks, device=device) * length  # (C,)
    step = (starts.view(1, -1) + offsets.view(-1, 1)).repeat(1, envs)  # (W, C x N): env-major
    env = torch.arange(envs, device=device).repeat_interleave(chunks).view(1, -1).expand_as(step)
    valid = (step >= 0) & (step < steps)
    loss = valid & (offsets >= 0).view(-1, 1)
    return Windows(step.clamp(0, steps - 1), env.contiguous(), valid, loss)


def window_starts(windows: Windows, episode_start: torch.Tensor) -> torch.Tensor:
    """Where `Memory.forward` zeroes the state in each window, (W, B) bool: the valid positions
    that begin an episode in the rollout (`episode_start`, (T, N) bool: the step is an
    episode's first)."""
    return episode_start[windows.step, windows.env] & windows.valid
