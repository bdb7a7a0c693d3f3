"""`mjrl plot`: learning curves of real runs drawn into a PNG."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_RUN, last_json, run_main
from PIL import Image

from mjrl.tools.plots import plot_runs, series, smooth

TASK = "Mjrl-Cartpole-Balance"
BLUE, ORANGE = (31, 119, 180), (255, 127, 14)  # matplotlib's C0 and C1: the first and second run


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> list[Path]:
    """Two short cartpole runs: "short" finishes episodes (0.5 s), "long" never does, so its
    return and length are null on every line."""
    log_root = tmp_path_factory.mktemp("logs")
    runs = []
    for name, length in (("short", "0.5"), ("long", "50")):
        result = run_main(
            "train", TASK, *TINY_RUN, "--log-root", str(log_root), "--run-name", name,
            "--runner.max-iterations", "4", "--env.episode-length-s", length,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
        runs.append(Path(last_json(result.stdout)["run_dir"]))
    return runs


def color_pixels(image: np.ndarray, rgb: tuple[int, int, int]) -> int:
    return int((np.abs(image[..., :3].astype(int) - rgb).sum(axis=-1) < 30).sum())


def test_plot_overlays_two_runs_and_leaves_out_null_values(two_runs, tmp_path):
    out = tmp_path / "curves.png"
    result = run_main(
        "mjrl", "plot", *map(str, two_runs), "--out", str(out),
        "--metrics", "mean_episode_return", "reward/smooth_balance", "--x", "env_steps",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert str(out) in result.stdout
    image = np.asarray(Image.open(out).convert("RGB"))
    assert image.shape == (300, 800, 3)  # two 4x3-inch panels at 100 dpi
    left, right = image[:, :400], image[:, 400:]
    # Left panel: only the "short" run has returns; the "long" one appears in the legend only.
    assert color_pixels(left, BLUE) > 200
    assert color_pixels(left, ORANGE) < 100
    # Right panel: both runs have reward terms from the first iteration.
    assert color_pixels(right, BLUE) > 200 and color_pixels(right, ORANGE) > 200


def test_default_metrics_include_the_task_reward_terms(two_runs, tmp_path):
    out = plot_runs(two_runs, tmp_path / "default.png", x="wall_s")
    # return, length, learning rate, KL and reward/smooth_balance: 3 columns x 2 rows.
    assert Image.open(out).size == (1200, 600)
    assert np.asarray(Image.open(out).convert("L")).std() > 10  # not a blank canvas


def test_a_run_still_writing_its_last_line_is_plotted(two_runs, tmp_path):
    run = tmp_path / "in_progress"
    run.mkdir()
    text = (two_runs[0] / "metrics.jsonl").read_text()
    (run / "metrics.jsonl").write_text(text + '{"iteration": 4, "env_st')
    out = plot_runs([run], tmp_path / "partial.png", metrics=["learning_rate"])
    assert Image.open(out).size == (400, 300)


def test_smoothing_steps_over_gaps():
    smoothed = smooth(np.array([1.0, math.nan, 3.0, 3.0]), weight=0.5)
    assert smoothed[0] == 1.0 and math.isnan(smoothed[1])
    assert smoothed[2] == pytest.approx((0.5 * 1 + 3) / 1.5)  # debiased: weights 0.5 and 1
    assert 1.0 < smoothed[2] < smoothed[3] < 3.0


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--metrics", "nope"], "no run logged nope"),
        (["--out", "curves.bmpx"], "unknown image type"),
        (["--x", "minutes"], "--x"),
    ],
)
def test_bad_plot_input_is_one_line_and_writes_nothing(two_runs, tmp_path, extra, needle, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the default output would go
    result = run_main("mjrl", "plot", str(two_runs[0]), *extra)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and needle in result.stderr and "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_missing_run_directory_is_named(tmp_path):
    result = run_main("mjrl", "plot", str(tmp_path / "nope"), "--out", str(tmp_path / "x.png"))
    assert result.returncode == 2 and "no such run directory" in result.stderr
    assert not (tmp_path / "x.png").exists()


def test_a_figure_logged_every_few_iterations_is_one_line_through_its_points():
    rows = [{"iteration": i, "eval/err": 0.5 - 0.1 * i} if i % 2 else {"iteration": i} for i in range(6)]
    rows[3]["eval/err"] = None  # a logged null stays a gap
    xs, ys = series(rows, "iteration", "eval/err")
    assert xs.tolist() == [1.0, 3.0, 5.0]
    assert ys[0] == pytest.approx(0.4) and math.isnan(ys[1]) and ys[2] == pytest.approx(0.0)


def test_the_curve_table_averages_each_metric_over_the_iterations_that_logged_it(tmp_path: Path) -> None:
    """`mjrl plot --table True` (formerly scripts/curve_table.py): a row per block of iterations."""
    lines = [
        {"iteration": i, "env_steps": 1000 * (i + 1), "mean_kl": 0.01 * i, "eval/mean_return": 5.0 if i == 2 else None}
        for i in range(5)
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    metrics = ("--metrics", "mean_kl", "eval/mean_return")
    result = run_main("mjrl", "plot", str(tmp_path), "--table", "True", "--block", "3", *metrics)
    out = result.stdout.splitlines()
    assert out[0] == "| iterations | env steps | `mean_kl` | `eval/mean_return` |"
    assert out[2] == "| 0-2 | 0.0 M | 0.01 | 5 |"  # kl (0 + 0.01 + 0.02) / 3; one evaluation
    assert out[3] == "| 3-4 | 0.0 M | 0.035 | - |"
    assert not (tmp_path / "learning_curves.png").exists()
