"""Learning curves from runs' `metrics.jsonl`: one panel per metric, runs overlaid.

matplotlib is imported inside `plot_runs` only: `train` and `play` never pay for it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from mjrl.errors import UsageError
from mjrl.files import atomic_target, make_dirs, prepare_output_file
from mjrl.metrics_file import NAME as METRICS
from mjrl.metrics_file import read_metrics

XAxis = Literal["iteration", "env_steps", "wall_s"]
X_LABELS = {"iteration": "iteration", "env_steps": "env steps", "wall_s": "wall time (s)"}
# What `mjrl plot` shows without --metrics; the task's reward terms are added after these.
DEFAULT_METRICS = ("mean_episode_return", "mean_episode_length", "learning_rate", "mean_kl")
PANEL_INCHES = (4.0, 3.0)
DPI = 100
MAX_COLUMNS = 3


def read_run_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The iterations of a run (`read_metrics`' rule for a bad line), or one line of why not."""
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: no such run directory")
    if not (run_dir / METRICS).is_file():
        raise UsageError(f"{run_dir} has no {METRICS}")
    rows = read_metrics(run_dir)
    if not rows:
        raise UsageError(f"{run_dir / METRICS} holds no iterations yet")
    return rows


def series(rows: list[dict[str, Any]], x: XAxis, metric: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(x, y) of one metric, null values as NaN (gaps); None when the run never logged it.
    Lines without the metric are left out, so a figure logged every N iterations (`eval/...`)
    draws as a line through its points."""
    rows = [row for row in rows if metric in row]
    if not rows:
        return None
    xs = np.array([row.get(x, math.nan) for row in rows], dtype=float)
    ys = np.array([_number(row.get(metric)) for row in rows], dtype=float)
    return xs, ys


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def smooth(values: np.ndarray, weight: float) -> np.ndarray:
    """Debiased exponential moving average (TensorBoard's smoothing) that steps over NaN:
    a gap stays a gap and does not poison the values after it."""
    out = np.full_like(values, np.nan)
    average, norm = 0.0, 0.0
    for i, value in enumerate(values):
        if math.isfinite(value):
            average = weight * average + (1 - weight) * value
            norm = weight * norm + (1 - weight)
            out[i] = average / norm
    return out


def run_labels(run_dirs: Sequence[Path]) -> list[str]:
    """Run directory names; parent/name where two runs share a name."""
    names = [p.resolve().name for p in run_dirs]
    return [f"{p.resolve().parent.name}/{n}" if names.count(n) > 1 else n for p, n in zip(run_dirs, names, strict=True)]


def choose_metrics(runs: list[list[dict[str, Any]]], requested: Sequence[str] | None) -> list[str]:
    """The requested metrics that some run logged (a name no run logged is bad input), or by
    default DEFAULT_METRICS and every reward term, in that order."""
    logged = {key for rows in runs for row in rows for key in row}
    if requested:
        unknown = [m for m in requested if m not in logged]
        if unknown:
            known = ", ".join(sorted(k for k in logged if k not in X_LABELS))
            raise UsageError(f"no run logged {', '.join(unknown)}; logged metrics: {known}")
        return list(dict.fromkeys(requested))
    rewards = sorted(k for k in logged if k.startswith("reward/"))
    return [m for m in DEFAULT_METRICS if m in logged] + rewards


def plot_runs(
    run_dirs: Sequence[str | Path],
    out: str | Path,
    metrics: Sequence[str] | None = None,
    x: XAxis = "iteration",
    smoothing: float = 0.8,
) -> Path:
    """Draw the learning curves of `run_dirs` into the image `out` (its suffix picks the format)
    and return its path. Each metric gets a panel of PANEL_INCHES at DPI, up to MAX_COLUMNS per
    row; a run that did not log a metric is left out of that panel. The raw values are drawn
    faint behind their smoothed curve."""
    if not run_dirs:
        raise UsageError("give at least one run directory")
    if x not in X_LABELS:
        raise UsageError(f"--x must be one of {', '.join(X_LABELS)}")
    if not 0.0 <= smoothing < 1.0:
        raise UsageError("--smoothing must be in [0, 1)")
    out = Path(out)
    paths = [Path(p) for p in run_dirs]
    runs = [read_run_metrics(p) for p in paths]
    chosen = choose_metrics(runs, metrics)
    figure = _draw(runs, run_labels(paths), chosen, x, smoothing)
    return _save_atomically(figure, out)


# What `mjrl plot --table True` gives without --metrics: a rough-terrain run's progress when the run
# logged it (docs/benchmarks.md's tables of rough runs), else the learning's summary.
TERRAIN_TYPES = ("rough", "slope_up", "slope_down", "stairs_up", "stairs_down")
ROUGH_TABLE = (
    "reward/track_lin_vel",
    "terrain/mean_level",
    *(f"terrain/mean_level/{t}" for t in TERRAIN_TYPES),
    *(f"terrain/promoted_off_top/{t}" for t in TERRAIN_TYPES),
)
TABLE = ("mean_episode_return", "mean_episode_length", "mean_kl", "mean_learning_rate")


def curve_table(run_dir: str | Path, metrics: Sequence[str] | None = None, block: int = 100) -> str:
    """A run's learning curve as a markdown table: a row per `block` iterations, each metric's
    mean over the iterations of the block that logged it (an evaluation every few iterations, a
    gauge with no episode finished), "-" where none did."""
    if block < 1:
        raise UsageError("--block must be at least 1")
    rows = read_run_metrics(Path(run_dir))
    logged = set().union(*rows)
    chosen = list(metrics) if metrics else list(ROUGH_TABLE if "terrain/mean_level" in logged else TABLE)
    head = ["iterations", "env steps", *(f"`{m}`" for m in chosen)]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    blocks: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        blocks.setdefault(row["iteration"] // block, []).append(row)
    for group in blocks.values():
        cells = [f"{group[0]['iteration']}-{group[-1]['iteration']}", f"{group[0].get('env_steps', 0) / 1e6:.1f} M"]
        for metric in chosen:
            values = [v for row in group if math.isfinite(v := _number(row.get(metric)))]
            cells.append(f"{sum(values) / len(values):.4g}" if values else "-")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _draw(runs: list[list[dict[str, Any]]], labels: list[str], metrics: list[str], x: XAxis, smoothing: float) -> Any:
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    columns = min(MAX_COLUMNS, len(metrics))
    rows = math.ceil(len(metrics) / columns)
    figure = Figure(figsize=(PANEL_INCHES[0] * columns, PANEL_INCHES[1] * rows), dpi=DPI, layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False).flatten()
    colors = [f"C{i % 10}" for i in range(len(runs))]
    for ax, metric in zip(axes, metrics, strict=False):
        for rows_of_run, color in zip(runs, colors, strict=True):
            data = series(rows_of_run, x, metric)
            if data is None:
                continue
            xs, ys = data
            # A lone value draws no line segment: mark it so it still shows.
            marker = "o" if np.isfinite(ys).sum() < 2 else None
            ax.plot(xs, ys, color=color, alpha=0.25, linewidth=1.0)
            ax.plot(xs, smooth(ys, smoothing), color=color, linewidth=1.8, marker=marker)
        ax.set_title(metric, fontsize=10)
        ax.set_xlabel(X_LABELS[x], fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    for ax in axes[len(metrics) :]:
        ax.set_visible(False)
    # Every run is named, including one with no values in the first panel.
    axes[0].legend(handles=[Line2D([], [], color=c, label=n) for c, n in zip(colors, labels, strict=True)], fontsize=7)
    return figure


def _save_atomically(figure: Any, out: Path) -> Path:
    """Write next to `out` and rename, so a reader never sees half an image."""
    fmt = out.suffix.lstrip(".").lower()
    if fmt not in figure.canvas.get_supported_filetypes():
        raise UsageError(f"--out {out}: unknown image type {out.suffix!r}; use .png, .svg or .pdf")
    prepare_output_file(out)
    make_dirs(out.parent)
    with atomic_target(out) as tmp:
        figure.savefig(tmp, format=fmt)
    return out
