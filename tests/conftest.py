"""Shared helpers: run the installed console scripts as real processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


# A tiny CPU training run (16 envs x 16 steps, 2 minibatches), for tests that launch processes.
# Cartpole-Balance starts its observation normalisers from one warm-up rollout, whose env
# steps count in `env_steps` (a resume skips it).
WARM_UP = 1

# "--device cpu" comes first: a test that needs another device drops it with TINY_RUN[2:].
TINY_RUN = (
    "--device",
    "cpu",
    "--logger",
    "none",
    "--env.num-envs",
    "16",
    "--agent.num-steps-per-env",
    "16",
    "--agent.num-mini-batches",
    "2",
)


def run_cli(
    *args: str,
    cwd: Path | None = None,
    timeout: float = 300,
    env: dict | None = None,
) -> subprocess.CompletedProcess:
    """Run `train`, `play` or `mjrl` from this environment's bin directory."""
    command, *rest = args
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "WANDB_MODE": "offline", **(env or {})}
    return subprocess.run(
        [str(BIN / command), *rest], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def last_json(stdout: str) -> dict:
    return json.loads([line for line in stdout.splitlines() if line.startswith("{")][-1])


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def log_root(tmp_path: Path) -> Path:
    return tmp_path / "logs"
