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

import copy
import dataclasses
import math
from collections.abc import Iterator, Mapping
from typing import Literal

import torch
from torch import nn
from torch.nn import functional as F

from mjrl.rl.config import PolicyConfig
from mjrl.rl.networks import ActorCritic, DeployedActor, mlp

RnnType = Literal["lstm", "gru"]


class Memory(nn.Module):
    """An LSTM or GRU of `num_layers` layers of `hidden_size`, read one step at a time (the
    rollout, play) or over a window of steps with episode starts inside (the update).

    The parameters are an `nn.LSTM`'s or `nn.GRU`'s (`rnn`: what checkpoints hold and export
    runs), but the steps are written out here (torch's cell equations): a window's input
    projection is one matrix product over all its steps, and each step is plain matrix products
    and elementwise functions, which bf16 autocast speeds up and a CUDA graph replays. torch's
    fused RNN cost 1.6-4 times as much in bf16 on the CPU (oneDNN's, whose training workspace a
    replayed capture does not rewrite, had to stay off), and was no faster in fp32."""

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

    def _project(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        """The input's part of layer `layer`'s gates, (..., G x H), for any number of steps at once
        (an LSTM's recurrent bias folded in: it is added at every step alike)."""
        bias = getattr(self.rnn, f"bias_ih_l{layer}")
        if self.rnn_type == "lstm":
            bias = bias + getattr(self.rnn, f"bias_hh_l{layer}")
        return F.linear(x, getattr(self.rnn, f"weight_ih_l{layer}"), bias)

    def _cell(
        self, layer: int, gx: torch.Tensor, h: torch.Tensor, c: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One step of layer `layer` from its input projection `gx` (N, G x H) and its state
        (h, and c for an LSTM; each (N, H), float32) -> the next (h, c): torch's equations,
        the gates' arithmetic in float32 (also for a float64 module: its state stays float32)."""
        gh = F.linear(h, getattr(self.rnn, f"weight_hh_l{layer}"))
        if self.rnn_type == "lstm":
            i, f, g, o = (gx.float() + gh.float()).chunk(4, dim=-1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            return torch.sigmoid(o) * torch.tanh(c), c
        gh = gh.float() + getattr(self.rnn, f"bias_hh_l{layer}")
        xr, xz, xn = gx.float().chunk(3, dim=-1)
        hr, hz, hn = gh.chunk(3, dim=-1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        return n + z * (h - n), None  # (1 - z) n + z h

    def _layers(self, state: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """A state (S, N, H) as (h, c) per layer (c None for a GRU)."""
        layers = self.num_layers
        if self.rnn_type == "gru":
            return [(state[i], None) for i in range(layers)]
        return [(state[i], state[layers + i]) for i in range(layers)]

    def _state(self, layers: list[tuple[torch.Tensor, torch.Tensor | None]]) -> torch.Tensor:
        """The inverse of `_layers`."""
        hs = [h for h, _ in layers]
        return torch.stack(hs if self.rnn_type == "gru" else hs + [c for _, c in layers])

    def step(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step for every env: inputs (N, D), state (S, N, H) -> outputs (N, H), next state."""
        layers = []
        for layer, (h, c) in enumerate(self._layers(state)):
            x, c = self._cell(layer, self._project(layer, x), h, c)
            layers.append((x, c))
        return x, self._state(layers)

    def forward(
        self, x: torch.Tensor, state: torch.Tensor, starts: torch.Tensor, valid: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A window of steps: inputs (L, B, D), the state before its first step (S, B, H), where
        an episode begins (L, B) bool (the state is zeroed before that step, so neither the
        state nor its gradient crosses an episode's end) and, optionally, which positions are
        steps at all (L, B) bool (padding leaves the state as it is) -> outputs (L, B, H; those
        of padding are meaningless), the state after the last step. Layer by layer: each
        layer's steps read the layer below's outputs, all projected at once."""
        keep = ~starts.unsqueeze(-1)  # (L, B, 1)
        kept = None if valid is None else valid.unsqueeze(-1)
        layers = []
        for layer, (h, c) in enumerate(self._layers(state)):
            outputs = []
            # unbind, not indexing: each step's slice would otherwise get a full-size gradient
            for t, gx in enumerate(self._project(layer, x).unbind(0)):
                h, c = torch.where(keep[t], h, 0.0), None if c is None else torch.where(keep[t], c, 0.0)
                new_h, new_c = self._cell(layer, gx, h, c)
                outputs.append(new_h)
                if kept is None:
                    h, c = new_h, new_c
                else:
                    h, c = torch.where(kept[t], new_h, h), None if c is None else torch.where(kept[t], new_c, c)
            x = torch.stack(outputs)
            layers.append((h, c))
        return x, self._state(layers)


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
    padded: bool
    """Whether any position is padding (known from the shapes alone): where none is, the update
    passes no `valid` mask, which saves the memory two selections a step."""

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
    padded = burn_in > 0 or steps % length != 0
    return Windows(step.clamp(0, steps - 1), env.contiguous(), valid, loss, padded)


def window_starts(windows: Windows, episode_start: torch.Tensor) -> torch.Tensor:
    """Where `Memory.forward` zeroes the state in each window, (W, B) bool: the valid positions
    that begin an episode in the rollout (`episode_start`, (T, N) bool: the step is an
    episode's first)."""
    return episode_start[windows.step, windows.env] & windows.valid


MEMORY_SETTINGS = ("rnn_type", "rnn_networks", "rnn_hidden_size", "rnn_num_layers")


def check_same_memory(saved: Mapping[str, object], cfg: PolicyConfig) -> None:
    """A usage error naming the memory settings a checkpoint's policy (its saved `policy`
    config) was trained with, where they differ from this run's."""
    from mjrl.errors import UsageError

    def flags(values: Mapping[str, object]) -> str:
        return " ".join(f"--policy.{name.replace('_', '-')} {values[name]}" for name in differ)

    saved = {name: saved.get(name, getattr(PolicyConfig, name)) for name in MEMORY_SETTINGS}
    given = {name: getattr(cfg, name) for name in MEMORY_SETTINGS}
    differ = [name for name in MEMORY_SETTINGS if saved[name] != given[name]]
    if differ:
        raise UsageError(
            f"the checkpoint's policy was trained with {flags(saved)}, this run asks for {flags(given)}: "
            "give the checkpoint's settings, or start a new run"
        )


class RecurrentActorCritic(ActorCritic):
    """The `recurrent` policy kind: `ActorCritic` whose actor, critic or both read normalised
    observations through a `Memory` of their own, their MLPs reading its output. What PPO and
    distillation train with `--policy.rnn-type lstm|gru`.

    Training keeps the states itself (the algorithm's, per env of its rollout); this module
    keeps one more for `act_deterministic` (play, evaluation, a recurrent teacher), sized to
    the batch it is given and zeroed by `reset` where episodes end."""

    def __init__(self, obs_dims: Mapping[str, int], num_actions: int, cfg: PolicyConfig, **kwargs) -> None:
        super().__init__(obs_dims["actor"], obs_dims["critic"], num_actions, cfg.actor_hidden_dims,
                         cfg.critic_hidden_dims, cfg.activation, cfg.init_noise_std, cfg.normalize_observations,
                         cfg.obs_std_offset, precision=cfg.precision, noise_std_type=cfg.noise_std_type,
                         **kwargs)  # fmt: skip
        hidden = cfg.rnn_hidden_size
        self.memories = nn.ModuleDict()
        """The memory of each network that reads through one ("actor", "critic")."""
        for net in ("actor", "critic") if cfg.rnn_networks == "both" else (cfg.rnn_networks,):
            self.memories[net] = Memory(obs_dims[net], cfg.rnn_type, hidden, cfg.rnn_num_layers)
        # The MLPs read the memory's output (built anew: the parent's read the observations).
        if "actor" in self.memories:
            self.actor = mlp(hidden, cfg.actor_hidden_dims, num_actions, cfg.activation)
        if "critic" in self.memories:
            self.critic = mlp(hidden, cfg.critic_hidden_dims, 1, cfg.activation)
        self._play_state: torch.Tensor | None = None

    def initial_states(self, num_envs: int, device: torch.device) -> dict[str, torch.Tensor]:
        """Zero states, (S, N, H), by network."""
        return {net: memory.initial_state(num_envs, device) for net, memory in self.memories.items()}

    def step_features(
        self, net: str, x: torch.Tensor, state: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """What `net`'s MLP reads for one step of normalised observations (N, D), and the next
        state: the memory's output, or `x` itself for a network without memory."""
        if net not in self.memories:
            return x, state
        with self.matmul_precision():
            out, new = self.memories[net].step(x, state)
        return out.float(), new.float()

    def critic_parameters(self) -> Iterator[nn.Parameter]:
        """The critic's MLP and memory: what the value's gradient reaches."""
        yield from self.critic.parameters()
        if "critic" in self.memories:
            yield from self.memories["critic"].parameters()

    def window_features(
        self, net: str, x: torch.Tensor, state: torch.Tensor | None, starts: torch.Tensor,
        valid: torch.Tensor | None, burn_in: int = 0,
    ) -> torch.Tensor:  # fmt: skip
        """What `net`'s MLP reads over windows of normalised observations (W, B, D) from their
        stored states (S, B, H), zeroed where an episode starts (see `Memory.forward`), at the
        positions after the first `burn_in` (W - burn_in of them). The burn-in only brings the
        state up to date: no gradient flows through it (R2D2's)."""
        if net not in self.memories:
            return x[burn_in:]
        memory = self.memories[net]
        with self.matmul_precision():
            if burn_in:
                with torch.no_grad():
                    state = memory(x[:burn_in], state, starts[:burn_in], valid if valid is None else valid[:burn_in])[1]
            return memory(x[burn_in:], state, starts[burn_in:], valid if valid is None else valid[burn_in:])[0].float()

    def act_deterministic(self, raw_actor_obs: torch.Tensor) -> torch.Tensor:
        """The mean action for raw observations, carrying this module's own state per env."""
        x = self.normalize_actor(raw_actor_obs)
        if "actor" in self.memories:
            n = x.shape[0]
            state = self._play_state
            if state is None or state.shape[1] != n or state.device != x.device:
                state = self.memories["actor"].initial_state(n, x.device)
            # float32 whatever the training precision, as play, evaluation and export run
            x, self._play_state = self.memories["actor"].step(x, state)
        return self.actor(x)

    def reset(self, dones: torch.Tensor) -> None:
        """Forget the carried state of the envs whose episode ended."""
        if self._play_state is not None and self._play_state.shape[1] == dones.shape[0]:
            self._play_state = reset_state(self._play_state, dones)

    def deployable(
        self, action_offset: torch.Tensor | None = None, action_scale: torch.Tensor | float = 1.0,
        action_clip: float = math.inf,
    ) -> nn.Module:  # fmt: skip
        """The deterministic actor for export with its state as inputs and outputs
        (`DeployedRecurrentActor`); without an actor memory, the MLP's (`DeployedActor`)."""
        if "actor" not in self.memories:
            return DeployedActor(self, action_offset, action_scale, action_clip)
        return DeployedRecurrentActor(self, action_offset, action_scale, action_clip)


class DeployedRecurrentActor(nn.Module):
    """A recurrent policy's deterministic actor as one self-contained float32 CPU module:
    `(obs, h_in)` -> `(actions, h_out)` for a GRU, `(obs, h_in, c_in)` -> `(actions, h_out,
    c_out)` for an LSTM, each state (layers, N, hidden). The runtime carries the state from one
    step's outputs to the next step's inputs, and zeroes it for a robot whose episode begins
    (the sidecar says so). The normaliser and the action transform are folded in as in
    `DeployedActor`; a policy whose actor has no memory exports as an MLP."""

    def __init__(
        self, policy: RecurrentActorCritic, action_offset: torch.Tensor | None, action_scale: torch.Tensor | float,
        action_clip: float,
    ) -> None:  # fmt: skip
        super().__init__()
        self.head = DeployedActor(policy, action_offset, action_scale, action_clip)  # normaliser, MLP, transform
        self.memory = copy.deepcopy(policy.memories["actor"]).float().cpu().eval()
        self.requires_grad_(False)

    @property
    def state_names(self) -> tuple[str, ...]:
        """The state's parts, each an input `<name>_in` and an output `<name>_out`."""
        return ("h", "c") if self.memory.rnn_type == "lstm" else ("h",)

    def state_shape(self, num_envs: int = 1) -> tuple[int, int, int]:
        """Each part's shape: (layers, robots, hidden)."""
        return (self.memory.num_layers, num_envs, self.memory.hidden_size)

    def forward(
        self, obs: torch.Tensor, h_in: torch.Tensor, c_in: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, ...]:
        head = self.head
        out, new = self.memory.rnn(head.normalize(obs).unsqueeze(0), h_in if c_in is None else (h_in, c_in))
        actions = head.transform(head.actor(out.squeeze(0)))
        return (actions, *new) if isinstance(new, tuple) else (actions, new)
