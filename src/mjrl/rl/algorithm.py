"""The contract between the training loop and a learning algorithm.

The runner drives any algorithm through `Algorithm` alone. One iteration is a rollout of
`num_steps` env steps, cut into segments after which the algorithm learns:

    every = algorithm.update_every or num_steps       # 0: once per rollout (PPO, distillation)
    for each of the rollout's num_steps / every segments:
        for each of the segment's `every` steps:
            actions = algorithm.act(obs)
            next_obs, rewards, terminated, truncated, extras = env.step(actions)
            algorithm.process_env_step(Transition(obs, actions, rewards, ..., next_obs, final_obs))
            obs = next_obs
        if algorithm.update_every == 0:
            algorithm.compute_returns(obs)             # the rollout is complete: bootstrap
        sums += algorithm.update()                     # timed as learning

An algorithm owns everything it learns with: its networks, optimizer and storage, how it
bootstraps time-outs, and its random generator (action noise, minibatch order), which the
runner seeds per rank and checkpoints. It owns the collectives of its update too (it is given
the `DistContext`); the runner pools only the sums its updates return, with its other
metrics, in the iteration's one gather. State too bulky for every checkpoint (a replay buffer)
goes through `bulk_state`, into a file of its own beside the checkpoint. PPO (`mjrl.rl.ppo`)
is the first implementation; algorithms are chosen by name from a registry (`mjrl.rl.registry`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import torch

from mjrl.errors import UsageError
from mjrl.mirror import ColumnMirror
from mjrl.obs_spec import ObsGroupSpec
from mjrl.rl.networks import ActorCritic

Observations = Mapping[str, torch.Tensor]
"""Observation groups by name, (num_envs, dim) each: `actor`, `critic` and any a task adds."""


class EnvInfo(Protocol):
    """What an algorithm is built from, of the env it learns on (`VecEnv` has all of it)."""

    num_envs: int
    num_actions: int
    obs_spec: Mapping[str, ObsGroupSpec]
    """Per observation group: shape, dtype, whether to normalise it and its std floors, noise."""
    obs_dims: Mapping[str, int]
    """Width of each observation group (`obs_spec`'s, for learners that know flat vectors only)."""
    obs_std_floors: Mapping[str, torch.Tensor | None]
    """Per group, the smallest std each column may be normalised by (`obs_spec`'s; None: no floor)."""
    mirrors: Mapping[str, ColumnMirror] | None
    """How "actor", "critic" and "actions" mirror left-right; None if the task does not say."""
    mirror_problem: str | None
    """Why `mirrors` is None although every term declares a mirror (one that does not hold)."""


@dataclasses.dataclass(frozen=True)
class Transition:
    """One env step as an algorithm sees it: what it acted on, what it did, what came of it.
    Tensors are (num_envs, ...); `terminated` and `truncated` are kept apart, so that a time-out
    can be bootstrapped from `final_obs` and a termination not."""

    obs: Observations
    """The observations the actions were chosen for (raw, as the env returned them; a copy: the
    env rewrites its observation tensors in place at every step)."""
    actions: torch.Tensor
    """The policy's actions (what a hook may have changed on their way to the env is not here)."""
    rewards: torch.Tensor
    terminated: torch.Tensor
    """The episode ended in a terminal state (a fall): nothing follows it."""
    truncated: torch.Tensor
    """The episode was cut by its time limit: it would have gone on."""
    next_obs: Observations
    """The observations after the step; for an env whose episode ended, the first of its next."""
    final_obs: Observations
    """The observations after the step, before any reset: an ended episode's last (its
    bootstrap); elsewhere of the same state as `next_obs` (with noise and history drawn for
    them apart, so not bit-equal with observation noise on)."""
    extras: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """The env's extras, as `VecEnv.step` returned them."""

    @classmethod
    def of_step(cls, obs: Observations, actions: torch.Tensor, outcome: tuple) -> Transition:
        """The transition of `outcome = env.step(actions)` taken from `obs`."""
        next_obs, rewards, terminated, truncated, extras = outcome
        return cls(obs, actions, rewards, terminated, truncated, next_obs, extras["final_obs"], extras)


class NonFiniteUpdate(RuntimeError):
    """Too many consecutive updates had a non-finite loss or gradient on some rank."""


class Algorithm(Protocol):
    generator: torch.Generator
    """The algorithm's own random stream. The runner seeds it per rank and checkpoints it (under
    `rng.algorithm`)."""

    update_every: int
    """When the loop calls `update`: 0, once per rollout after `compute_returns` (on-policy
    learners); N > 0, after every N env steps (off-policy learners; N divides the rollout
    length, `--runner.num-steps-per-env`). An algorithm without it learns once per rollout."""

    def compile(self, rollout: bool, update: bool) -> None:
        """Fuse its pure tensor work with `torch.compile` (`--runner.compile`): with `rollout`,
        what `act` and `process_env_step` compute, with `update`, the update's; what is not
        worth fusing stays as it is."""
        ...

    def act(self, obs: Observations) -> torch.Tensor:
        """Actions for the envs' current observations (raw, as the env returns them); the
        algorithm keeps what it needs of this step until `process_env_step`."""
        ...

    def process_env_step(self, transition: Transition) -> None:
        """The outcome of the last `act`, with its next observations."""
        ...

    def compute_returns(self, obs: Observations) -> None:
        """The rollout is complete; `obs` are the observations after its last step. Called only
        for an algorithm that learns once per rollout (`update_every` 0)."""
        ...

    def update(self) -> dict[str, torch.Tensor]:
        """Learn from what was collected since the last update. Returns this rank's statistics
        as sums by name; the runner adds those of an iteration's updates and pools them over
        ranks, and `update_metrics` turns the pooled sums into logged figures. No host read:
        the loop may capture it in a CUDA graph."""
        ...

    def update_metrics(self, totals: Mapping[str, float]) -> dict[str, float]:
        """The logged figures of an update from its sums pooled over every rank and the
        `log_values` of the iteration (in `totals` too). May raise when training cannot go on
        (PPO: too many non-finite steps in a row): every rank does, at the same iteration."""
        ...

    def log_values(self) -> dict[str, torch.Tensor]:
        """Figures of the current state, the same on every rank (learning rate, action std), as
        tensors: gathered with the iteration's metrics, so that reading them costs no host read
        of its own, and handed to `update_metrics` in its totals."""
        ...

    def warm_up(self, obs: Observations, step: Callable[[torch.Tensor], Observations], steps: int) -> int:
        """Once, before the first iteration of a fresh run, with up to `steps` env steps (one
        rollout's): `step(actions)` steps the envs and returns their observations. Returns the
        steps taken. PPO starts its observation normalisers here."""
        ...

    def inference_policy(self) -> ActorCritic:
        """The policy that `play`, the periodic evaluation and export run (deterministically)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of the algorithm, as top-level checkpoint entries."""
        ...

    def load_state_dict(self, state: Mapping[str, Any], weights_only: bool = False) -> None:
        """Restore from a checkpoint: the weights alone, or everything `state_dict` wrote.
        Raises RuntimeError when the weights do not fit the configured networks."""
        ...

    # Optional: state too bulky for every checkpoint (a replay buffer). The runner writes it
    # beside a checkpoint (`bulk_<iteration>.pt`, rank 0's, only the newest kept, unless
    # `--runner.save-bulk-state False`) and hands it back on a resume when the file is there.
    #
    # def bulk_state(self) -> dict[str, torch.Tensor]: ...
    # def load_bulk_state(self, state: Mapping[str, torch.Tensor]) -> None: ...

    def broadcast_from_main(self) -> None:
        """Make every rank's learning state (weights, normalisers, optimizer) rank 0's."""
        ...

    def parameter_checksum(self) -> torch.Tensor:
        """A small tensor, equal on two ranks only if their parameters are bit-identical."""
        ...

    def parameters(self) -> list[torch.Tensor]:
        """The trained parameters (for fault injection in tests)."""
        ...


def rollout_step(
    env: Any, algorithm: Algorithm, obs: Observations, change: Callable[[torch.Tensor], torch.Tensor] | None = None
) -> Observations:
    """One env step of the loop: `algorithm` acts on `obs`, `env` steps (with the actions as
    `change` makes them: the runner's hooks), the algorithm gets the transition. Returns the
    next observations. The runner's rollout and code that drives an algorithm by hand (unit
    tests, `mjrl kernels`) both step with it."""
    actions = algorithm.act(obs)
    acted_on = {group: value.clone() for group, value in obs.items()}  # the env rewrites obs in place
    outcome = env.step(change(actions) if change is not None else actions)
    transition = Transition.of_step(acted_on, actions, outcome)
    algorithm.process_env_step(transition)
    return transition.next_obs


def compile_loop(setting: str, env: Any, algorithm: Algorithm) -> None:
    """`--runner.compile`: step fuses the rollout step (the env's and the policy's), update the
    update, all both."""
    rollout, update = setting in ("step", "all"), setting in ("update", "all")
    if (rollout or update) and not hasattr(algorithm, "compile"):  # a plugin's, written before it
        raise UsageError(f"--runner.compile {setting}: {type(algorithm).__name__} has no compile(); use off")
    if rollout:
        env.compile()
    if rollout or update:
        algorithm.compile(rollout, update)


def update_every(algorithm: Algorithm) -> int:
    """`algorithm.update_every`; 0 (once per rollout) for an algorithm written before it."""
    return getattr(algorithm, "update_every", 0)


def parameter_checksum(params: list[torch.Tensor]) -> torch.Tensor:
    """Two int64 sums over the raw bits of every parameter: equal on two ranks only if their
    parameters are (almost surely) bit-identical."""
    bits = torch.cat([p.detach().reshape(-1).float() for p in params]).view(torch.int32).long()
    weights = torch.arange(1, bits.numel() + 1, device=bits.device) % 65521
    return torch.stack([bits.sum(), (bits * weights).sum()])


def write_at_step(buffer: torch.Tensor, step: torch.Tensor, value: torch.Tensor) -> None:
    """`buffer[step] = value`, with `step` a (1,) long tensor on the buffer's device: a rollout
    storage's step index lives there, so that a captured env step writes the row the replay is
    at, not the one of its capture (indexing with it, `buffer[step]`, would copy the row)."""
    buffer.index_copy_(0, step, value.unsqueeze(0))
