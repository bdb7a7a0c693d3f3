"""Shared helpers: run the console scripts as real processes (`run_cli`) or in-process (`run_main`)."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import json
import os
import resource
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

BIN = Path(sys.executable).parent


# A tiny CPU training run (16 envs x 16 steps, 2 minibatches), for tests that launch processes.
# Cartpole-Balance starts its observation normalisers from one warm-up rollout, whose env
# steps count in `env_steps` (a resume skips it).
WARM_UP = 1


def _pin_xdist_worker() -> None:
    """Under pytest-xdist with at least two CPUs per worker (`gpu_checks.sh tests`: -n 8 on a
    16-core GPU machine) each worker runs on its own share of the CPUs. A CPU run's update takes
    every core its process may use, so eight workers each taking all sixteen ran two CPU tests
    past their 240 s timeout there (H100, 2026-11-27); the runs follow the affinity set here.
    With one CPU per worker (`scripts/test.sh`: 2 workers on 2 cores) nothing is pinned: a
    2-rank test then gets both cores whenever the other worker waits, and pinning made the
    suite 843 s instead of 763 s (cold caches, Intel Xeon, 2026-11-28)."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not worker or not count or not hasattr(os, "sched_setaffinity"):
        return
    cpus, n, i = sorted(os.sched_getaffinity(0)), int(count), int(worker.removeprefix("gw"))
    if len(cpus) < 2 * n:
        return
    share = cpus[i * len(cpus) // n : (i + 1) * len(cpus) // n] or [cpus[i % len(cpus)]]
    os.sched_setaffinity(0, share)


_pin_xdist_worker()

DEVICE = os.environ.get("MJRL_TEST_DEVICE", "cpu")
"""Where the CLI runs of the tests train: the CPU, or with MJRL_TEST_DEVICE=cuda a GPU (the
switch `scripts/gpu_checks.sh` uses; every test passes on the CPU)."""

# "--device ..." comes first: a test that needs another device drops it with TINY_RUN[2:].
TINY_RUN = (
    "--device",
    DEVICE,
    "--logger",
    "none",
    "--env.num-envs",
    "16",
    "--runner.num-steps-per-env",
    "16",
    "--algorithm.num-mini-batches",
    "2",
)

# One GPU cannot host two NCCL ranks (`train` refuses it), so a two-rank run stays on the CPU
# unless there are GPUs for both ranks.
TWO_RANK_RUN = ("--device", DEVICE if DEVICE == "cpu" or torch.cuda.device_count() >= 2 else "cpu", *TINY_RUN[2:])


def run_cli(
    *args: str,
    cwd: Path | None = None,
    timeout: float = 300,
    env: dict | None = None,
    file_size_limit: int | None = None,
) -> subprocess.CompletedProcess:
    """Run `train`, `play` or `mjrl` from this environment's bin directory; with
    `file_size_limit`, no file it writes may grow beyond that many bytes (RLIMIT_FSIZE: a write
    past it fails with EFBIG, as on a full disk, for root too)."""
    command, *rest = args
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "WANDB_MODE": "offline", **(env or {})}

    def limit_file_size() -> None:
        if file_size_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    return subprocess.run(
        [str(BIN / command), *rest],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        preexec_fn=limit_file_size if file_size_limit is not None else None,
    )


@dataclasses.dataclass
class InProcessResult:
    """What `run_main` saw: the same fields as a finished subprocess."""

    returncode: int
    stdout: str
    stderr: str


CLI_MODULES = {"train": "mjrl.cli.train", "play": "mjrl.cli.play", "mjrl": "mjrl.cli.main"}


def run_main(*args: str) -> InProcessResult:
    """Run `train`, `play` or `mjrl` as `main(argv)` in this process, for commands where a
    subprocess adds nothing but its imports and kernel loading (5-6 s each): bad input, and
    single-process runs whose outputs a test reads. Signals, launchers, several ranks and
    environment variables need `run_cli`. What a run changes in the process (its SIGTERM and
    SIGINT handlers, torch's thread count) is put back afterwards."""
    import torch

    command, *rest = args
    main = importlib.import_module(CLI_MODULES[command]).main
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    threads = torch.get_num_threads()
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(rest)
            except SystemExit as exc:  # --help and tyro's own exits
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        torch.set_num_threads(threads)
    return InProcessResult(code, out.getvalue(), err.getvalue())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def last_json(stdout: str) -> dict:
    return json.loads([line for line in stdout.splitlines() if line.startswith("{")][-1])


def train_tiny(task: str, log_root: Path, *extra: str) -> Path:
    """A tiny in-process run of `task` (TINY_RUN, `extra` after it); its run directory."""
    result = run_main("train", task, *TINY_RUN, *extra, "--log-root", str(log_root))
    assert result.returncode == 0, result.stderr[-3000:]
    return Path(last_json(result.stdout)["run_dir"])


@pytest.fixture(scope="session")
def tiny_teacher(tmp_path_factory) -> str:
    """A teacher run directory for the distillation student (one tiny iteration of its task)."""
    run_dir = train_tiny(
        "Mjrl-Velocity-Flat-Quadruped", tmp_path_factory.mktemp("teacher"), "--runner.max-iterations", "1"
    )
    return str(run_dir)


@pytest.fixture
def log_root(tmp_path: Path) -> Path:
    return tmp_path / "logs"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With MJRL_TEST_FAILURES=PATH, each failure's report is appended to PATH as it happens:
    a run cut off by a deadline (the GPU window's tests phase) keeps what pytest's summary at
    the end would have said. Written by the controller alone under pytest-xdist."""
    path = os.environ.get("MJRL_TEST_FAILURES")
    if path and report.failed and "PYTEST_XDIST_WORKER" not in os.environ:
        with open(path, "a") as out:
            out.write(f"{report.nodeid} ({report.when})\n{report.longreprtext}\n\n")


def pytest_configure(config: pytest.Config) -> None:
    """With pytest-xdist's workers (`-n`), every process the tests start waits passively in
    OpenMP (`OMP_WAIT_POLICY=PASSIVE`, inherited by the workers, started after this, and by
    their runs). Two workers on two cores each run torch with two threads: libgomp's default
    spinning then burns the core the other worker needs. Unpinned with spinning the suite took
    1157 s and a watchdog saw a rank stall; passive, 763 s (cold caches, Intel Xeon, 2026-11-28).
    An explicit `OMP_WAIT_POLICY` wins."""
    if getattr(config.option, "numprocesses", None):
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `heavy` (the multi-process and compiling ones, each 25 s or more under two
    workers) start first, so that two workers do not end with one of them running a long test
    alone. The order within each kind is kept."""
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)
