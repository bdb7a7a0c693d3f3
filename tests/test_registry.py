"""Tasks register themselves: each task package in its `registry` module, anything else (this
test, a user's script) with `register_task`; no central list to edit."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TINY_RUN, last_json, run_main

import mjrl.tasks
from mjrl.tasks import load_task, register_task, task_names


def test_listing_the_tasks_imports_no_simulator():
    """`train --help` and an unknown task's refusal list the tasks: cheaply."""
    code = ("import sys; from mjrl.tasks import describe_tasks; assert 'Humanoid' in describe_tasks(); "
            "print(sorted(m for m in ('torch', 'mujoco', 'warp', 'mujoco_warp') if m in sys.modules))")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_every_task_package_registers_its_tasks():
    tasks_dir = Path(mjrl.tasks.__file__).parent
    packages = sorted(p.name for p in tasks_dir.iterdir() if (p / "registry.py").exists())
    assert packages == ["cartpole", "tracking", "velocity"]
    names = task_names()
    assert {"Mjrl-Cartpole-Balance", "Mjrl-Velocity-Rough-Quadruped", "Mjrl-Tracking-Flat-Humanoid"} <= set(names)
    for name in names:  # each entry names a task that exists under that name
        assert load_task(name).name == name


def test_a_task_registered_from_outside_the_package_trains(tmp_path):
    balance = load_task("Mjrl-Cartpole-Balance")
    task = dataclasses.replace(balance, name="Test-Registered-Balance")
    register_task(task.name, task, "the balance task under another name, registered by a test")
    register_task(task.name, task, "the balance task under another name, registered by a test")  # again: a no-op
    with pytest.raises(ValueError, match="already registered"):
        register_task(task.name, balance, "another task under a taken name")
    assert task.name in task_names()
    result = run_main("train", task.name, *TINY_RUN, "--runner.max-iterations", "2", "--log-root", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    assert Path(last_json(result.stdout)["run_dir"]).parent == tmp_path / task.name
