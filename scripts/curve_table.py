"""A learning curve as a markdown table: means of chosen metrics over blocks of iterations.

    python scripts/curve_table.py RUN_DIR [--block 100] [--metrics reward/track_lin_vel terrain/mean_level ...]

Reads the run's metrics.jsonl (a line per iteration); a block's mean skips the iterations that
did not log a metric (an evaluation every few iterations, a gauge with no episode finished).
Without `--metrics`, the figures docs/benchmarks.md reports for a rough-terrain run when the run
logged them, else return, episode length, KL and learning rate.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from common import read_metrics

TERRAIN = ("rough", "slope_up", "slope_down", "stairs_up", "stairs_down")
ROUGH_METRICS = (
    "reward/track_lin_vel",
    "terrain/mean_level",
    *(f"terrain/mean_level/{t}" for t in TERRAIN),
    *(f"terrain/promoted_off_top/{t}" for t in TERRAIN),
)
DEFAULT_METRICS = ("mean_episode_return", "mean_episode_length", "mean_kl", "mean_learning_rate")


def block_means(lines: list[dict], metrics: list[str], block: int) -> list[dict]:
    """Per block of `block` iterations: its first and last iteration, its first line's env steps,
    and each metric's mean over the lines that logged it (None when none did)."""
    blocks: dict[int, list[dict]] = {}
    for line in lines:
        blocks.setdefault(line["iteration"] // block, []).append(line)
    rows = []
    for _, group in sorted(blocks.items()):
        row = {"first": group[0]["iteration"], "last": group[-1]["iteration"], "env_steps": group[0]["env_steps"]}
        for metric in metrics:
            values = [line[metric] for line in group if line.get(metric) is not None]
            row[metric] = sum(values) / len(values) if values else None
        rows.append(row)
    return rows


def markdown(rows: list[dict], metrics: list[str]) -> str:
    head = ["iterations", "env steps", *(f"`{m}`" for m in metrics)]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row in rows:
        cells = [f"{row['first']}-{row['last']}", f"{row['env_steps'] / 1e6:.1f} M"]
        cells += ["-" if row[m] is None else f"{row[m]:.4g}" for m in metrics]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a run directory (holding metrics.jsonl)")
    parser.add_argument("--block", type=int, default=100, help="iterations per row")
    parser.add_argument("--metrics", nargs="+", help="metric names as in metrics.jsonl")
    args = parser.parse_args()
    lines = read_metrics(args.run_dir)
    logged = set().union(*lines) if lines else set()
    metrics = args.metrics or list(ROUGH_METRICS if "terrain/mean_level" in logged else DEFAULT_METRICS)
    print(markdown(block_means(lines, metrics, args.block), metrics))


if __name__ == "__main__":
    main()
