"""Run directories: <log-root>/<task>/<YYYY-mm-dd_HH-MM-SS>[_<run-name>]/."""

from __future__ import annotations

import datetime
import itertools
import re
from pathlib import Path

from mjrl.errors import UsageError, cannot_write
from mjrl.files import make_dirs

_STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2}")


def claim_run_dir(log_root: str, task: str, run_name: str, now: datetime.datetime | None = None) -> Path:
    """Create a fresh run directory and return it. The name is claimed by creating the folder
    exclusively, retrying with a numeric suffix: runs started in the same second by processes
    that know nothing of each other (a sweep, a SLURM array) each get a directory of their own.
    Checking for a free name first and creating it later let two runs share one."""
    stamp = (now or datetime.datetime.now()).strftime("%Y-%m-%d_%H-%M-%S")
    base = Path(log_root) / task / (f"{stamp}_{run_name}" if run_name else stamp)
    make_dirs(base.parent)
    for n in itertools.count():
        path = base if n == 0 else base.with_name(f"{base.name}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise cannot_write(path, exc) from exc
        return path
    raise AssertionError("unreachable")


def newest_run_dir(log_root: str, task: str) -> Path:
    """The newest run directory of `task` (by its timestamped name) that holds a checkpoint."""
    folder = Path(log_root) / task
    runs = sorted(p for p in folder.iterdir() if p.is_dir() and _STAMP.match(p.name)) if folder.is_dir() else []
    runs = [p for p in runs if (p / "checkpoints").is_dir() and any((p / "checkpoints").glob("model_*.pt"))]
    if not runs:
        raise UsageError(f"--resume True: no run of {task} with a checkpoint under {folder}")
    return runs[-1]


def newest_config(run_dir: Path) -> Path | None:
    """The config a run last ran with: its newest config.resume-<iteration>.yaml (each resume
    writes one), else the config.yaml it started with; None if it has neither."""
    resumes = sorted(run_dir.glob("config.resume-*.yaml"))  # zero-padded: by name is by iteration
    return next((p for p in [*reversed(resumes), run_dir / "config.yaml"] if p.is_file()), None)
