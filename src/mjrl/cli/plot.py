"""`mjrl plot RUN_DIR [RUN_DIR ...] [--out PNG] [--metrics M ...] [--x iteration|env_steps|wall_s]`,
or `mjrl plot RUN_DIR --table True [--block N]`: a run's curve as a markdown table."""

from __future__ import annotations

import dataclasses
import sys
from typing import Annotated

import tyro

from mjrl.cli.common import parse_flags, run_command
from mjrl.errors import UsageError
from mjrl.tools.plots import XAxis


@dataclasses.dataclass(frozen=True)
class PlotConfig:
    """Draw learning curves from runs' metrics.jsonl, runs overlaid, smoothed over the faint raw data."""

    run_dirs: Annotated[tuple[str, ...], tyro.conf.Positional, tyro.conf.arg(metavar="RUN_DIR [RUN_DIR ...]")] = ()
    """Run directories (each holds a metrics.jsonl); the legend names them."""
    out: str = "learning_curves.png"
    """Image to write; the suffix picks the format (.png, .svg, .pdf)."""
    metrics: tuple[str, ...] = ()
    """Metrics to draw, one panel each (e.g. mean_episode_return reward/smooth_balance). Default:
    return, episode length, learning rate, KL and the task's reward terms."""
    x: XAxis = "iteration"
    """Horizontal axis: iterations, env steps (all ranks) or wall time in seconds."""
    smoothing: float = 0.8
    """Weight of the exponential moving average drawn over the raw values, in [0, 1); 0 turns it off."""
    table: bool = False
    """Print each run's curve as a markdown table instead of drawing it: a row per `--block`
    iterations, each metric's mean over them (default metrics: a rough-terrain run's progress
    when it logged it, else return, episode length, KL and learning rate)."""
    block: int = 100
    """Iterations per row of `--table`."""


def _plot(argv: list[str]) -> int:
    from mjrl.tools.plots import curve_table, plot_runs

    cfg = parse_flags(PlotConfig, PlotConfig(), argv, "mjrl plot", PlotConfig.__doc__ or "")
    if cfg.table:
        if not cfg.run_dirs:
            raise UsageError("give at least one run directory")
        tables = {run_dir: curve_table(run_dir, cfg.metrics or None, cfg.block) for run_dir in cfg.run_dirs}
        print("\n\n".join(f"{run_dir}\n\n{table}" if len(tables) > 1 else table for run_dir, table in tables.items()))
        return 0
    out = plot_runs(cfg.run_dirs, cfg.out, cfg.metrics or None, cfg.x, cfg.smoothing)
    print(f"wrote {out} ({len(cfg.run_dirs)} run{'s' if len(cfg.run_dirs) != 1 else ''})")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command("mjrl plot", _plot, argv)


if __name__ == "__main__":
    sys.exit(main())
