"""mjrl's console commands driven from Python, as a benchmark or a sweep drives them: the command
lines of this environment's own `train` and `play` (whatever PATH says), the run directory a
training made, the JSON line a command ends with, and several `play`/`mjrl` commands run in one
child process (`run_commands`), which pays mjrl's imports and kernel loading once.

Nothing here imports torch or the simulator: the caller keeps none of its own."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

BIN = Path(sys.executable).parent
"""The console scripts (train, play, mjrl) of the environment this interpreter runs in."""
CLI_MODULES = {"play": "mjrl.cli.play", "mjrl": "mjrl.cli.main"}
"""The commands `run_commands` runs, by the module whose `main(argv)` they call."""


def train_command(task: str, *flags: str) -> list[str]:
    """The command line `train TASK FLAGS...`."""
    return [str(BIN / "train"), task, *flags]


def play_command(task: str, *flags: str) -> list[str]:
    """The command line `play TASK FLAGS...`."""
    return [str(BIN / "play"), task, *flags]


def last_json_line(output: str) -> dict:
    """The last line of a command's output that is a JSON object: `train` and `play` end with one."""
    return json.loads([line for line in output.splitlines() if line.startswith("{")][-1])


def newest_run(log_root: Path, task: str, name: str = "") -> Path:
    """The newest run directory of `task` under `log_root` (of the runs named `name`, if given);
    FileNotFoundError before `train` has made one."""
    runs = sorted((log_root / task).glob(f"20*_{name}" if name else "20*"))
    if not runs:
        raise FileNotFoundError(f"no run of {task} under {log_root}")
    return runs[-1]


def run_commands(commands: list[list[str]]) -> list[str]:
    """The printed output of each of `commands` (`["play", TASK, ...]`, `["mjrl", "export", ...]`),
    run one after another as `main(argv)` in one child process. The first that fails stops the
    rest: RuntimeError, with its output."""
    with tempfile.TemporaryDirectory() as tmp:
        outputs = Path(tmp) / "outputs.json"
        child = [sys.executable, "-m", __name__, str(outputs), json.dumps(commands)]
        result = subprocess.run(child, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
        return json.loads(outputs.read_text())


def _run_here(commands: list[list[str]], outputs: Path) -> int:
    """`run_commands`' child: each command's stdout captured (what native libraries print goes to
    the process's own), all written to `outputs` once every command has succeeded."""
    printed = []
    for name, *argv in commands:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = importlib.import_module(CLI_MODULES[name]).main(argv)
        print(out.getvalue(), end="")
        if code:
            print(f"`{name} {' '.join(argv)}` exited with {code}", file=sys.stderr)
            return code
        printed.append(out.getvalue())
    outputs.write_text(json.dumps(printed))
    return 0


if __name__ == "__main__":  # `run_commands`' child: OUTPUTS_FILE COMMANDS_JSON
    sys.exit(_run_here(json.loads(sys.argv[2]), Path(sys.argv[1])))
