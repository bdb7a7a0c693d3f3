"""What the benchmark scripts share beyond `mjrl.tools.commands`: tiny runs, `play`'s figures and
Markdown tables. Scripts import helpers from here only, never from one another; the top imports
no torch and no simulator.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mjrl.tools.commands import last_json_line, run_commands

ROOT = Path(__file__).resolve().parent.parent
# A training of milliseconds per iteration, for the benchmarks that time the launcher or compare runs.
TINY_CPU_RUN = ("--device", "cpu", "--logger", "none", "--env.num-envs", "16", "--runner.num-steps-per-env", "16",
                "--algorithm.num-mini-batches", "2")  # fmt: skip
TINY_SAC_RUN = (*TINY_CPU_RUN[:-2], "--algo", "sac", "--algorithm.batch-size", "64", "--algorithm.buffer-steps", "16")


def parse_with_passthrough(parser: argparse.ArgumentParser) -> tuple[argparse.Namespace, list[str]]:
    """The script's own arguments, and those after `--`, which it passes on to `train` as they are."""
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    return parser.parse_args(argv[:split]), argv[split + 1 :]


def play_args(task: str, episodes: int, source: list[str], commands: list[str], device: str = "cpu") -> list[str]:
    """`run_commands`' command `play TASK SOURCE --episodes EPISODES --device DEVICE COMMANDS`."""
    return ["play", task, *source, "--episodes", str(episodes), "--device", device, *commands]


def play(task: str, episodes: int, source: list[str], commands: list[str], device: str = "cpu") -> dict:
    """`play`'s figures of the policy of `source` (`--run-dir RUN`, or `--zero-actions True`)."""
    return last_json_line(run_commands([play_args(task, episodes, source, commands, device)])[0])


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines."""
    return [f"| {' | '.join(cells)} |" for cells in (header, ["---"] * len(header), *rows)]


def on_hardest_row(task: str, run_dir: Path, episodes: int, kind: str | None, *flags: str) -> dict:
    """`play`'s figures of `run_dir` walking straight forward on the hardest row of terrain `kind`
    (None: flat ground), with `flags` added (another terrain seed, say)."""
    from mjrl.tasks import load_task
    from mjrl.tools.targets import GO1, ROUGH, profile

    ground = ["--env.terrain.kind", "flat"]
    if kind is not None:
        row = str(load_task(ROUGH).env_cfg.terrain.rows - 1)
        ground = ["--env.terrain.kind", "grid", "--env.terrain.spawn-row", row, "--env.terrain.spawn-type", kind]
    straight = ["--env.commands.heading", "False", "--env.commands.standing-fraction", "0"]
    source = ["--run-dir", str(run_dir)]
    return play(task, episodes, source, [*profile(GO1).settings()["forward"], *straight, *ground, *flags])
