"""Checkpoints: written atomically, loaded with weights_only=True, newest valid one found, checked
against the task and the networks they are loaded into.

The format (`FORMAT`): a dict of plain values and tensors with the keys
- format: this number; task; iteration, env_steps, wall_s (the run's counters); wandb_id;
- the algorithm's entries (`Algorithm.state_dict`; PPO: policy, optimizer, learning_rate;
  distillation adds teacher; play and export read policy);
- rng: torch, env, algorithm and, on a GPU, cuda (`runner.state.RngStates`);
- config (the run's config, as `mjrl.config.to_dict` makes it); obs_dims, num_actions;
- env_ranks: every rank's `VecEnv.resume_state()`, by rank.
`runner/state.py` writes them and `runner/resume.py` takes them back; older formats are read
through `mjrl.compat.upgrade_checkpoint`.

Beside them, `bulk_<iteration>.pt` holds an algorithm's state too bulky for every checkpoint
(`Algorithm.bulk_state`: a replay buffer): only the newest is kept, and a resume reads the one
of its checkpoint when it is there.
"""

from __future__ import annotations

import io
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from mjrl.compat import upgrade_checkpoint
from mjrl.errors import RESUME_HINT, UsageError, cannot_write
from mjrl.files import atomic_target

FORMAT = 2
"""The checkpoint format this version writes (see the module's docstring; `mjrl.compat` has
what earlier formats held)."""

_NAME = re.compile(r"^model_(\d+)\.pt$")


def checkpoint_path(run_dir: Path, iteration: int) -> Path:
    return run_dir / "checkpoints" / f"model_{iteration:06d}.pt"


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write to a temporary file in the same directory, fsync, then rename over `path`: a crash
    at any moment leaves either the old file or the complete new one. A write the filesystem
    refuses (full, read-only, over a limit) removes the temporary file and raises an
    `OutputError` naming `path`; the previous checkpoints are untouched. The file gets the mode
    of any new file under the process's umask (readable by others where the umask allows)."""
    # Serialised in memory first: torch.save writing to a file turns a refused write (EFBIG,
    # ENOSPC) into a RuntimeError about zip positions, with neither the path nor the cause.
    buffer = io.BytesIO()
    torch.save(state, buffer)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_target(path, RESUME_HINT) as tmp, tmp.open("wb") as f:
            f.write(buffer.getbuffer())
            f.flush()
            os.fsync(f.fileno())
        # The rename is durable only once the directory itself is on disk.
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise cannot_write(path, exc, RESUME_HINT) from exc


def remove_stale_temporaries(run_dir: Path) -> None:
    """Delete the temporary files of saves that were killed midway (`.model_*.tmp`,
    `.bulk_*.tmp`): only rank 0 of the run's one job writes there, and it calls this before its
    first save."""
    folder = run_dir / "checkpoints"
    if folder.is_dir():
        for pattern in (".model_*.tmp", ".bulk_*.tmp"):
            for tmp in folder.glob(pattern):
                tmp.unlink(missing_ok=True)


def bulk_path(checkpoint: Path) -> Path:
    """The bulky-state file that goes with `checkpoint` (`model_000050.pt` -> `bulk_000050.pt`)."""
    return checkpoint.with_name("bulk_" + checkpoint.name.removeprefix("model_"))


def save_bulk_state(checkpoint: Path, state: dict[str, Any]) -> Path:
    """Write `state` beside `checkpoint` (atomically, as a checkpoint), then delete the bulky
    state of older checkpoints: it is large, and only the newest is resumed from."""
    path = bulk_path(checkpoint)
    save_checkpoint(path, state)
    for old in path.parent.glob("bulk_*.pt"):
        if old != path:
            old.unlink(missing_ok=True)
    return path


def load_bulk_state(checkpoint: Path, map_location: str | torch.device = "cpu") -> dict[str, Any] | None:
    """The bulky state saved with `checkpoint`, or None when there is none (not saved, or
    saved with a newer checkpoint only). A damaged file is a usage error naming it."""
    path = bulk_path(checkpoint)
    if not path.is_file():
        return None
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch raises many types for a damaged file
        raise UsageError(f"{path} is unreadable ({type(exc).__name__}); delete it to resume without it") from exc
    if not isinstance(state, dict):
        raise UsageError(f"{path} is not an algorithm's bulky state; delete it to resume without it")
    return state


OTHER_CHECKPOINT = "give another model_*.pt"  # what a user who named this file can do about it


def load_checkpoint(
    path: Path, map_location: str | torch.device = "cpu", fix: str = OTHER_CHECKPOINT
) -> dict[str, Any]:
    """Load a checkpoint; a missing or unreadable file is a UsageError naming it (and `fix`, what
    to do instead, where the file is unusable)."""
    if path.is_dir():
        raise UsageError(f"checkpoint {path} is a directory: give a model_*.pt file, or the run with --run-dir")
    if not path.is_file():
        raise UsageError(f"checkpoint {path} does not exist")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch raises many types for a damaged file
        raise UsageError(
            f"checkpoint {path} is unreadable ({type(exc).__name__}): damaged, or not a checkpoint{fix and '; '}{fix}"
        ) from exc
    if not isinstance(state, dict) or "policy" not in state or "iteration" not in state:
        raise UsageError(f"{path} is not an mjrl checkpoint{fix and '; '}{fix}")
    if state.get("format", 1) > FORMAT:
        raise UsageError(
            f"{path} has checkpoint format {state['format']}, newer than this mjrl reads ({FORMAT}): upgrade mjrl"
        )
    return upgrade_checkpoint(state)


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Checkpoints of a run, oldest first."""
    folder = run_dir / "checkpoints"
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def load_newest_checkpoint(run_dir: Path, map_location: str | torch.device = "cpu") -> tuple[Path, dict]:
    """The newest checkpoint of `run_dir` that loads; damaged newer ones are skipped with a warning."""
    candidates = list_checkpoints(run_dir)
    if not candidates:
        raise UsageError(f"run directory {run_dir} has no checkpoints to resume from")
    for path in reversed(candidates):
        try:
            return path, load_checkpoint(path, map_location, fix="")  # an older one is taken instead
        except UsageError as exc:
            print(f"warning: skipping {exc}", file=sys.stderr)
    raise UsageError(f"no readable checkpoint in {run_dir / 'checkpoints'}")


def check_task(state: dict, task_name: str, source: Path) -> None:
    """A checkpoint of another task is a usage error."""
    if state.get("task") != task_name:
        raise UsageError(f"checkpoint {source} belongs to task {state.get('task')!r}, not {task_name!r}")


def load_weights(load: Callable[[], None], source: Path) -> None:
    """Run `load` (a `load_state_dict` of the checkpoint's weights); a checkpoint whose weights
    do not fit the configured networks is a usage error that names the first mismatch."""
    try:
        load()
    except RuntimeError as exc:
        why = "different observation, action or layer sizes"
        if "memories." in str(exc):  # a recurrent policy's (`mjrl.rl.recurrent`)
            why = "a different recurrent memory, --policy.rnn-*"
        raise UsageError(
            f"checkpoint {source} does not fit this task's policy ({why}): "
            f"{str(exc).splitlines()[1].strip() if len(str(exc).splitlines()) > 1 else exc}"
        ) from exc
