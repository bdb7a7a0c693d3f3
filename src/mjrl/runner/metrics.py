"""An iteration's metrics: every rank's statistics by name, pooled in one gather, then logged.

The env's statistics, the update's sums, the timings and the stop signal go into one
`NamedPack`: one all_gather per iteration, whatever the number of metrics.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from mjrl.distributed.packing import NamedPack
from mjrl.envs import VecEnv
from mjrl.envs.statistics import GAUGE_PARTS


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
    pack.add_all(env.pop_statistics()).add_all(update_sums).add_all(algorithm_values, reduce="max")
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
