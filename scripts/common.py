"""What the benchmark scripts share: running `train` and `play`, reading a run's metrics, the
locomotion targets several benchmarks test, and writing a report into docs/benchmarks.md.

Scripts import helpers from here only, never from one another. The top imports only the standard
library and mjrl's metrics reader (`read_metrics`, torch-free); the rest of mjrl and torch are
imported inside the helpers that use them, so that a script that reads metrics starts no
simulator and the scripts keep the import order mjrl needs (mjrl.sim quiets Warp before
mujoco_warp starts it).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from mjrl.metrics_file import read_metrics

if TYPE_CHECKING:
    from mjrl.envs import Task
    from mjrl.runner.config import TrainConfig
    from mjrl.runner.runner import Runner

ROOT = Path(__file__).resolve().parent.parent
# mjrl's console scripts (train, play, mjrl) of the environment this script runs in, whatever PATH says.
BIN = Path(sys.executable).parent
# A training of milliseconds per iteration (16 envs x 16 steps, no logger), for the benchmarks that
# time the launcher or compare runs rather than learn.
TINY_CPU_RUN = ("--device", "cpu", "--logger", "none", "--env.num-envs", "16", "--runner.num-steps-per-env", "16",
                "--algorithm.num-mini-batches", "2")  # fmt: skip
TINY_SAC_RUN = (*TINY_CPU_RUN[:-2], "--algo", "sac", "--algorithm.batch-size", "64", "--algorithm.buffer-steps", "16")
"""`TINY_CPU_RUN` for SAC: its ring holds 16 steps of every env, a gradient step reads 64 windows."""

T = TypeVar("T")


# Commands


def train_command(task: str, *flags: str) -> list[str]:
    """The command line `train TASK FLAGS...`."""
    return [str(BIN / "train"), task, *flags]


def play_command(task: str, *flags: str) -> list[str]:
    """The command line `play TASK FLAGS...`."""
    return [str(BIN / "play"), task, *flags]


def last_json_line(output: str) -> dict:
    """The last line of a command's output that is a JSON object: `train` and `play` end with one."""
    return json.loads([line for line in output.splitlines() if line.startswith("{")][-1])


def play(task: str, episodes: int, source: list[str], commands: list[str], device: str = "cpu") -> dict:
    """`play`'s figures for a policy (`source`: `--run-dir RUN`, or `--zero-actions True`) under
    the `commands` flags."""
    return play_each([(task, source, commands)], episodes, device)[0]


def play_each(plays: list[tuple[str, list[str], list[str]]], episodes: int, device: str = "cpu") -> list[dict]:
    """`play`'s figures for each (task, source, commands) of `plays`, all evaluated by one
    process (`run_commands`)."""
    commands = [play_args(task, episodes, source, flags, device) for task, source, flags in plays]
    return [last_json_line(output) for output in run_commands(commands)]


def play_args(task: str, episodes: int, source: list[str], commands: list[str], device: str = "cpu") -> list[str]:
    """`run_commands`' command `play TASK SOURCE --episodes EPISODES --device DEVICE COMMANDS`."""
    return ["play", task, *source, "--episodes", str(episodes), "--device", device, *commands]


def episode_length(seconds: float | None) -> list[str]:
    """The `play` flags of episodes `seconds` long (a benchmark's try-out), none for the task's own."""
    return [] if seconds is None else ["--env.episode-length-s", f"{seconds:g}"]


CLI_MODULES = {"play": "mjrl.cli.play", "mjrl": "mjrl.cli.main"}
"""The console scripts `run_commands` runs, by the module whose `main(argv)` they call."""


