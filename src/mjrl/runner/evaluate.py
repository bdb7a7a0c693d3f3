"""Evaluation of the deterministic policy: whole episodes, their returns and the task's figures.

`play` and the periodic evaluation during training (`--agent.eval-interval`) both use it. It
reads results back to the host every step, which is fine for evaluation and never happens in
the training loop.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import torch

from mjrl.envs import EnvConfig, VecEnv
from mjrl.rl.networks import ActorCritic

MetricsFn = Callable[[VecEnv], dict[str, torch.Tensor]]


class DeterministicPolicy(Protocol):
    def act_deterministic(self, actor_obs: torch.Tensor) -> torch.Tensor: ...


class ZeroActions:
    """The baseline policy: every action 0, so the env holds its action offset (for a legged
    robot, the home pose). A trained policy's figures mean little without these beside them."""

    def __init__(self, num_actions: int):
        self.num_actions = num_actions

    def act_deterministic(self, actor_obs: torch.Tensor) -> torch.Tensor:
        return actor_obs.new_zeros(actor_obs.shape[0], self.num_actions)


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


@torch.no_grad()
def run_episodes(
    env: VecEnv,
    policy: DeterministicPolicy | ActorCritic,
    episodes: int,
    metrics_fn: MetricsFn | None = None,
    on_step: Callable[[], None] | None = None,
) -> Episodes:
    """Each env runs ceil(episodes / num_envs) whole episodes of the policy's mean action from a
    reset; the first `episodes` count. `metrics_fn(env)` values are summed over the steps of the
    counted episodes. `on_step` is called after every env step (a heartbeat during training)."""
    per_env = math.ceil(episodes / env.num_envs)
    finished: list[list[tuple[float, int, bool]]] = [[] for _ in range(env.num_envs)]
    obs = env.reset()
    episode_return = torch.zeros(env.num_envs, device=env.device)
    episode_length = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
    sums: dict[str, float] = {}
    steps = 0
    while min(len(f) for f in finished) < per_env:
        counting = torch.tensor([len(f) < per_env for f in finished], device=env.device)
        obs, reward, terminated, truncated, _ = env.step(policy.act_deterministic(obs["actor"]))
        if metrics_fn is not None:
            for name, value in metrics_fn(env).items():
                sums[name] = sums.get(name, 0.0) + float(value[counting].sum())
        steps += int(counting.sum())
        episode_return += reward
        episode_length += 1
        done = terminated | truncated
        for i in done.nonzero().flatten().tolist():
            finished[i].append((episode_return[i].item(), int(episode_length[i]), bool(terminated[i])))
        episode_return *= ~done
        episode_length *= ~done
        if on_step is not None:
            on_step()
    counted = [e for f in finished for e in f[:per_env]][:episodes]
    return Episodes(
        returns=[r for r, _, _ in counted],
        lengths=[n for _, n, _ in counted],
        terminated=[t for _, _, t in counted],
        metric_sums=sums,
        steps=steps,
    )


def load_trained(
    task: Any, state: dict, source: Path, env_cfg: EnvConfig, device: torch.device, seed: int = 0
) -> tuple[VecEnv, ActorCritic]:
    """An env built from `env_cfg` and the checkpoint's policy on it, in eval mode: what `play`,
    videos and export start from."""
    from mjrl.runner.config import TrainConfig, apply_dict
    from mjrl.runner.runner import build_policy  # the runner imports this module
    from mjrl.runner.start import restore_policy

    train_cfg = apply_dict(TrainConfig(env=task.env_cfg, agent=task.agent_cfg), state["config"])
    env = VecEnv(env_cfg, task.build(env_cfg), device, seed=seed)
    policy = build_policy(env, train_cfg, device)
    restore_policy(policy, state, source)
    policy.eval()
    return env, policy
