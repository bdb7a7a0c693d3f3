"""An output path the OS refuses, for any reason it gives, gets one line and exit code 2 from every
command that writes one (`train --log-root`, `play --video`, `mjrl export --out`, `mjrl plot
--out`), before the command's work, and leaves nothing behind. Causes made for real as root: a
parent that is a regular file, a path that is a folder, an immutable folder (`chattr +i`, which
root cannot write either). A full disk or a file-size limit: `test_full_disk.py`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import TINY_RUN, run_main, train_tiny

TASK = "Mjrl-Cartpole-Balance"


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    return train_tiny(TASK, tmp_path_factory.mktemp("trained"), "--runner.max-iterations", "1")


def _command(name: str, target: Path, run_dir: Path) -> list[str]:
    """The command writing to `target` (a file named inside it when `target` stands for a folder)."""
    inside = target.name == "x"
    file = {"play": "clip.mp4", "export": "p.onnx", "plot": "p.png"}.get(name, "")
    out = str(target / file if inside else target)
    return {
        "train": ["train", TASK, *TINY_RUN, "--runner.max-iterations", "1", "--log-root", str(target)],
        "play": ["play", TASK, "--run-dir", str(run_dir), "--video", out],
        "export": ["mjrl", "export", TASK, "--run-dir", str(run_dir), "--out", out],
        "plot": ["mjrl", "plot", str(run_dir), "--out", out],
    }[name]


def _target(cause: str, command: str, where: Path) -> tuple[Path, str]:
    """The output path for `cause`, made for real under `where`, and what the line must say."""
    if cause == "file_parent":
        (where / "afile").write_text("")
        return where / "afile" / "x", "a file stands where a folder must be"
    if cause == "directory":
        if command == "train":  # a log root is a folder: its task folder is a file instead
            (where / "logs").mkdir()
            (where / "logs" / TASK).write_text("")
            return where / "logs", "a file stands where a folder must be"
        suffix = {"play": ".mp4", "export": ".onnx", "plot": ".png"}[command]
        (where / f"out{suffix}").mkdir()
        return where / f"out{suffix}", "a folder stands where the file must be"
    locked = where / "locked"
    locked.mkdir()
    subprocess.run(["chattr", "+i", str(locked)], check=True)
    return locked / "x" if command != "train" else locked, "fix the permissions or choose another path"


@pytest.mark.parametrize("cause", ["file_parent", "directory", "immutable"])
@pytest.mark.parametrize("command", ["train", "play", "export", "plot"])
def test_an_output_path_the_os_refuses_gets_one_line(command, cause, trained_run, tmp_path):
    where = tmp_path / "out"
    where.mkdir()
    target, says = _target(cause, command, where)
    before = sorted(where.rglob("*"))
    try:
        result = run_main(*_command(command, target, trained_run))
        after = sorted(where.rglob("*"))
    finally:
        subprocess.run(["chattr", "-R", "-i", str(where)], check=True)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "cannot write " in lines[0] and says in lines[0], lines[0]
    assert after == before  # nothing made, not even an empty folder