def run_commands(commands: list[list[str]]) -> list[str]:
    """The printed output of each of `commands` (`["play", TASK, ...]`, `["mjrl", "export", ...]`),
    run one after another as `main(argv)` in one child process (this file run as a script).
    A process of its own pays mjrl's imports and kernel loading, 4-5 s of CPU, for each command;
    this one pays them once, and the script that asks keeps no simulator of its own. The first
    command that fails stops the rest: RuntimeError, with its output."""
    with tempfile.TemporaryDirectory() as tmp:
        outputs = Path(tmp) / "outputs.json"
        child = [sys.executable, __file__, str(outputs), json.dumps(commands)]
        result = subprocess.run(child, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
        return json.loads(outputs.read_text())


def _run_here(commands: list[list[str]], outputs: Path) -> int:
    """`run_commands`' child: each command's stdout captured (what mjrl's native libraries print
    goes to the process's own), all written to `outputs` once every command has succeeded."""
    import contextlib
    import importlib
    import io

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


def newest_run(log_root: Path, task: str, name: str = "") -> Path:
    """The newest run directory of `task` under `log_root` (of the runs named `name`, if given);
    FileNotFoundError before `train` has made one."""
    runs = sorted((log_root / task).glob(f"20*_{name}" if name else "20*"))
    if not runs:
        raise FileNotFoundError(f"no run of {task} under {log_root}")
    return runs[-1]


def parse_with_passthrough(parser: argparse.ArgumentParser) -> tuple[argparse.Namespace, list[str]]:
    """The script's own arguments, and those after `--`, which it passes on to `train` as they are."""
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    return parser.parse_args(argv[:split]), argv[split + 1 :]


def wait_for(condition: Callable[[], T | None], timeout: float = 300.0) -> T:
    """The first true value of `condition()`, polled until `timeout` s. A file not written yet, or
    cut short while being written, counts as not yet."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
        except (FileNotFoundError, StopIteration, ValueError):
            value = None
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError


def rank_pid(run_dir: Path, rank: int) -> int:
    """The newest process of `rank` (its log gains a line per attempt and per resume)."""
    text = (run_dir / "ranks" / f"rank_{rank}.log").read_text()
    return int(re.findall(rf"^rank {rank} pid (\d+) ", text, re.M)[-1])


# Metrics


TIMINGS = {"wall_s", "steps_per_second", "collection_s", "learning_s", "collective_s", "eval/seconds"}
"""The figures of metrics.jsonl that measure time: everything else is what a run learned."""


def learned_figures(run_dir: Path) -> list[dict]:
    """A run's metrics without its timings: equal between two runs exactly when they learned
    alike, bit for bit."""
    return [{k: v for k, v in row.items() if k not in TIMINGS} for row in read_metrics(run_dir)]


def cpu_training_rate(args: list[str], log_root: Path, iterations: int) -> float:
    """Median env steps/s of a short CPU training (`train *args`, the task first) from iteration 3
    on: the first two include the kernels' warm-up."""
    command = train_command(*args, "--device", "cpu", "--logger", "none", "--log-root", str(log_root))
    command += ["--runner.max-iterations", str(iterations), "--runner.eval-interval", "0"]
    subprocess.run(command, check=True, capture_output=True)
    lines = read_metrics(newest_run(log_root, args[0]))
    return statistics.median(line["steps_per_second"] for line in lines[2:])


def scene_build_s(task_name: str) -> float:
    """Seconds to compose the task's robot and ground (a terrain grid is generated here) into
    one model and compile it."""
    from mjrl.tasks import load_task

    task = load_task(task_name)
    scene = task.build(task.env_cfg).scene
    start = time.perf_counter()
    scene.build()
    return time.perf_counter() - start


# Training in this process


def train_config(
    task: Task,
    num_envs: int,
    iterations: int,
    log_root: str,
    device: str,
    cuda_graphs: str = "off",
    precision: str = "fp32",
    compile_: str = "off",
) -> TrainConfig:
    """The task's training config for a benchmark: no checkpoints, evaluations or logger."""
    from mjrl.runner.config import TrainConfig

    defaults = TrainConfig.for_task(task)
    return dataclasses.replace(
        defaults,
        env=dataclasses.replace(task.env_cfg, num_envs=num_envs),
        runner=dataclasses.replace(
            defaults.runner,
            max_iterations=iterations,
            save_interval=10**6,
            eval_interval=0,
            cuda_graphs=cuda_graphs,
            compile=compile_,
        ),
        policy=dataclasses.replace(defaults.policy, precision=precision),
        device=device,
        logger="none",
        log_root=log_root,
    )


def build_runner(task: Task, cfg: TrainConfig) -> Runner:
    """A runner built by `train`'s own `build_run` (one process, a run directory under
    `cfg.log_root`), after one rollout and update: kernels compiled, physics captured,
    allocator warm."""
    from mjrl.distributed.context import single_process
    from mjrl.runner.start import build_run

    runner = build_run(task, cfg, single_process(cfg.device))
    runner.collect()
    runner.algorithm.update()
    return runner


# What counts as walking: the targets of bench_locomotion.py, which bench_seeds.py trains to and
# bench_terrain.py and bench_distillation.py take their forward commands from.

GO1 = "Mjrl-Velocity-Flat-Quadruped"
HUMANOID = "Mjrl-Velocity-Flat-Humanoid"
NO_LIMIT = math.inf
Target = tuple[str, str, float, float]


@dataclasses.dataclass(frozen=True)
class Profile:
    """How a robot is trained on the CPU and what counts as walking: the issue's definition."""

    preset: str | None
    """The config preset the task trains with on the CPU (None: the task's own defaults)."""
    forward: tuple[float, float]
    """Range of the forward commands (m/s) of the "forward" setting (no lateral or yaw command)."""
    targets: tuple[Target, ...]
    """(command setting, figure, lowest and largest allowed value). Settings: "forward", "full"
    (the task's own command distribution), both with the training's pushes, and "zero" (told to
    stand, without pushes: how far the robot drifts by itself)."""
    reported: tuple[str, ...] = ()
    """Command settings reported beside the targets' without a target of their own: "forward,
    no pushes" (the forward setting as Isaac Lab's and mjlab's play configs run it)."""

    def settings(self) -> dict[str, list[str]]:
        """The command settings the targets use and those reported, each with its `play` flags."""
        low, high = self.forward
        no_pushes = ["--env.randomization.push-velocity", "0"]
        flags = {
            "forward": ["--env.commands.lin-vel-x", str(low), str(high)],
            "forward, no pushes": ["--env.commands.lin-vel-x", str(low), str(high), *no_pushes],
            "full": [],
            "zero": ["--env.commands.lin-vel-x", "0", "0", *no_pushes],
        }
        still = ["--env.commands.lin-vel-y", "0", "0", "--env.commands.yaw-rate", "0", "0"]
        used = {cmds for cmds, *_ in self.targets} | set(self.reported)
        return {cmds: f + (still if cmds != "full" else []) for cmds, f in flags.items() if cmds in used}


QUADRUPED_PROFILE = Profile(
    "cpu-locomotion",
    (0.5, 1.0),
    (
        ("forward", "mean_lin_vel_error", -NO_LIMIT, 0.20),
        ("forward", "early_termination_rate", -NO_LIMIT, 0.0),
        ("full", "mean_lin_vel_error", -NO_LIMIT, 0.30),
        ("full", "mean_yaw_rate_error", -NO_LIMIT, 0.40),
        ("full", "early_termination_rate", -NO_LIMIT, 0.05),
    ),
)
PROFILES = {
    HUMANOID: Profile(
        "cpu-humanoid",
        (0.3, 0.8),
        (
            ("forward", "mean_lin_vel_error", -NO_LIMIT, 0.15),
            ("forward", "mean_yaw_rate_error", -NO_LIMIT, 0.20),
            ("forward", "early_termination_rate", -NO_LIMIT, 0.0),
            # A real gait: each foot down 35-75 % of the time, swings of at least 0.25 s.
            *(
                check
                for foot in ("left_foot", "right_foot")
                for check in (
                    ("forward", f"mean_foot_contact_fraction/{foot}", 0.35, 0.75),
                    ("forward", f"mean_swing_time/{foot}", 0.25, NO_LIMIT),
                )
            ),
            ("full", "early_termination_rate", -NO_LIMIT, 0.05),
            # Told to stand: no falls, and the base ends at most 0.2 m from where it began.
            ("zero", "early_termination_rate", -NO_LIMIT, 0.0),
            ("zero", "mean_displacement", -NO_LIMIT, 0.2),
        ),
        # The humanoid is pushed every 1-3 s (the quadrupeds every 8-12 s): what that costs
        # its tracking.
        reported=("forward, no pushes",),
    ),
    # The cart-poles: a return of 900 of the 1,000 a perfect episode earns (the quick start's
    # promise for Balance); Swingup's PPO ends its default budget at 700-730.
    "Mjrl-Cartpole-Balance": Profile(None, (0.0, 0.0), (("full", "mean_return", 900.0, NO_LIMIT),)),
    "Mjrl-Cartpole-Swingup": Profile(None, (0.0, 0.0), (("full", "mean_return", 700.0, NO_LIMIT),)),
}


def profile(task: str) -> Profile:
    """The task's profile: its own, else the quadrupeds'."""
    return PROFILES.get(task, QUADRUPED_PROFILE)


def full_set_targets(targets: tuple[Target, ...]) -> list[Target]:
    """The targets of the full command distribution, the only ones the periodic evaluation sees."""
    return [target for target in targets if target[0] == "full"]


def first_eval_meeting_targets(lines: list[dict], targets: tuple[Target, ...]) -> dict | None:
    """The first periodic evaluation (full command distribution) within the full-set targets."""
    full = full_set_targets(targets)
    for line in lines:
        if any(f"eval/{figure}" not in line for _, figure, *_ in full):
            continue
        ok = all(low <= line[f"eval/{figure}"] <= high for _, figure, low, high in full)
        if ok:
            return line
    return None


# Reports in docs/benchmarks.md


def cpu_run_line(task: str, run_dir: Path, last: dict) -> str:
    """A report's first line: the machine, the date, torch, and the run up to its `last` iteration."""
    import torch

    return (
        f"Device: CPU ({platform.processor() or platform.machine()}), {torch.get_num_threads()} threads; "
        f"{datetime.date.today()}; torch {torch.__version__}. `{task}`, run `{run_dir.name}`, "
        f"{last['iteration'] + 1} iterations, {last['env_steps'] / 1e6:.1f} M env steps, "
        f"{last['wall_s'] / 60:.0f} min of training ({last['env_steps'] / last['wall_s']:.0f} env steps/s)."
    )


def replace_section(markers: tuple[str, str], heading: str, text: str) -> None:
    """Put `text` between the markers in docs/benchmarks.md, or append it under a new heading."""
    path = ROOT / "docs/benchmarks.md"
    doc = path.read_text()
    begin, end = markers
    section = f"{begin}\n{text}\n{end}"
    if begin in doc:
        head, rest = doc.split(begin, 1)
        doc = head + section + rest.split(end, 1)[1]
    else:
        doc += f"\n## {heading}\n\n{section}\n"
    path.write_text(doc)


if __name__ == "__main__":  # `run_commands`' child: OUTPUTS_FILE COMMANDS_JSON
    sys.exit(_run_here(json.loads(sys.argv[2]), Path(sys.argv[1])))
