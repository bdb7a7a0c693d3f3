"""What the benchmark scripts share beyond `mjrl.tools.commands`: tiny runs, `play`'s figures,
waiting for rank processes, and the Markdown of the reports in docs/benchmarks.md. Scripts import
helpers from here only, never from one another; the top imports no torch and no simulator.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from mjrl.tools.commands import last_json_line, run_commands

ROOT = Path(__file__).resolve().parent.parent
# A training of milliseconds per iteration, for the benchmarks that time the launcher or compare runs.
TINY_CPU_RUN = ("--device", "cpu", "--logger", "none", "--env.num-envs", "16", "--runner.num-steps-per-env", "16",
                "--algorithm.num-mini-batches", "2")  # fmt: skip
TINY_SAC_RUN = (*TINY_CPU_RUN[:-2], "--algo", "sac", "--algorithm.batch-size", "64", "--algorithm.buffer-steps", "16")
T = TypeVar("T")


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


def wait_for(condition: Callable[[], T | None], timeout: float = 300.0) -> T:
    """The first true value of `condition()`, polled until `timeout` s. A file not written yet, or
    cut short while being written, counts as not yet."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if value := condition():
                return value
        except (FileNotFoundError, StopIteration, ValueError):
            pass
        time.sleep(0.05)
    raise TimeoutError


def rank_pid(run_dir: Path, rank: int) -> int:
    """The newest process of `rank` (its log gains a line per attempt and per resume)."""
    text = (run_dir / "ranks" / f"rank_{rank}.log").read_text()
    return int(re.findall(rf"^rank {rank} pid (\d+) ", text, re.M)[-1])


# Reports in docs/benchmarks.md


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines."""
    return [f"| {' | '.join(cells)} |" for cells in (header, ["---"] * len(header), *rows)]


def cpu_run_line(task: str, run_dir: Path, last: dict) -> str:
    """A report's first line: the machine, the date, torch, and the run up to its `last` iteration."""
    import torch

    return (
        f"Device: CPU ({platform.processor() or platform.machine()}), {torch.get_num_threads()} threads; "
        f"{datetime.date.today()}; torch {torch.__version__}. `{task}`, run `{run_dir.name}`, "
        f"{last['iteration'] + 1} iterations, {last['env_steps'] / 1e6:.1f} M env steps, "
        f"{last['wall_s'] / 60:.0f} min of training ({last['env_steps'] / last['wall_s']:.0f} env steps/s)."
    )


def replace_section(markers: tuple[str, str], heading: str, text: str) -> None:
    """Put `text` between the markers in docs/benchmarks.md, or append it under a new heading."""
    path = ROOT / "docs/benchmarks.md"
    doc = path.read_text()
    begin, end = markers
    section = f"{begin}\n{text}\n{end}"
    if begin in doc:
        head, rest = doc.split(begin, 1)
        doc = head + section + rest.split(end, 1)[1]
    else:
        doc += f"\n## {heading}\n\n{section}\n"
    path.write_text(doc)
