"""A batched env made of terms (`mjrl.envs.spec`).

`VecEnv` steps the simulation and evaluates a `TaskSpec`'s terms. `step` never synchronises
with the host (no `.item()`, no Python branch on a tensor), so on a GPU the whole step can be
captured in one CUDA graph. Finished envs are reset with masks, and statistics are accumulated
in tensors that the runner reads once per iteration.

Every tensor the env keeps from one step to the next (observations, counters, episode windows,
the terrain's rows) is allocated once and written in place: a CUDA graph captured around a step
reads and writes the memory it saw at capture, so a tensor rebound to a new one would be
invisible to its replays (`tests/test_sim_env.py` checks that none is).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import torch

from mjrl.envs.component import EnvComponent
from mjrl.envs.episodes import EpisodeWindow
from mjrl.envs.intervals import IntervalTimers
from mjrl.envs.observations import Obs, ObservationBuilder
from mjrl.envs.robot import Robot
from mjrl.envs.spec import EnvConfig, TaskSpec
from mjrl.envs.statistics import GAUGE_PARTS, TermTotals
from mjrl.envs.symmetry import env_mirrors
from mjrl.envs.terrain import TerrainState
from mjrl.fused import fuse
from mjrl.obs_spec import ObsGroupSpec
from mjrl.sim import Simulation


class VecEnv:
    """`num_envs` copies of a task stepped together on one device."""

    EPISODE_WINDOW = 100  # finished episodes averaged for the logged return and length

    def __init__(self, cfg: EnvConfig, task: TaskSpec, device: torch.device, seed: int = 0):
        self.cfg = cfg
        self.task = task
        self.num_envs = cfg.num_envs
        self.device = device
        model, grid = task.scene.build()
        self.sim = Simulation(model, cfg.num_envs, str(device), cfg.sim)
        self.step_dt = self.sim.dt
        self.max_episode_length = max(1, math.ceil(cfg.episode_length_s / self.step_dt))
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)
        self.terrain = (
            None if grid is None else TerrainState(task.scene.terrain, grid, cfg.num_envs, device, self.generator)
        )
        """The generated terrain grid and each env's patch on it; None on flat ground."""
        self.components: dict[str, EnvComponent] = {} if self.terrain is None else {"terrain": self.terrain}
        """Everything that keeps state between steps, by name, driven alike (`EnvComponent`):
        "terrain", "state" (the task's shared state) and the task's own components."""

        n = self.num_envs
        self.robot = Robot.resolve(self.sim.mj_model, task.robot, device) if task.robot else None
        self._init_actions()
        self.episode_length = torch.zeros(n, dtype=torch.long, device=device)
        self.episode_return = torch.zeros(n, device=device)
        self.terminated = torch.zeros(n, dtype=torch.bool, device=device)
        """Which envs the termination terms end at this step (time-outs excluded): rewards,
        computed after the terminations, may read it."""
        self._ground = self.robot.terrain_geom if self.robot is not None else None
        self.contacts = self.sim.geom_contacts(self._ground) if task.contacts else torch.zeros(0)
        """(num_envs, ngeom) bool: which geoms touch the ground (anything, without a robot)."""
        self.commands = {name: torch.zeros(n, term.dim, device=device) for name, term in task.commands.items()}
        self.state: Any = task.state(self) if task.state else None
        if self.state is not None:
            self.components["state"] = self.state
        for name, build in task.components.items():
            self.components[name] = build(self)
        self._init_interval_jobs()
        self._row_split = self._termination_rows()
        self._reset_stats()
        self._init_term_buffers()

        self.whole_episode = torch.zeros(n, dtype=torch.bool, device=device)
        """Which envs run an episode that began at a reset, not at a random point of its length:
        only those count in the episode statistics (and in a curriculum's judgement)."""
        everything = torch.ones(n, dtype=torch.bool, device=device)
        for ev in task.events.values():
            if ev.mode == "startup":
                ev.func(self, everything)
        self.obs: Obs = {}
        """The current observations, in tensors kept for the whole run (`_set_obs`)."""
        self._start_episodes()
        self._init_layout()

    def _init_layout(self) -> None:
        """What the learner needs of the observations: their spec (shape, dtype, normalisation
        and its floors, noise) and mirrors. Terms look names up in the model at their first
        call: a wrong one is a UsageError here, before training starts, not at the first step."""
        self._compute_reward()
        settings = {group: self.obs_builder.settings(group) for group in self.task.observations}
        self.obs_spec = {
            group: ObsGroupSpec(
                tuple(self.obs[group].shape[1:]),
                self.obs[group].dtype,
                settings[group].normalize,
                self.obs_builder.std_floors(terms),
                settings[group].noise,
            )
            for group, terms in self.task.observations.items()
        }
        """Per observation group, what a learner builds from (`mjrl.obs_spec`)."""
        self.obs_dims = {group: spec.width for group, spec in self.obs_spec.items()}
        """Per group, its width (`obs_spec`'s, for code that knows flat vectors only)."""
        self.obs_std_floors = {group: spec.std_floor for group, spec in self.obs_spec.items()}
        """Per group, each column's `ObsTerm.std_floor` (None when no term has one)."""
        self.mirrors, self.mirror_problem = env_mirrors(self)
        """How each observation group and the actions ("actions") mirror left-right, None when
        the task does not declare it for every term; and why they do not hold, when a term
        declares one that does not."""

    def _init_term_buffers(self) -> None:
        """What evaluating the terms keeps: the per-step memo, the observations' builder (with
        their histories), the reward weights."""
        self._memo: dict[Callable, torch.Tensor] | None = None
        self.obs_builder = ObservationBuilder(self)
        self._episode_end_events = [ev for ev in self.task.events.values() if ev.mode == "episode_end"]
        weights = [term.weight for term in self.task.rewards.values()]
        self._reward_weights = torch.tensor(weights, device=self.device).unsqueeze(1)

    def _init_actions(self) -> None:
        """The action buffers, and how an action becomes a control (offset and scale)."""
        n, nu, device = self.num_envs, self.sim.mj_model.nu, self.device
        self.num_actions = nu
        self.actions = torch.zeros(n, nu, device=device)
        self.last_actions = torch.zeros(n, nu, device=device)
        offset = self.task.action_offset(self) if self.task.action_offset else torch.zeros(nu)
        self.action_offset = offset.to(device)
        per_joint = self.robot.action_scale if self.robot is not None else None
        default = torch.full((nu,), self.cfg.action_scale, device=device)
        self.action_scale = per_joint if per_joint is not None else default
        """(num_actions,) ctrl = action_offset + action_scale * action: the robot's per-joint
        scales (`RobotConfig.action_scale_from_torque`), else the config's `action_scale`."""

    def _init_interval_jobs(self) -> None:
        """Commands first, then interval events (`IntervalTimers`)."""
        task = self.task
        jobs = [
            (term.resample_interval_s, partial(self._resample_command, name))
            for name, term in task.commands.items()
            if math.isfinite(term.resample_interval_s[1])
        ] + [(ev.interval_s, partial(ev.func, self)) for ev in task.events.values() if ev.mode == "interval"]
        self.intervals = IntervalTimers(jobs, self.num_envs, self.step_dt, self.device, self.generator)

    def _termination_rows(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Rows of the stacked termination terms that fail and that time out, as device index
        tensors (a Python list would be copied to the device at every step); None when no term
        is a time-out, so every row fails."""
        time_outs = torch.tensor([term.time_out for term in self.task.terminations.values()], dtype=torch.bool)
        if not time_outs.any():
            return None
        return (~time_outs).nonzero().view(-1).to(self.device), time_outs.nonzero().view(-1).to(self.device)

    def _start_episodes(self) -> None:
        """Reset every env; with `random_initial_episode_length`, each starts at a random point
        of its first episode so that time-outs spread over iterations."""
        everything = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self._reset_envs(everything)
        self.whole_episode.fill_(not self.cfg.random_initial_episode_length)
        if self.cfg.random_initial_episode_length:
            self.episode_length.random_(0, self.max_episode_length, generator=self.generator)
        # The shared state advances once here without a physics step: it must read the new
        # poses (the feet's, from which the next step's foot speeds are measured), not those
        # the last physics step left behind (another patch, after a resume).
        if not self.task.refresh_kinematics_on_reset:
            self.sim.kinematics()
        self.after_physics()
        self._set_obs(self.compute_obs(restarted=everything))

    def _set_obs(self, obs: Obs) -> None:
        """The current observations, copied into the tensors `obs` holds for the whole run
        (made at the first call, in the constructor)."""
        for group, value in obs.items():
            if group in self.obs:
                self.obs[group].copy_(value)
            else:
                self.obs[group] = value.clone()

    def resume_state(self) -> dict[str, torch.Tensor]:
        """What a checkpoint keeps of the env beyond its random stream: the window of finished
        episodes, so that a resumed run's logged return and length go on from where they were
        (not from the first episodes to end after the resume, which are the falls), and what
        each component keeps (the terrain: the envs' rows, the curriculum reached)."""
        state = self.episodes.resume_state()
        for component in self.components.values():
            state.update(component.resume_state())
        return state

    def load_resume_state(self, saved: dict[str, torch.Tensor]) -> None:
        """Take what `resume_state` kept: the episode window, and each component's state (the
        rows, when the run had the same number of envs); envs start their episodes afresh when a
        component asks for it (on their rows)."""
        self.episodes.load_resume_state(saved)
        restart = [component.load_resume_state(saved) for component in self.components.values()]
        if any(restart):
            self._start_episodes()

    # ----------------------------------------------------------------------------- step

    def step(self, actions: torch.Tensor) -> tuple[Obs, torch.Tensor, torch.Tensor, torch.Tensor, dict]:
        """Apply `actions`, advance physics, reset finished envs.

        Returns (obs, reward, terminated, truncated, extras). For envs that finished, `obs` is
        already the first observation of the next episode and `extras["final_obs"]` holds the
        true last observation of the finished one (for time-out bootstrapping). `obs` are the
        run's fixed tensors (`self.obs`, rewritten in place by the next step, for CUDA graphs):
        a caller that keeps a step's observations past the next one copies them.
        """
        self._apply_actions(actions)
        self.intervals.run_due()
        self.sim.step()
        self.episode_length += 1
        self.after_physics()

        terminated, truncated, reward, final_obs = self._end_step(self.obs_builder.draw_noise())
        done = terminated | truncated
        for ev in self._episode_end_events:
            ev.func(self, done)
        self._reset_envs(done)
        self.whole_episode |= done
        self._observe(done, self.obs_builder.draw_noise())
        return self.obs, reward, terminated, truncated, {"final_obs": final_obs}

    def _apply_actions(self, actions: torch.Tensor) -> None:
        """The actions, clipped, become the controls the physics steps with."""
        self.last_actions.copy_(self.actions)
        torch.clamp(actions, -self.cfg.action_clip, self.cfg.action_clip, out=self.actions)
        torch.mul(self.actions, self.action_scale, out=self.sim.ctrl).add_(self.action_offset)
        if self.task.action_feedforward is not None:
            self.sim.ctrl.add_(self.task.action_feedforward(self))

    def _end_step(self, noise: Obs | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Obs]:
        """What the new state means: terminations, the reward and the last observation (with
        `noise` drawn for it), each episode's return and, for the envs that finished, their
        record. Tensor operations only, no random draw and no host read: `compile` fuses them.
        Returns (terminated, truncated, reward, final_obs)."""
        with self._one_state():
            terminated, truncated = self._compute_dones()
            self.terminated.copy_(terminated)
            reward, term_values = self._compute_reward()
            final_obs = self.compute_obs(new_step=True, noise=noise)

        # Envs whose state, observation or reward is not finite end here (a termination, with
        # no reward and nothing bootstrapped) and are reset; the others carry on.
        finite = self._finite_rows(self.sim.qpos, self.sim.qvel, *final_obs.values(), reward.unsqueeze(1))
        nonfinite = ~finite
        self.term_totals.add_step(term_values, nonfinite)
        reward = reward.masked_fill(nonfinite, 0.0)
        terminated = terminated | nonfinite
        truncated = truncated & finite
        final_obs = {group: obs.nan_to_num(0.0, 0.0, 0.0) for group, obs in final_obs.items()}

        self.episode_return += reward
        self.episodes.record((terminated | truncated) & self.whole_episode, self.episode_return, self.episode_length)
        return terminated, truncated, reward, final_obs

    def _observe(self, restarted: torch.Tensor, noise: Obs | None) -> None:
        """The observations after the resets: `obs` (`_end_step`'s twin for `compile`)."""
        with self._one_state():
            self._set_obs(self.compute_obs(restarted=restarted, noise=noise))

    def compile(self) -> None:
        """Fuse the step's pure tensor work (`_apply_actions`, `after_physics`, `_end_step`,
        `_observe`: a few hundred small kernels) into a few kernels with `torch.compile`, on
        first use; random draws (resets, redrawn commands, noise) and the physics stay as they
        are. The eager methods stay the reference it is tested against (`tests/test_compile.py`)."""
        for name in ("_apply_actions", "after_physics", "_end_step", "_observe"):
            setattr(self, name, fuse(getattr(self, name)))

    @contextlib.contextmanager
    def _one_state(self) -> Iterator[None]:
        """Within this block the state does not change: `cached` computes each quantity once."""
        self._memo = {}
        try:
            yield
        finally:
            self._memo = None

    def cached(self, func: Callable[[VecEnv], torch.Tensor]) -> torch.Tensor:
        """`func(self)`, computed once per state during a step: observation terms shared by the
        actor and the critic, and quantities that several terms derive (the trunk's velocity in
        its own frame, the gravity direction) cost their tensor operations once, not at each
        use. Outside a step, simply `func(self)`."""
        if self._memo is None:
            return func(self)
        value = self._memo.get(func)
        if value is None:
            value = self._memo[func] = func(self)
        return value

    @staticmethod
    def _finite_rows(*tensors: torch.Tensor) -> torch.Tensor:
        return torch.isfinite(torch.cat(tensors, dim=1)).all(dim=1)

    def compute_obs(
        self, new_step: bool = False, restarted: torch.Tensor | None = None, noise: Obs | None = None
    ) -> Obs:
        """Every observation group of the current state (`ObservationBuilder.compute`)."""
        return self.obs_builder.compute(new_step, restarted, noise)

    def obs_term_slices(self, group: str) -> dict[str, slice]:
        """Where each term of an observation group lies in its vector (for export and probes)."""
        return self.obs_builder.term_slices(group)

    def _compute_reward(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(reward, weighted term values of shape (terms, num_envs))."""
        if not self.task.rewards:
            return torch.zeros(self.num_envs, device=self.device), torch.zeros(0, self.num_envs, device=self.device)
        raw = torch.stack([self.cached(term.func) for term in self.task.rewards.values()])
        weighted = raw * self._reward_weights
        total = weighted.sum(dim=0)
        return (total if self.cfg.reward_floor is None else total.clamp(min=self.cfg.reward_floor)), weighted

    def _compute_dones(self) -> tuple[torch.Tensor, torch.Tensor]:
        time_out = self.episode_length >= self.max_episode_length
        if not self.task.terminations:
            return torch.zeros_like(time_out), time_out
        fired = torch.stack([term.func(self) for term in self.task.terminations.values()])
        self.term_totals.add_terminations(fired)
        if self._row_split is None:
            terminated, truncated = fired.any(dim=0), time_out
        else:
            failure_rows, time_out_rows = self._row_split
            terminated = fired.index_select(0, failure_rows).any(dim=0)
            truncated = time_out | fired.index_select(0, time_out_rows).any(dim=0)
        # A terminated env is not also truncated: its final value must not be bootstrapped.
        return terminated, truncated & ~terminated

    def after_physics(self) -> None:
        """One contact pass, then the task's shared state advances: `step` calls it once per
        physics step. Call it after changing the physics state by hand (`sim.forward()` in a
        test), so that contacts and the shared state describe the new state."""
        if self.task.contacts:
            self.contacts.copy_(self.sim.geom_contacts(self._ground))
        for component in self.components.values():
            component.update(self)
        self._follow_commands()

    def _follow_commands(self) -> None:
        for term in self.task.commands.values():
            if term.follow is not None:
                term.follow(self)

    def _resample_command(self, name: str, mask: torch.Tensor) -> None:
        command = self.commands[name]
        torch.where(mask.unsqueeze(1), self.task.commands[name].sample(self), command, out=command)

    # ---------------------------------------------------------------------------- resets

    def reset(self) -> Obs:
        """Reset every env and return the first observation."""
        everything = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self._reset_envs(everything)
        self._set_obs(self.compute_obs(restarted=everything))
        return self.obs

    def _reset_envs(self, mask: torch.Tensor) -> None:
        self.sim.reset(mask)
        for ev in self.task.events.values():
            if ev.mode == "reset":
                ev.func(self, mask)
        for name in self.commands:
            self._resample_command(name, mask)
        self.intervals.redraw(mask)
        self._follow_commands()
        for component in self.components.values():
            component.reset(self, mask)
        if self.task.refresh_kinematics_on_reset:
            self.sim.kinematics()
        self.episode_length.masked_fill_(mask, 0)
        self.episode_return.masked_fill_(mask, 0.0)
        self.actions.masked_fill_(mask.unsqueeze(1), 0.0)
        self.last_actions.masked_fill_(mask.unsqueeze(1), 0.0)

    # ------------------------------------------------------------------------ statistics

    def _reset_stats(self) -> None:
        task = self.task
        self.term_totals = TermTotals(task.rewards, task.terminations, self.num_envs, self.device)
        """Each reward term's sum and each termination's count since the runner last read them."""
        self.episodes = EpisodeWindow(self.EPISODE_WINDOW, self.device)
        """The last finished whole episodes, which the logged return and length average."""

    def pop_statistics(self) -> dict[str, torch.Tensor]:
        """The env's statistics by name, float64 scalars on the device that ranks pool by summing:
        the finished episodes' window (`EpisodeWindow.stats`), each reward term's sum and each
        termination's count with the non-finite resets and the env steps whose rewards count
        since the last call (`pop_term_stats`), and each gauge's sum and count (`gauges`)."""
        gauges = {
            f"{name}{part}": value
            for name, pair in self.gauges().items()
            for part, value in zip(GAUGE_PARTS, pair, strict=True)
        }
        return {**self.episodes.stats(), **self.pop_term_stats(), **gauges}

    def pop_term_stats(self) -> dict[str, torch.Tensor]:
        """The term totals since the last call (`TermTotals.pop`), which start again from zero."""
        return self.term_totals.pop()

    def gauges(self) -> dict[str, torch.Tensor]:
        """Figures the components report as means, `name -> [sum, count]` (float64) since the
        last call, so that ranks pool them by summing: the terrain curriculum's rows, for instance."""
        return {name: value for component in self.components.values() for name, value in component.gauges().items()}

    def term_names(self) -> list[str]:
        return self.term_totals.names
