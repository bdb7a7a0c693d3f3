"""Files written whole or not at all: under a temporary name beside the target, renamed over it
once complete. A write the filesystem refuses becomes an `OutputError` naming the target, and
the temporary file is removed."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from mjrl.errors import cannot_write


@contextlib.contextmanager
def atomic_target(path: Path, then: str = "run it again", suffix: str = "") -> Iterator[Path]:
    """A temporary path to write `path`'s new contents to (ending in `suffix`, for writers that
    choose a format by it); when the block ends, it replaces `path`."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp{suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as exc:
        raise cannot_write(path, exc, then) from exc
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: Path, text: str, then: str = "run it again") -> None:
    """`path.write_text(text)`, whole or not at all."""
    with atomic_target(path, then) as tmp:
        tmp.write_text(text)


def make_dirs(path: Path, then: str = "run it again") -> None:
    """`path.mkdir(parents=True, exist_ok=True)`; a refusal (a file in the way, no permission, a
    read-only or full filesystem) becomes an `OutputError` naming `path`."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise cannot_write(path, exc, then) from exc


def refuse_folder(path: Path, then: str = "run it again") -> None:
    """An `OutputError` when `path`, where a file is to be written, is a folder."""
    if path.is_dir():
        raise cannot_write(path, IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)), then)


def prepare_output_file(path: Path, then: str = "run it again") -> None:
    """Before a command's work, with nothing made: `path` is no folder, the nearest folder above
    it that exists takes files, and nothing but folders stands in the way (the writer makes the
    missing ones when it writes). Whatever the OS refuses is one `OutputError` now, not a
    traceback after the work."""
    refuse_folder(path, then)
    existing = path.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():  # a file where a folder must be: name it, not the path below it
        raise cannot_write(existing, NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR)), then)
    try:  # a folder that takes no file (read-only, immutable, full) says so now too
        fd, probe = tempfile.mkstemp(dir=existing, prefix=f".{path.name}.", suffix=".probe")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise cannot_write(path, exc, then) from exc
