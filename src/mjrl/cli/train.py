"""`train TASK [--preset NAME] [--config RUN/config.yaml] [flags]`: train a policy with PPO."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mjrl.cli.common import load_preset, parse_flags, pop_option, preset_names, read_yaml, run_command
from mjrl.errors import UsageError

if TYPE_CHECKING:
    from mjrl.envs import Task
    from mjrl.runner.config import TrainConfig

USAGE = """usage: train TASK [--preset NAME] [--config FILE] [flags]

Train a policy with PPO on MuJoCo-Warp worlds. `train TASK --help` lists every flag.

tasks:
{tasks}

presets (configs/): {presets}
--config FILE feeds a run's own config.yaml back in, to reproduce that run.
"""


def parse_train_args(argv: list[str]) -> tuple[Task, TrainConfig]:
    """argv -> (task, TrainConfig). Order of precedence: task defaults < --preset < --config < flags."""
    from mjrl.tasks import describe_tasks, load_task

    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE.format(tasks=describe_tasks(), presets=", ".join(preset_names())))
        raise SystemExit(0 if args else 2)
    preset = pop_option(args, "--preset")
    config_file = pop_option(args, "--config")
    saved = read_yaml(Path(config_file), "config file") if config_file else None
    if args and not args[0].startswith("-"):
        task_name = args.pop(0)
    elif saved is not None and "task" in saved:
        task_name = saved["task"]
    else:
        raise UsageError("the first argument must be a task name; `train --help` lists them")
    task = load_task(task_name)

    from mjrl.config import apply_dict
    from mjrl.runner.config import TrainConfig

    cfg = TrainConfig.for_task(task)
    if preset is not None:
        cfg = apply_dict(cfg, load_preset(preset))
    if saved is not None:
        saved_task = saved.pop("task", task_name)
        if saved_task != task_name:
            raise UsageError(f"--config {config_file} is a config of {saved_task}, not {task_name}")
        cfg = apply_dict(cfg, saved)
    cfg = parse_flags(TrainConfig[type(task.env_cfg)], cfg, args, f"train {task_name}", f"Train {task_name} with PPO.")
    return task, cfg


def _train(argv: list[str]) -> int:
    from mjrl.runner.job import run_job
    from mjrl.tasks import load_task

    task, cfg = parse_train_args(argv)
    return run_job(task, cfg, load_task)


def main(argv: list[str] | None = None) -> int:
    return run_command("train", _train, argv)


if __name__ == "__main__":
    sys.exit(main())
