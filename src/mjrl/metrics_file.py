"""metrics.jsonl, the figures of a run: one JSON object per iteration, appended as the run goes.
Its one reader (`read_metrics`) and its writer (`MetricsFile`). No torch: `mjrl plot` reads
runs without it."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from mjrl.errors import RESUME_HINT, cannot_write
from mjrl.files import atomic_target

NAME = "metrics.jsonl"
TIMINGS = frozenset({"wall_s", "steps_per_second", "collection_s", "learning_s", "collective_s", "eval/seconds"})
"""The figures that measure time: everything else is what a run learned."""


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The iterations in `path` (a metrics.jsonl, or the run directory holding one), in the
    file's order; FileNotFoundError when there is none yet.

    One rule for a bad line: a line that is not a JSON object with an integer `iteration` is
    skipped with a warning naming it. It is the last line cut short by a crash or a power loss,
    or the one a running training is writing. A resume must not fail on it, nor every elastic
    restart with it; the resumed run writes its iteration anew."""
    path = path / NAME if path.is_dir() else path
    rows = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        if not isinstance(row, dict) or not isinstance(row.get("iteration"), int):
            print(f"warning: skipping damaged line {number} of {path}", file=sys.stderr, flush=True)
            continue
        rows.append(row)
    return rows


def learned_figures(path: Path) -> list[dict[str, Any]]:
    """A run's iterations without their timings: equal between two runs exactly when they
    learned alike, bit for bit (what a refactor meant to change no learning is checked by)."""
    return [{k: v for k, v in row.items() if k not in TIMINGS} for row in read_metrics(path)]


class MetricsFile:
    """The writer. On resume, lines of iterations that will be run again are dropped first, so
    every iteration appears exactly once."""

    def __init__(self, path: Path, start_iteration: int):
        self.path = path
        kept = [m for m in read_metrics(path) if m["iteration"] < start_iteration] if path.is_file() else []
        with atomic_target(path, RESUME_HINT) as tmp, tmp.open("w") as f:
            f.write("".join(json.dumps(m) + "\n" for m in kept))
            f.flush()
            os.fsync(f.fileno())
        self.file = path.open("a", buffering=1)

    def write(self, metrics: dict[str, Any]) -> None:
        """Append one line, whole or not at all: a write the filesystem refuses is cut back to
        the previous line and raised as an `OutputError`."""
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in metrics.items()}
        end = self.file.tell()
        try:
            self.file.write(json.dumps(clean) + "\n")
            self.file.flush()
        except OSError as exc:
            with contextlib.suppress(OSError):
                self.file.close()  # drops what its buffer still holds
            with contextlib.suppress(OSError):
                os.truncate(self.path, end)  # shrinking a file needs no space
            raise cannot_write(self.path, exc, RESUME_HINT) from exc

    def sync(self) -> None:
        """Flush the lines to disk; called before each checkpoint, so that after a power loss
        the file holds at least the iterations of the newest checkpoint."""
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
        except OSError as exc:
            raise cannot_write(self.path, exc, RESUME_HINT) from exc

    def close(self) -> None:
        self.file.close()
