"""How a task's observation terms become its observation groups: each group's terms evaluated
(once per state, through `VecEnv.cached`) and concatenated, histories shifted in place, noise
scaled per column. A `VecEnv` holds one, `env.obs_builder`; `env.compute_obs` calls it.

Like the rest of the step, it never reads the host and keeps what it carries from one step to
the next (the histories) in tensors written in place.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from mjrl.envs.spec import ObsGroup, ObsTerm

if TYPE_CHECKING:
    from mjrl.envs.env import VecEnv

Obs = dict[str, torch.Tensor]


class ObservationBuilder:
    """The observation groups of one `VecEnv`'s task."""

    def __init__(self, env: VecEnv):
        self.env = env
        self.groups = env.task.observations
        """Per group, its terms by name, in the order their columns appear."""
        self._noise_std: dict[str, torch.Tensor] | None = None
        """Per noisy group, each column's noise std (made at the first observation)."""
        self._histories: dict[tuple[str, str], torch.Tensor] = {}
        """(num_envs, history, k) of each term with history > 1, by (group, term name)."""

    def compute(self, new_step: bool = False, restarted: torch.Tensor | None = None, noise: Obs | None = None) -> Obs:
        """Every observation group of the current state. Terms with a history shift it by one
        step with `new_step` (once per env step) and start it over, every slot the current
        value, in the `restarted` envs (after a reset); otherwise it is read as it is. With
        observation noise, each noisy group's `noise` (standard normal, its shape) is scaled
        per column and added; drawn here when not given."""
        obs = {
            group: torch.cat([self._term_obs(group, name, t, new_step, restarted) for name, t in terms.items()], dim=-1)
            for group, terms in self.groups.items()
        }
        if self.env.cfg.obs_noise:
            # One draw per noisy group's whole vector, scaled per column by its term's noise std.
            if self._noise_std is None:  # first call, at construction (not in a step)
                self._noise_std = {
                    group: self.per_column(terms, lambda t: t.noise_std)
                    for group, terms in self.groups.items()
                    if self.settings(group).noise
                }
            for group, std in self._noise_std.items():
                draw = noise[group] if noise is not None else self._standard_normal(obs[group].shape)
                obs[group] = obs[group] + std * draw
        return obs

    def draw_noise(self) -> Obs | None:
        """One draw of standard normal noise per noisy group, in the groups' order (None without
        observation noise), made outside the compiled parts: a generator splits a graph."""
        env = self.env
        if not env.cfg.obs_noise:
            return None
        return {
            group: self._standard_normal((env.num_envs, *spec.shape))
            for group, spec in env.obs_spec.items()
            if spec.noise
        }

    def _standard_normal(self, shape: tuple[int, ...]) -> torch.Tensor:
        """Observation noise before its scale, from the env's own generator."""
        return torch.randn(shape, device=self.env.device, generator=self.env.generator)

    def settings(self, group: str) -> ObsGroup:
        """The task's settings of an observation group, noise decided (the actor's alone by default)."""
        settings = self.env.task.obs_groups.get(group, ObsGroup())
        if settings.noise is None:
            settings = dataclasses.replace(settings, noise=group == "actor")
        return settings

    def per_column(self, terms: dict[str, ObsTerm], value: Callable[[ObsTerm], float]) -> torch.Tensor:
        """`value(term)` for every column a group's terms fill (history included)."""
        columns = [torch.full((self.env.cached(t.func).shape[-1] * t.history,), value(t)) for t in terms.values()]
        return torch.cat(columns).to(self.env.device)

    def std_floors(self, terms: dict[str, ObsTerm]) -> torch.Tensor | None:
        """Each column's `ObsTerm.std_floor`; None when no term of the group has one."""
        return self.per_column(terms, lambda t: t.std_floor) if any(t.std_floor for t in terms.values()) else None

    def _term_obs(
        self, group: str, name: str, term: ObsTerm, new_step: bool, restarted: torch.Tensor | None
    ) -> torch.Tensor:
        value = self.env.cached(term.func)
        if term.history == 1:
            return value
        key = (group, name)
        if key not in self._histories:
            self._histories[key] = value.unsqueeze(1).repeat(1, term.history, 1)
        history = self._histories[key]
        if new_step:
            history[:, 1:] = history[:, :-1].clone()
            history[:, 0] = value
        if restarted is not None:
            torch.where(restarted.view(-1, 1, 1), value.unsqueeze(1), history, out=history)
        return history.flatten(1)

    def term_slices(self, group: str) -> dict[str, slice]:
        """Where each term of an observation group lies in the vector `compute` concatenates
        (evaluates the terms once; for export and probes, never in the training loop)."""
        slices, start = {}, 0
        for name, term in self.groups[group].items():
            size = int(term.func(self.env).shape[-1]) * term.history
            slices[name], start = slice(start, start + size), start + size
        return slices
