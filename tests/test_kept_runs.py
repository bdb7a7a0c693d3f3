"""The trained runs kept with the project (`runs/`, rule in runs/README.md) stay small and portable:
their config files name no path of the machine that trained them, so they play and resume on
any machine without a note, and the folder stays within its size bound."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from mjrl.checkpoint import load_checkpoint
from mjrl.envs.robot import robot_file

RUNS = Path(__file__).resolve().parent.parent / "runs"
SIZE_BOUND_MB = 50  # runs/README.md: what a clone of the project carries in kept runs


def _strings(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def test_no_kept_config_names_a_path_of_the_training_machine(capsys):
    configs = sorted(RUNS.glob("*/config*.yaml"))
    assert configs, "runs/ keeps no run"
    for config in configs:
        data = yaml.safe_load(config.read_text())
        absolute = [s for s in _strings(data) if s.startswith("/")]
        assert not absolute, f"{config.relative_to(RUNS)} names {absolute}: name mjrl's robots mjrl:NAME"
        mjcf = data["env"]["robot"]["mjcf"] if "robot" in data.get("env", {}) else None
        if mjcf is not None:
            assert robot_file(mjcf).is_file(), f"{config}: {mjcf} is no robot here"
    assert capsys.readouterr().err == ""  # no note about a missing file


def test_no_kept_checkpoint_names_a_path_of_the_training_machine():
    """`play --run-dir` reads the config inside the checkpoint, not the YAML files beside it."""
    checkpoints = sorted(RUNS.glob("*/checkpoints/*.pt"))
    assert checkpoints, "runs/ keeps no checkpoint"
    for checkpoint in checkpoints:
        absolute = [s for s in _strings(load_checkpoint(checkpoint)["config"]) if s.startswith("/")]
        assert not absolute, f"{checkpoint.relative_to(RUNS)} names {absolute} in its config"


def test_the_kept_runs_stay_within_their_size_bound():
    listed = subprocess.run(["git", "ls-files", "-z", "runs"], cwd=RUNS.parent, capture_output=True, check=True)
    files = [RUNS.parent / name for name in listed.stdout.decode().split("\0") if name]
    total = sum(path.stat().st_size for path in files if path.exists())
    assert total <= SIZE_BOUND_MB * 1e6, f"runs/ holds {total / 1e6:.1f} MB, more than its {SIZE_BOUND_MB} MB"
