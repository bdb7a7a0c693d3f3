"""`mjrl plot RUN_DIR [RUN_DIR ...] [--out PNG] [--metrics M ...] [--x iteration|env_steps|wall_s]`."""

from __future__ import annotations

import dataclasses
import sys
from typing import Annotated

import tyro

from mjrl.cli.common import parse_flags, run_command
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


def _plot(argv: list[str]) -> int:
    from mjrl.tools.plots import plot_runs

    cfg = parse_flags(PlotConfig, PlotConfig(), argv, "mjrl plot", PlotConfig.__doc__ or "")
    out = plot_runs(cfg.run_dirs, cfg.out, cfg.metrics or None, cfg.x, cfg.smoothing)
    print(f"wrote {out} ({len(cfg.run_dirs)} run{'s' if len(cfg.run_dirs) != 1 else ''})")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command("mjrl plot", _plot, argv)


if __name__ == "__main__":
    sys.exit(main())
