"""Bad input gets one line on stderr, exit code 2, no traceback and no run directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

TASK = "Mjrl-Cartpole-Balance"


def assert_clean_usage_error(result, log_root: Path, *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("Warp CUDA")]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0]
    assert not log_root.exists() or not any(log_root.rglob("*")), list(log_root.rglob("*"))


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["Mjrl-Nope"], ["unknown task", TASK]),
        ([TASK, "--env.num-envs", "0"], ["--env.num-envs"]),
        (
            [TASK, "--env.num-envs", "10", "--agent.num-steps-per-env", "3", "--agent.num-mini-batches", "4"],
            ["--agent.num-mini-batches", "30"],
        ),
        ([TASK, "--preset", "nope"], ["unknown preset", "smoke"]),
        ([TASK, "--env.num-envs", "many"], ["many"]),
        ([TASK, "--resume", "True"], ["no run of", TASK]),
        ([TASK, "--device", "cuda:0"], ["--device"]),
    ],
)
def test_train_rejects_bad_input(args, needles, log_root):
    result = (
        run_cli("train", *args, "--log-root", str(log_root), "--device", "cpu", timeout=120)
        if ("--device" not in args)
        else run_cli("train", *args, "--log-root", str(log_root), timeout=120)
    )
    assert_clean_usage_error(result, log_root, *needles)


def test_train_rejects_a_config_file_with_an_unknown_key(tmp_path, log_root):
    """A saved config from an older mjrl (here with SimConfig's former `cuda_graph` flag) names
    the key and the valid ones instead of silently dropping it."""
    config = tmp_path / "config.yaml"
    config.write_text("env:\n  sim:\n    cuda_graph: true\n")
    result = run_cli("train", TASK, "--config", str(config), "--log-root", str(log_root), "--device", "cpu")
    assert_clean_usage_error(result, log_root, "'env.sim.cuda_graph'", "graph")


def test_play_rejects_missing_and_corrupt_checkpoints(tmp_path, log_root):
    missing = run_cli("play", TASK, "--checkpoint", str(tmp_path / "nope.pt"))
    assert_clean_usage_error(missing, log_root, "does not exist")
    corrupt = tmp_path / "model_000001.pt"
    corrupt.write_bytes(b"\x80\x02not a checkpoint at all")
    result = run_cli("play", TASK, "--checkpoint", str(corrupt))
    assert_clean_usage_error(result, log_root, "unreadable")


def test_unknown_task_is_rejected_by_play_and_listed_by_mjrl():
    result = run_cli("play", "Mjrl-Nope", "--checkpoint", "x.pt")
    assert result.returncode == 2 and "valid tasks" in result.stderr
    listing = run_cli("mjrl", "list")
    assert listing.returncode == 0
    assert TASK in listing.stdout and "Mjrl-Cartpole-Swingup" in listing.stdout
