"""`train TASK [--algo NAME] [--preset NAME] [--config RUN/config.yaml] [flags]`: train a policy."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mjrl.cli.common import load_preset, parse_flags, peek_option, preset_names, read_yaml, run_command
from mjrl.cli.flags import moved_distillation_flags
from mjrl.compat import upgrade_config
from mjrl.errors import UsageError
from mjrl.plugins import import_plugins, read_plugins, spelled_out

if TYPE_CHECKING:
    from mjrl.envs import Task
    from mjrl.runner.config import TrainConfig
    from mjrl.runner.resume import ResumeTarget

USAGE = """usage: train TASK [--algo NAME] [--plugins MODULE ...] [--preset NAME] [--config FILE] [flags]

Train a policy on MuJoCo-Warp worlds (PPO unless --algo says otherwise). `train TASK --help`
lists every flag.

tasks:
{tasks}

algorithms (--algo):
{algorithms}

presets (configs/): {presets}
--plugins MODULE ... imports modules that register tasks, algorithms or terrain types.
--config FILE feeds a run's own config.yaml back in, to reproduce that run.
--resume True / --resume-dir RUN continue a run as it last trained; flags change it.
"""


def parse_train_args(argv: list[str]) -> tuple[Task, TrainConfig]:
    """argv -> (task, TrainConfig), in one pass of the flag parser over every flag. Order of
    precedence: task defaults < the resumed run's own config (when resuming) < --preset <
    --config < flags. What composes the defaults (--plugins, --preset, --config, --algo, and
    which run a resume continues) is read from argv first and left there: the parser reads it
    again with the rest, so `train TASK --help` documents it and a malformed value is refused
    by the same rules as any flag. The defaults are composed once."""
    from mjrl.rl.registry import describe_algorithms
    from mjrl.tasks import describe_tasks, load_task

    args = list(argv)
    plugins = read_plugins(args)
    import_plugins(plugins)
    preset, config_file = peek_option(args, "--preset"), peek_option(args, "--config")
    first = _after_composing(args)  # the task's name, or help
    if (first == len(args) and not config_file) or args[first : first + 1] in (["-h"], ["--help"]):
        print(USAGE.format(tasks=describe_tasks(), algorithms=describe_algorithms(), presets=", ".join(preset_names())))
        raise SystemExit(0 if first < len(args) else 2)
    # The algorithm types the --algorithm.* section, so it is known before the flags are parsed.
    given = peek_option(args, "--algo")
    algo, former_distillation = moved_distillation_flags(args, given)
    chosen_by = "--distillation.teacher" if former_distillation and given is None else f"--algo {algo}"
    saved = upgrade_config(read_yaml(Path(config_file), "config file")) if config_file else None
    if saved is not None:
        plugins = _merged(saved.get("plugins", ()), plugins)
        import_plugins(plugins)
    task_name = _pop_task_name(args, first, saved)
    task = load_task(task_name)
    saved_task = saved.pop("task", task_name) if saved is not None else task_name
    if saved_task != task_name:
        raise UsageError(f"--config {config_file} is a config of {saved_task}, not {task_name}")
    preset_values = load_preset(preset) if preset else None
    if former_distillation and preset_values and preset_values.pop("algorithm", None) is not None:
        print(f"note: --preset {preset}'s algorithm settings are PPO's, which distillation ignored: dropped",
              file=sys.stderr)  # fmt: skip
    from mjrl.runner.resume import resumed_run_config_file

    run_config = resumed_run_config_file(task_name, _resume_target(args, preset_values, saved))
    given_algo = algo or (saved or {}).get("algo") or (preset_values or {}).get("algo")
    base = _defaults(task, given_algo, run_config, task_name, chosen_by)
    if run_config is not None:
        plugins = _merged(base.plugins, plugins)
    cfg = _compose(task_name, base, preset_values, saved, spelled_out(args), plugins, algo)
    if run_config is not None:
        _check_same_teacher(getattr(base.algorithm, "teacher", ""), getattr(cfg.algorithm, "teacher", ""))
    return task, cfg


COMPOSING = {"--plugins": "+", "--preset": "1", "--config": "1", "--algo": "1"}
"""The flags that compose the defaults, which may come before the task's name, with how many
values each takes ("+": up to the next flag, so before the task's name plugins are written
`--plugins=A,B`)."""


def _pop_task_name(args: list[str], i: int, saved: dict | None) -> str:
    """The task's name, removed from args: `args[i]`, the first argument after the composing
    flags (or, without one, the task of the --config file). A former flag rewritten since `i`
    was found stands after it: only composing flags come before."""
    if i < len(args) and not args[i].startswith("-"):
        return args.pop(i)
    if saved is not None and "task" in saved:
        return saved["task"]
    raise UsageError("the first argument must be a task name; `train --help` lists them")


def _after_composing(args: list[str]) -> int:
    """The index of the first argument that is neither a composing flag nor one of its values."""
    i = 0
    while i < len(args):
        name, joined = args[i].partition("=")[0], "=" in args[i]
        if name not in COMPOSING:
            return i
        i += 1
        if joined:
            continue
        if COMPOSING[name] == "1":
            i += 1
        else:
            while i < len(args) and not args[i].startswith("-"):
                i += 1
    return i


def _resume_target(args: list[str], *files: dict | None) -> ResumeTarget:
    """Which run a resume continues: `--resume`, `--resume-dir` and `--log-root` as the preset,
    the config file and the command line give them (in that order). It is known before the flags
    are parsed, because that run's config (its algorithm included, which types `--algorithm.*`)
    is what they change. They are parsed again, with every other flag, into the run's config
    (a malformed or missing value is refused there)."""
    import argparse

    from mjrl.runner.resume import ResumeTarget

    given = {k: v for f in files if f for k, v in f.items() if k in ("resume", "resume_dir", "log_root")}
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    parser.add_argument("--resume", nargs="?")
    parser.add_argument("--resume-dir", "--resume_dir", nargs="?")
    parser.add_argument("--log-root", "--log_root", nargs="?")
    try:
        known, _ = parser.parse_known_args(args)
    except argparse.ArgumentError:
        return ResumeTarget(**given)
    if known.resume is not None:
        given["resume"] = known.resume == "True"
    given |= {k: v for k, v in (("resume_dir", known.resume_dir), ("log_root", known.log_root)) if v is not None}
    return ResumeTarget(**given)


def _check_same_teacher(trained_with: str, given: str) -> None:
    """A student resumes with the teacher in its own checkpoint; another one named on the command
    line would be ignored without a word, so it is refused (no teacher at all is refused later,
    by the checkpoint, which says it is a distillation's)."""
    if trained_with and given and not _same_path(given, trained_with):
        raise UsageError(
            f"--algorithm.teacher {given}: this run distils from {trained_with}, whose weights its checkpoint "
            "holds; resume it without --algorithm.teacher, or start a new run to distil from another teacher"
        )


def _defaults(task: Task, algo: str | None, run_config: Path | None, task_name: str, chosen_by: str) -> TrainConfig:
    """The defaults the flags change, composed once: the task's for the algorithm, or, on a
    resume, those of the run's algorithm changed by what the run trained and wrote as."""
    from mjrl.runner.config import TrainConfig

    if run_config is None:
        return TrainConfig.for_task(task, algo or "ppo")
    return _run_config(task, algo, run_config, task_name, chosen_by)


def _compose(
    task_name: str,
    base: TrainConfig,
    preset: dict | None,
    saved: dict | None,
    args: list[str],
    plugins: tuple[str, ...],
    algo: str | None,
) -> TrainConfig:
    """`base` < the preset < the config file < the flags, parsed in one pass (the composing
    flags among them: `algo`, the algorithm they chose (`--algo`, or a former distillation
    flag's), types `--algorithm.*`; the plugins the command gives are added to those of the
    run or the file)."""
    from mjrl.config import apply_dict
    from mjrl.rl.registry import algorithm_spec, chosen_name
    from mjrl.runner.config import TrainCommand

    cfg = base if preset is None else apply_dict(base, preset)
    cfg = cfg if saved is None else apply_dict(cfg, saved)
    cls = TrainCommand[type(base.env), type(base.algorithm)]
    command = parse_flags(cls, cls.of(cfg), args, f"train {task_name}", f"Train {task_name}.")
    chosen = chosen_name(algo if algo is not None else command.algo)
    if not isinstance(command.algorithm, algorithm_spec(chosen).config):
        raise UsageError(
            f"the config names the algorithm {chosen}, but its algorithm section holds "
            f"{type(command.algorithm).__name__}'s settings: name one algorithm (--algo NAME)"
        )
    return dataclasses.replace(command.train_config(), algo=chosen, plugins=_merged(cfg.plugins, plugins))


def _merged(first: tuple[str, ...] | list[str], then: tuple[str, ...]) -> tuple[str, ...]:
    """Plugin names of both, in order, each once."""
    return tuple(dict.fromkeys((*first, *then)))


def _same_path(given: str, recorded: str) -> bool:
    """`given` names what `recorded` named: the same path, or (a relative `recorded`, written
    from another working directory) a path that ends in it."""
    resolved, parts = Path(given).resolve().parts, Path(recorded).parts
    if Path(recorded).is_absolute():
        return resolved == Path(recorded).resolve().parts
    return resolved[len(resolved) - len(parts) :] == parts or resolved == Path(recorded).resolve().parts


def _run_config(task: Task, algo: str | None, path: Path, task_name: str, chosen_by: str) -> TrainConfig:
    """The task's defaults for the run's algorithm (`algo` when given, else the run's own),
    changed by what the run being resumed trained and wrote as (`RESUMED`; a run of another task
    is left for the resume's own check to refuse, by name)."""
    from mjrl.config import apply_dict
    from mjrl.rl.registry import chosen_name
    from mjrl.runner.config import RESUMED, TrainConfig

    run = upgrade_config(read_yaml(path, "the resumed run's config"))
    import_plugins(run.get("plugins", ()))  # what the run registered its algorithm or terrain with
    trained = chosen_name(run.get("algo", "ppo"))
    if algo is not None and chosen_name(algo) != trained and run.get("task", task_name) == task_name:
        raise UsageError(
            f"{chosen_by} chooses {chosen_name(algo)}, but this run trains with {trained}: resume it without, or "
            "start a new run"
        )
    defaults = TrainConfig.for_task(task, trained, settings=False)  # the run's config holds its settings
    if run.get("task", task_name) != task_name:
        return defaults
    try:
        return apply_dict(defaults, {k: v for k, v in run.items() if k in RESUMED})
    except UsageError as exc:
        raise UsageError(f"{path} (the resumed run's config): {exc}; correct that file") from None


def _train(argv: list[str]) -> int:
    from mjrl.runner.job import run_job
    from mjrl.tasks import load_task

    task, cfg = parse_train_args(argv)
    return run_job(task, cfg, load_task)


def main(argv: list[str] | None = None) -> int:
    return run_command("train", _train, argv)


if __name__ == "__main__":
    sys.exit(main())
