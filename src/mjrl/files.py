"""Files written whole or not at all: under a temporary name beside the target, renamed over it
once complete. A write the filesystem refuses becomes an `OutputError` naming the target, and
the temporary file is removed."""

from __future__ import annotations

import contextlib
import os
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
