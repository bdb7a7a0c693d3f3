"""An iteration's metrics: every rank's statistics by name, pooled in one gather, then logged.

The env's statistics, the update's sums, the timings and the stop signal go into one
`NamedPack`: one all_gather per iteration, whatever the number of metrics.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from mjrl.distributed.packing import NamedPack
from mjrl.envs import VecEnv

EPISODE_STATISTICS = ("episode_return_sum", "episode_length_sum", "episodes")
"""The order of `VecEnv.episode_stats()`."""
STEP_COUNTS = ("nonfinite_resets", "reward_steps")
"""What `VecEnv.pop_term_stats()` returns after the term sums, in its order."""
GAUGE_PARTS = (":sum", ":count")
"""Suffixes of a gauge's sum and count (`VecEnv.gauges()`) in the pooled statistics."""


def env_statistics(env: VecEnv) -> dict[str, torch.Tensor]:
    """The env's statistics since the last call, by name (the term sums and counts are reset).
    The one place that reads the layout of the env's statistics vectors."""
    episodes = dict(zip(EPISODE_STATISTICS, env.episode_stats().unbind(), strict=True))
    terms = dict(zip([*env.term_names(), *STEP_COUNTS], env.pop_term_stats().unbind(), strict=True))
    gauges = {
        f"{name}{part}": value
        for name, pair in env.gauges().items()
        for part, value in zip(GAUGE_PARTS, pair, strict=True)
    }
    return {**episodes, **terms, **gauges}


def pack_iteration(
    env: VecEnv,
    update_sums: Mapping[str, torch.Tensor],
    algorithm_values: Mapping[str, torch.Tensor],
    timings: Mapping[str, float],
    stop_signal: int,
) -> NamedPack:
    """What every rank contributes to the iteration's gather: statistics and update sums are
    summed over ranks; the algorithm's values (`Algorithm.log_values`, the same on every rank),
    the timings of the slowest rank and the largest stop signal any rank received (so that
    every rank stops after the same iteration) are pooled by their maximum."""
    pack = NamedPack(torch.float64, env.device)
    pack.add_all(env_statistics(env)).add_all(update_sums).add_all(algorithm_values, reduce="max")
    pack.add_all(timings, reduce="max").add("stop_signal", float(stop_signal), reduce="max")
    return pack


def episode_metrics(totals: Mapping[str, float]) -> dict[str, float]:
    """Mean return and length of the finished episodes in every rank's window."""
    count = totals["episodes"]
    return {
        "mean_episode_return": totals["episode_return_sum"] / count if count else float("nan"),
        "mean_episode_length": totals["episode_length_sum"] / count if count else float("nan"),
    }


def gauge_metrics(totals: Mapping[str, float]) -> dict[str, float]:
    """Each gauge's mean over every rank: its pooled sum over its pooled count (NaN: none counted)."""
    sum_suffix, count_suffix = GAUGE_PARTS
    names = [key[: -len(sum_suffix)] for key in totals if key.endswith(sum_suffix)]
    return {
        name: totals[name + sum_suffix] / totals[name + count_suffix] if totals[name + count_suffix] else float("nan")
        for name in names
    }


def term_metrics(totals: Mapping[str, float], term_names: list[str]) -> dict[str, float | int]:
    """Non-finite resets, and each reward term and termination per env step (of every rank)."""
    steps = max(totals["reward_steps"], 1.0)
    rewards = [totals[name] for name in term_names if name.startswith("reward/")]
    return {
        "nonfinite_resets": int(totals["nonfinite_resets"]),
        "mean_step_reward": sum(rewards) / steps,
        **{name: totals[name] / steps for name in term_names},
    }
