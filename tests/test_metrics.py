"""The logged metrics: their names are an interface (plots, dashboards, scripts read them)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import TINY_RUN, run_main

from mjrl.distributed.packing import NamedPack
from mjrl.metrics_file import read_metrics
from mjrl.rl.statistics import explained_variance, rollout_sums

# The keys of metrics.jsonl of both cartpole tasks before issue 12, plus clip_fraction and
# explained_variance: a renamed, lost or mislabelled metric fails here.
CARTPOLE_KEYS = [
    "action_std",
    "clip_fraction",
    "collection_s",
    "collective_s",
    "entropy",
    "env_steps",
    "explained_variance",
    "iteration",
    "learning_rate",
    "learning_s",
    "mean_episode_length",
    "mean_episode_return",
    "mean_kl",
    "mean_learning_rate",
    "mean_step_reward",
    "nonfinite_resets",
    "reward/smooth_balance",
    "steps_per_second",
    "surrogate_loss",
    "value_loss",
    "wall_s",
]


@pytest.mark.parametrize("task", ["Mjrl-Cartpole-Balance", "Mjrl-Cartpole-Swingup"])
def test_metrics_keys_of_the_cartpole_tasks(task, log_root):
    result = run_main("train", task, *TINY_RUN, "--log-root", str(log_root), "--runner.max-iterations", "2")
    assert result.returncode == 0, result.stderr[-2000:]
    metrics = read_metrics(next((log_root / task).glob("20*")) / "metrics.jsonl")
    assert [m["iteration"] for m in metrics] == [0, 1]
    # Balance trains with symmetry augmentation, which logs how far the policy is from symmetric.
    keys = sorted(CARTPOLE_KEYS + ["symmetry_loss"] * (task == "Mjrl-Cartpole-Balance"))
    for line in metrics:
        assert sorted(line) == keys
        assert 0.0 <= line["clip_fraction"] <= 1.0 and line["explained_variance"] <= 1.0
        # The console shows the rate the update used on average (the adaptive schedule ends
        # an update on its lowest rate) and the KL that steered it.
        assert f"lr {line['mean_learning_rate']:.1e} kl {line['mean_kl']:.4f} |" in result.stdout


def test_explained_variance_pools_the_sums_of_every_rank():
    rng = np.random.default_rng(0)
    returns, values = rng.normal(2.0, 3.0, size=(2, 40)), rng.normal(2.0, 1.0, size=(2, 40))
    values += 0.8 * returns  # a value function that explains part of the returns
    # Two ranks, each with half the samples: their sums add up, as in the runner's gather.
    halves = [rollout_sums(torch.tensor(r), torch.tensor(v)) for r, v in zip(returns, values, strict=True)]
    pooled = {k: (halves[0][k] + halves[1][k]).item() for k in halves[0]}
    expected = 1.0 - np.var(returns - values) / np.var(returns)
    assert explained_variance(pooled) == pytest.approx(expected, rel=1e-12)
    one_rank = {k: v.item() for k, v in halves[0].items()}
    assert explained_variance(one_rank) != pytest.approx(expected, rel=1e-3)  # the pooling matters
    constant = {k: v.item() for k, v in rollout_sums(torch.ones(5), torch.zeros(5)).items()}
    assert np.isnan(explained_variance(constant))


def test_a_pack_round_trips_by_name_and_refuses_a_name_twice():
    pack = NamedPack().add("loss", 1.5).add("moments", torch.arange(6.0).view(2, 3)).add("n", [4.0])
    out = pack.unpack(pack.flat() * 2)
    assert out["loss"].item() == 3.0 and out["n"].tolist() == [8.0]
    assert torch.equal(out["moments"], 2 * torch.arange(6.0, dtype=torch.float64).view(2, 3))
    with pytest.raises(ValueError, match="twice"):
        pack.add("loss", 0.0)
    with pytest.raises(ValueError, match="does not hold"):
        pack.unpack(torch.zeros(3))
