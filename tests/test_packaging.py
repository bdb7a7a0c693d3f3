"""A non-editable install carries the tasks, their MJCF and the presets."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_ships_tasks_models_motions_and_presets(tmp_path):
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
        for model in [*task_dir.glob("*.xml"), *task_dir.glob("*.npz")]:
            assert f"mjrl/tasks/{task_dir.name}/{model.name}" in names
        if (task_dir / "__init__.py").exists():
            assert f"mjrl/tasks/{task_dir.name}/__init__.py" in names
    for preset in (ROOT / "configs").glob("*.yaml"):
        assert f"mjrl/presets/{preset.name}" in names
    assert {"mjrl/cli/train.py", "mjrl/rl/ppo.py", "mjrl/sim/simulation.py"} <= names


def test_a_training_run_imports_no_export_plot_or_video_package(tmp_path):
    """onnx, matplotlib and av cost start-up time and memory: only the commands that use them
    import them (export, plots, videos), never a plain training run."""
    code = (
        "import sys, json\n"
        "from mjrl.cli.train import main\n"
        f"code = main(['Mjrl-Cartpole-Balance', '--device', 'cpu', '--logger', 'none', '--env.num-envs', '16',"
        f" '--runner.max-iterations', '1', '--log-root', {str(tmp_path)!r}])\n"
        "heavy = sorted(m for m in ('onnx', 'matplotlib', 'av') if m in sys.modules)\n"
        "print(json.dumps({'code': code, 'heavy': heavy}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report == {"code": 0, "heavy": []}
