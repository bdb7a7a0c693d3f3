"""Evaluation of the deterministic policy: whole episodes, their returns and the task's figures.

`play` and the periodic evaluation during training (`--runner.eval-interval`) both use it. It
reads one scalar back to the host every step (whether every env has run its episodes), which
is fine for evaluation and never happens in the training loop.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Protocol

import torch

from mjrl.envs import VecEnv

MetricsFn = Callable[[VecEnv], dict[str, torch.Tensor]]


class DeterministicPolicy(Protocol):
    """What evaluation runs: a trained policy (`mjrl.rl.TrainedPolicy`) or a baseline."""

    def act_deterministic(self, actor_obs: torch.Tensor) -> torch.Tensor: ...

    def reset(self, dones: torch.Tensor) -> None: ...


class ZeroActions:
    """The baseline policy: every action 0, so the env holds its action offset (for a legged
    robot, the home pose). A trained policy's figures mean little without these beside them."""

    def __init__(self, num_actions: int):
        self.num_actions = num_actions

    def act_deterministic(self, actor_obs: torch.Tensor) -> torch.Tensor:
        return actor_obs.new_zeros(actor_obs.shape[0], self.num_actions)

    def reset(self, dones: torch.Tensor) -> None:
        """Nothing carried between steps."""


@dataclasses.dataclass
class Episodes:
    """What `run_episodes` saw: one entry per counted episode, plus the task's step figures."""

    returns: list[float]
    lengths: list[int]
    terminated: list[bool]
    """True for an episode that ended early (a termination, not the time limit)."""
    metric_sums: dict[str, float]
    """Per task figure, its sum over every counted env step."""
    steps: int
    """Counted env steps (the steps of the counted episodes)."""

    def summary(self) -> dict[str, float | int]:
        """Means as flat figures: `mean_return`, `mean_length`, `early_termination_rate`, and
        `mean_<figure>` per task figure. A pair of figures `<x>_total` and `<x>_count` (events
        that happen on some steps only, such as a foot landing) becomes `mean_<x>`, the total
        over the count."""
        n = len(self.returns)
        out: dict[str, float | int] = {
            "episodes": n,
            "mean_return": sum(self.returns) / n,
            "mean_length": sum(self.lengths) / n,
            "min_return": min(self.returns),
            "max_return": max(self.returns),
            "early_termination_rate": sum(self.terminated) / n,
        }
        sums = self.metric_sums
        for name, total in sums.items():
            if name.endswith("_total") and name[: -len("_total")] + "_count" in sums:
                base = name[: -len("_total")]
                count = sums[base + "_count"]
                out[f"mean_{base}"] = total / count if count else math.nan
            elif not name.endswith("_count"):
                out[f"mean_{name}"] = total / max(self.steps, 1)
        return out


def reset_where_done(policy: object, dones: torch.Tensor) -> None:
    """`policy.reset(dones)`; a plugin's policy written before `reset` existed carries nothing."""
    reset = getattr(policy, "reset", None)
    if reset is not None:
        reset(dones)


@torch.no_grad()
def run_episodes(
    env: VecEnv,
    policy: DeterministicPolicy,
    episodes: int,
    metrics_fn: MetricsFn | None = None,
    on_step: Callable[[], None] | None = None,
) -> Episodes:
    """Each env runs ceil(episodes / num_envs) whole episodes of the policy's mean action from a
    reset; the first `episodes` count, env by env. `metrics_fn(env)` values are summed over the
    steps of the counted episodes. `on_step` is called after every env step (a heartbeat during
    training). Everything stays on the device until the end: one scalar is read per step (whether
    to go on), whatever the number of envs."""
    per_env = math.ceil(episodes / env.num_envs)
    record = _EpisodeRecord(env.num_envs, per_env, env.device)
    obs = env.reset()
    reset_where_done(policy, torch.ones(env.num_envs, dtype=torch.bool, device=env.device))  # fresh episodes
    sums: dict[str, torch.Tensor] = {}
    steps = torch.zeros((), dtype=torch.long, device=env.device)
    # Smoothness: the squared change of the action from the episode's previous step, summed
    # over the action's dimensions (`mean_action_rate`: its mean over the counted steps).
    previous, first_step = None, torch.ones(env.num_envs, dtype=torch.bool, device=env.device)
    sums["action_rate"] = torch.zeros((), dtype=torch.float64, device=env.device)
    while not record.complete():
        counting = record.finished < per_env  # envs still in an episode that counts
        actions = policy.act_deterministic(obs["actor"])
        if previous is not None:
            rate = (actions - previous).square().sum(-1).masked_fill(first_step | ~counting, 0.0)
            sums["action_rate"] += rate.sum().double()
        previous = actions.clone()
        obs, reward, terminated, truncated, _ = env.step(actions)
        first_step = terminated | truncated
        reset_where_done(policy, terminated | truncated)
        if metrics_fn is not None:
            for name, value in metrics_fn(env).items():
                idle = ~counting.view(-1, *([1] * (value.dim() - 1)))  # per env, whatever the value's shape
                total = value.masked_fill(idle, 0).sum().double()
                sums[name] = sums[name] + total if name in sums else total
        steps += counting.sum()
        record.step(reward, terminated, truncated)
        if on_step is not None:
            on_step()
    returns, lengths, terminated = record.counted(episodes)
    return Episodes(
        returns=returns,
        lengths=lengths,
        terminated=terminated,
        metric_sums={name: float(total) for name, total in sums.items()},
        steps=int(steps),
    )


class _EpisodeRecord:
    """The first `per_env` episodes of every env, recorded on the device as they end."""

    def __init__(self, num_envs: int, per_env: int, device: torch.device):
        self.per_env = per_env
        self.envs = torch.arange(num_envs, device=device)
        self.finished = torch.zeros(num_envs, dtype=torch.long, device=device)
        self.episode_return = torch.zeros(num_envs, device=device)
        self.episode_length = torch.zeros(num_envs, dtype=torch.long, device=device)
        self.returns = torch.zeros(num_envs, per_env, device=device)
        self.lengths = torch.zeros(num_envs, per_env, dtype=torch.long, device=device)
        self.terminated = torch.zeros(num_envs, per_env, dtype=torch.bool, device=device)

    def complete(self) -> bool:
        return bool(self.finished.min() >= self.per_env)  # the one host read per step

    def step(self, reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor) -> None:
        self.episode_return += reward
        self.episode_length += 1
        done = terminated | truncated
        # Each env writes only its own row, at the index of the episode that just ended: no two
        # writes share an element. Envs past their last counted episode rewrite what is there.
        keep = done & (self.finished < self.per_env)
        slot = (self.envs, self.finished.clamp(max=self.per_env - 1))
        self.returns[slot] = torch.where(keep, self.episode_return, self.returns[slot])
        self.lengths[slot] = torch.where(keep, self.episode_length, self.lengths[slot])
        self.terminated[slot] = torch.where(keep, terminated, self.terminated[slot])
        self.finished += done
        self.episode_return.masked_fill_(done, 0.0)
        self.episode_length.masked_fill_(done, 0)

    def counted(self, episodes: int) -> tuple[list[float], list[int], list[bool]]:
        """The first `episodes` episodes, env by env (env 0's, then env 1's, ...)."""
        return (
            self.returns.flatten()[:episodes].tolist(),
            self.lengths.flatten()[:episodes].tolist(),
            self.terminated.flatten()[:episodes].tolist(),
        )
