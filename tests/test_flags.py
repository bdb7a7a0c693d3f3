"""Flags users already know: mjrl's former `--agent.*` section and mjlab's spellings still set
the same values, with one note naming the new flag; other unknown flags are refused in one line
naming the closest real flags."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest
import yaml
from conftest import TINY_RUN, last_json, run_main

from mjrl.cli.flags import known_flags, rename_known_flags
from mjrl.cli.train import parse_train_args
from mjrl.compat import SPLIT_SECTIONS
from mjrl.runner.config import TrainConfig
from mjrl.tasks import load_task

TASK = "Mjrl-Cartpole-Balance"
DEFAULT = TrainConfig.for_task(load_task(TASK))
SECTIONS = SPLIT_SECTIONS["TrainConfig.agent"]


def _value_tokens(value) -> list[str]:
    if isinstance(value, tuple):
        return [str(v) for v in value]
    return [str(value)]


def _field(cfg, flag: str):
    for part in flag.removeprefix("--").split("."):
        cfg = getattr(cfg, part.replace("-", "_"))
    return cfg


FORMER_AGENT_FLAGS = [flag for flag in known_flags(DEFAULT) if flag.split(".")[0].removeprefix("--") in SECTIONS]


def test_every_former_agent_flag_is_rewritten_to_the_section_that_holds_it():
    """`--agent.X` becomes `--runner.X`, `--algorithm.X` or `--policy.X`, whichever has X."""
    assert len(FORMER_AGENT_FLAGS) > 30
    for flag in FORMER_AGENT_FLAGS:
        old = "--agent." + flag.split(".", 1)[1]
        notes = io.StringIO()
        tokens = _value_tokens(_field(DEFAULT, flag))
        assert rename_known_flags([old, *tokens], DEFAULT, notes) == [flag, *tokens]
        assert notes.getvalue() == f"note: {old} is now {flag}\n"
        equals = rename_known_flags([f"{old}=1"], DEFAULT, io.StringIO())
        assert equals == [f"{flag}=1"]


@pytest.mark.parametrize(
    ("old", "new", "value", "expected"),
    [
        (["--agent.max-iterations"], "--runner.max-iterations", "7", 7),
        (["--agent.save-interval"], "--runner.save-interval", "3", 3),
        (["--agent.learning-rate"], "--algorithm.learning-rate", "0.002", 0.002),
        (["--agent.actor-hidden-dims"], "--policy.actor-hidden-dims", "16", (16,)),
        (["--agent.symmetry.augment"], "--algorithm.symmetry.augment", "True", True),
        (["--env.scene.num-envs"], "--env.num-envs", "12", 12),
        (["--agent.seed"], "--seed", "9", 9),
    ],
)
def test_an_old_spelling_sets_the_value_of_its_new_flag(old, new, value, expected, capsys):
    _, cfg = parse_train_args([TASK, *old, value])
    assert _field(cfg, new) == expected
    assert f"note: {old[0]} is now {new}" in capsys.readouterr().err


def test_a_run_started_with_mjlab_spellings_records_the_values_in_its_config(log_root: Path):
    result = run_main(
        "train", TASK, *TINY_RUN, "--agent.max-iterations", "2", "--env.scene.num-envs", "6", "--agent.seed", "5",
        "--agent.save-interval", "1", "--log-root", str(log_root),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 4, result.stderr
    config = yaml.safe_load((Path(last_json(result.stdout)["run_dir"]) / "config.yaml").read_text())
    assert config["runner"]["max_iterations"] == 2 and config["runner"]["save_interval"] == 1
    assert config["env"]["num_envs"] == 6 and config["seed"] == 5


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--runner.max-iteration", "3"],
            "unknown flag --runner.max-iteration (did you mean --runner.max-iterations?)",
        ),
        (["--agent.bogus", "3"], "unknown flag --agent.bogus (no flag is close)"),
        (["--env.num-env=4"], "unknown flag --env.num-env (did you mean --env.num-envs?)"),
    ],
)
def test_an_unknown_flag_is_refused_with_the_closest_real_ones(args, line, log_root: Path):
    result = run_main("train", TASK, *args, "--log-root", str(log_root))
    assert result.returncode == 2
    assert result.stderr.strip() == f"train: error: {line} (see `train {TASK} --help`)"
    assert not log_root.exists()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # tyro's get_parser, read here only
def test_every_flag_known_to_the_rewrite_is_a_flag_of_tyros_parser():
    """`known_flags` walks the config as tyro names its flags (a flattened section's at the top)."""
    import tyro

    parser = tyro.extras.get_parser(type(DEFAULT), default=DEFAULT, config=(tyro.conf.FlagConversionOff,))
    options = {option for action in parser._actions for option in action.option_strings}
    flags = set(known_flags(DEFAULT))
    assert {"--env.num-envs", "--runner.max-iterations", "--seed", "--nproc-per-node"} <= flags
    assert flags == options - {"-h", "--help"}


def test_every_unknown_flag_is_named_however_many_and_values_are_not(log_root: Path):
    """tyro wraps its list at the console's width; the names come from the command line."""
    args = ["--runner.max-iteration", "3", "--algorithm.learning-rat", "0.001", "--env.num-env", "8", "--bogus", "-0.5"]
    result = run_main("train", TASK, *args, "--log-root", str(log_root))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    for name in ("--runner.max-iteration ", "--algorithm.learning-rat ", "--env.num-env ", "--bogus "):
        assert name in result.stderr, (name, result.stderr)
    assert "-0.5" not in result.stderr


def test_plays_count_of_envs_takes_mjlabs_spelling_and_a_resume_notes_once(log_root: Path, capsys):
    from mjrl.tools.play import PlayConfig

    play_default = PlayConfig(env=DEFAULT.env)
    assert rename_known_flags(["--env.scene.num-envs", "4"], play_default, io.StringIO()) == ["--num-envs", "4"]
    first = run_main("train", TASK, *TINY_RUN, "--runner.max-iterations", "1", "--log-root", str(log_root))
    assert first.returncode == 0, first.stderr[-2000:]
    capsys.readouterr()
    parse_train_args([TASK, "--resume", "True", "--log-root", str(log_root), "--agent.max-iterations", "3"])
    assert capsys.readouterr().err.count("note: --agent.max-iterations is now --runner.max-iterations") == 1


def test_a_resume_composes_its_config_once_and_parses_every_flag_in_one_pass(tmp_path: Path, monkeypatch, capsys):
    """Issue 62: the flags that compose the defaults (--plugins, --preset, --config, --algo) stay
    on the command line for the one parse of every flag, and the defaults are composed once, also
    on a resume, where the resumed run's config (its algorithm's settings included) is the base."""
    import tyro

    from mjrl.config import to_dict
    from mjrl.runner.config import experiment_config

    # A SAC run to resume: its config.yaml as the runner writes it, and a checkpoint's file.
    trained = TrainConfig.for_task(load_task(TASK), "sac")
    trained = dataclasses.replace(trained, algorithm=dataclasses.replace(trained.algorithm, n_step=5, batch_size=128))
    run = tmp_path / TASK / "2026-01-01_00-00-00_seed-42"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "model_000001.pt").write_bytes(b"")  # found, not read, while parsing
    written = experiment_config(TASK, trained)
    del written["algorithm"]["symmetry"]  # a key added after the run was written
    (run / "config.yaml").write_text(yaml.safe_dump(written, sort_keys=False))
    compositions, parses = [], []
    for_task = TrainConfig.for_task.__func__
    counted = classmethod(lambda cls, *a, **k: compositions.append(a) or for_task(cls, *a, **k))
    monkeypatch.setattr(TrainConfig, "for_task", counted)
    real_cli = tyro.cli
    monkeypatch.setattr(tyro, "cli", lambda *a, **k: parses.append(k["args"]) or real_cli(*a, **k))

    (tmp_path / "mine.yaml").write_text("runner:\n  max_iterations: 3\n")
    args = ["--plugins=mjrl.tasks", TASK, "--resume", "True", "--log-root", str(tmp_path), "--preset", "cpu-locomotion"]
    args += ["--config", str(tmp_path / "mine.yaml"), "--algorithm.batch-size", "64", "--env.num-envs", "8"]
    _, cfg = parse_train_args(args)
    assert len(compositions) == 1 and len(parses) == 1
    assert {"--preset", "--config", "--plugins", "--resume"} <= set(parses[0]) and "mjrl.tasks" in parses[0]
    assert cfg.algo == "sac" and (cfg.algorithm.n_step, cfg.algorithm.batch_size) == (5, 64)  # run < flags
    # The key the run lacks takes its class default (what the run trained), not the task's SAC settings.
    assert trained.algorithm.symmetry.augment and not cfg.algorithm.symmetry.augment
    assert cfg.runner.save_interval == 50 and cfg.logger == "none"  # the preset's
    assert cfg.runner.max_iterations == 3 and cfg.env.num_envs == 8  # the config file's over it, then a flag's
    assert cfg.plugins == ("mjrl.tasks",) and type(cfg) is type(trained)  # the command's own fields dropped
    assert "preset" not in to_dict(cfg) and "config" not in to_dict(cfg)
    # --help documents the composing flags with the others.
    with pytest.raises(SystemExit):
        parse_train_args([TASK, "--help"])
    shown = capsys.readouterr().out
    assert all(flag in shown for flag in ("--preset STR", "--config STR", "--algo STR", "--plugins"))


def test_the_composing_flags_before_the_task_still_ask_for_help_and_choose_what_a_former_flag_chose(capsys):
    """`train --plugins=MOD --help` lists the tasks the plugin registers; `--algo auto` beside a
    former `--distillation.teacher` still trains a distillation (read again by the one parse,
    `auto` would have said PPO, with distillation's settings)."""
    with pytest.raises(SystemExit) as ended:
        parse_train_args(["--plugins=mjrl.tasks", "--help"])
    assert ended.value.code == 0 and TASK in capsys.readouterr().out
    student = "Mjrl-Velocity-Flat-Quadruped-Student"
    _, cfg = parse_train_args([student, "--algo", "auto", "--distillation.teacher", "runs/flat-2ranks"])
    assert cfg.algo == "distillation" and cfg.algorithm.teacher == "runs/flat-2ranks"
