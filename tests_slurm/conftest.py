"""A real two-node Slurm cluster on this machine (`scripts/slurm_cluster.sh`) and helpers to
submit mjrl's batch scripts to it and watch them.

The cluster needs root and Debian's Slurm packages (installed when missing). Where it cannot
start, the tests are skipped with the reason, except under CI (`CI=true`), where that fails
the run. Run with `bash scripts/test_slurm.sh` (`.ci/run` does, after the suite).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLUSTER_DIR = "/tmp/mjrl-slurm-tests"
MJRL = str(Path(sys.executable).with_name("mjrl"))
TASK = "Mjrl-Cartpole-Balance"


@pytest.fixture(scope="session", autouse=True)
def cluster() -> Iterator[None]:
    start = subprocess.run(
        ["bash", str(ROOT / "scripts/slurm_cluster.sh"), "start", CLUSTER_DIR, "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if start.returncode != 0:
        reason = (start.stderr.strip().splitlines() or [f"exit code {start.returncode}"])[-1]
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs the Slurm cluster: {reason}", pytrace=False)
        pytest.skip(reason)
    os.environ["SLURM_CONF"] = f"{CLUSTER_DIR}/slurm.conf"
    try:
        yield
    finally:
        subprocess.run(["bash", str(ROOT / "scripts/slurm_cluster.sh"), "stop", CLUSTER_DIR], capture_output=True)


def train_flags(root: Path, iterations: int, save_interval: int = 1000, logger: str = "none") -> list[str]:
    """A small training on both nodes: 16 envs per rank, periodic checkpoints rare enough that a
    checkpoint between them is a stop's."""
    return [
        "--env.num-envs", "16", "--logger", logger, "--log-root", str(root / "runs"),
        "--runner.max-iterations", str(iterations), "--runner.save-interval", str(save_interval),
    ]  # fmt: skip


def submit(folder: Path, *args: str) -> str:
    """`mjrl slurm TASK --nodes 2 --gpus-per-node 0 ARGS --submit True` from `folder`; the job id."""
    done = subprocess.run(
        [MJRL, "slurm", TASK, "--nodes", "2", "--gpus-per-node", "0", *args, "--submit", "True"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return re.search(r"submitted job (\d+)", done.stdout)[1]


def job(job_id: str) -> dict[str, str]:
    """Slurm's record of a job (`scontrol show job`), by field."""
    out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out))


def wait_for(what: str, condition: Callable[[], object], timeout_s: float) -> object:
    """Poll `condition` until it holds (returning its value) or fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")


def wait_until_ended(job_id: str, timeout_s: float) -> dict[str, str]:
    ended = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")
    return wait_for(f"job {job_id} to end", lambda: (r := job(job_id)).get("JobState") in ended and r, timeout_s)


def log_text(folder: Path, job_id: str) -> str:
    files = list((folder / "slurm-logs").glob(f"*-{job_id}.out"))
    return files[0].read_text(errors="replace") if files else ""


def run_dirs(folder: Path) -> list[Path]:
    return sorted((folder / "runs" / TASK).glob("20*"))


def logged_iterations(run_dir: Path) -> list[int]:
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line)["iteration"] for line in path.read_text().splitlines() if line.strip()]


def checkpoints(run_dir: Path) -> list[int]:
    return sorted(int(p.stem.split("_")[1]) for p in (run_dir / "checkpoints").glob("model_*.pt"))


def train_processes(node: str, job_id: str) -> list[int]:
    """Pids of the `train` launchers that job `job_id` runs on `node` (the nodes share this
    host: a process's SLURMD_NODENAME tells them apart). A launcher's child caught between fork
    and exec looks like its parent: it is left out."""
    parents: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
            parent = int((proc / "stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        launcher = any(part.endswith(b"/train") for part in cmdline[:2]) and b"--nnodes" in cmdline
        mine = f"SLURMD_NODENAME={node}".encode() in environ and f"SLURM_JOB_ID={job_id}".encode() in environ
        if launcher and mine:
            parents[int(proc.name)] = parent
    return [pid for pid, parent in parents.items() if parent not in parents]
