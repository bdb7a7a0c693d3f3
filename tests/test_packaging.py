"""A non-editable install carries the tasks, their MJCF and the presets."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_ships_tasks_models_and_presets(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    names = set(zipfile.ZipFile(next(tmp_path.glob("mjrl-*.whl"))).namelist())
    for task_dir in (ROOT / "tasks").iterdir():
        for model in task_dir.glob("*.xml"):
            assert f"mjrl/tasks/{task_dir.name}/{model.name}" in names
        if (task_dir / "__init__.py").exists():
            assert f"mjrl/tasks/{task_dir.name}/__init__.py" in names
    for preset in (ROOT / "configs").glob("*.yaml"):
        assert f"mjrl/presets/{preset.name}" in names
    assert {"mjrl/cli/train.py", "mjrl/rl/ppo.py", "mjrl/sim/simulation.py"} <= names
