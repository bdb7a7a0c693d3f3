"""Bad input gets one line on stderr, exit code 2, no traceback and no run directory.

The CLI runs in-process (`run_main`): bad input is refused before any work starts, and a
subprocess would only add its imports. One test runs the real console scripts end to end."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from conftest import run_cli, run_main

from mjrl.errors import UsageError
from mjrl.tasks import load_task, task_names

TASK = "Mjrl-Cartpole-Balance"


def assert_clean_usage_error(result, log_root: Path, *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
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
            [TASK, "--env.num-envs", "10", "--runner.num-steps-per-env", "3", "--algorithm.num-mini-batches", "4"],
            ["--algorithm.num-mini-batches", "30"],
        ),
        ([TASK, "--preset", "nope"], ["unknown preset", "smoke"]),
        ([TASK, "--env.num-envs", "many"], ["many"]),
        ([TASK, "--resume", "True"], ["no run of", TASK]),
        ([TASK, "--device", "cuda:0"], ["--device"]),
        (
            ["Mjrl-Velocity-Rough-Quadruped", "--env.terrain.spawn-type", "lava"],
            ["--env.terrain.spawn-type", "stairs_up"],
        ),
        (["Mjrl-Velocity-Rough-Quadruped", "--env.terrain.spawn-row", "10"], ["--env.terrain.spawn-row", "9"]),
    ],
)
def test_train_rejects_bad_input(args, needles, log_root):
    device = [] if "--device" in args else ["--device", "cpu"]
    result = run_main("train", *args, "--log-root", str(log_root), *device)
    assert_clean_usage_error(result, log_root, *needles)


def test_train_rejects_a_config_file_with_an_unknown_key(tmp_path, log_root):
    """A saved config from an older mjrl (here with SimConfig's former `cuda_graph` flag) names
    the key and the valid ones instead of silently dropping it."""
    config = tmp_path / "config.yaml"
    config.write_text("env:\n  sim:\n    cuda_graph: true\n")
    result = run_main("train", TASK, "--config", str(config), "--log-root", str(log_root), "--device", "cpu")
    assert_clean_usage_error(result, log_root, "'env.sim.cuda_graph'", "graph")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("agent:\n  actor_hidden_dims: 64\n", "policy.actor_hidden_dims: expected a list of int, got 64"),
        ("agent:\n  actor_hidden_dims: [a, b]\n", "policy.actor_hidden_dims[0]: expected int, got 'a'"),
        ("env:\n  sim:\n    nconmax: many\n", "env.sim.nconmax: expected int or null"),
        ("env:\n  num_envs: true\n", "env.num_envs: expected int, got True"),
        # An `agent` section (runs before issue 23) is spread over runner, algorithm and policy.
        ("agent:\n  nope: 1\n", "unknown config key 'agent.nope'; valid keys: max_iterations"),
        ("agent:\n  gamma: high\n", "algorithm.gamma: expected float, got 'high'"),
    ],
    ids=["number-for-list", "strings-in-list", "string-for-optional", "bool-for-int", "old-unknown", "old-moved"],
)
def test_train_type_checks_config_file_values(text, needle, tmp_path, log_root):
    """List, optional and integer values in a config file are checked against the field's type."""
    config = tmp_path / "config.yaml"
    config.write_text(text)
    result = run_main(
        "train",
        TASK,
        "--config",
        str(config),
        "--runner.max-iterations",
        "1",
        "--log-root",
        str(log_root),
        "--device",
        "cpu",
    )
    assert_clean_usage_error(result, log_root, needle)


def test_play_rejects_missing_and_corrupt_checkpoints(tmp_path, log_root):
    missing = run_main("play", TASK, "--checkpoint", str(tmp_path / "nope.pt"))
    assert_clean_usage_error(missing, log_root, "does not exist")
    corrupt = tmp_path / "model_000001.pt"
    corrupt.write_bytes(b"\x80\x02not a checkpoint at all")
    result = run_main("play", TASK, "--checkpoint", str(corrupt))
    assert_clean_usage_error(result, log_root, "unreadable")


def test_the_console_scripts_exit_with_code_2_and_one_line(log_root):
    """End to end, as a shell sees them: the installed scripts' exit code and stderr."""
    result = run_cli("train", "Mjrl-Nope", "--log-root", str(log_root))
    assert_clean_usage_error(result, log_root, "unknown task", TASK)
    result = run_cli("play", "Mjrl-Nope", "--checkpoint", "x.pt")
    assert result.returncode == 2 and "valid tasks" in result.stderr


def test_mjrl_list_names_the_tasks():
    listing = run_main("mjrl", "list")
    assert listing.returncode == 0
    assert TASK in listing.stdout and "Mjrl-Cartpole-Swingup" in listing.stdout


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--algorithm.max-grad-norm", "-1"),
        ("--algorithm.clip-param", "-0.5"),
        ("--env.sim.timestep", "-0.01"),
        ("--policy.actor-hidden-dims", "0"),
        ("--algorithm.learning-rate", "inf"),
    ],
)
def test_train_rejects_harmful_numbers(flag, value, log_root):
    result = run_main("train", TASK, flag, value, "--log-root", str(log_root), "--device", "cpu")
    assert_clean_usage_error(result, log_root, flag)


@pytest.mark.parametrize("endpoint", ["badhost", "localhost:notaport", "localhost:70000", ":29500"])
def test_train_rejects_a_malformed_rendezvous_endpoint(endpoint, log_root):
    result = run_main(
        "train",
        TASK,
        "--nproc-per-node",
        "1",
        "--rdzv-endpoint",
        endpoint,
        "--runner.max-iterations",
        "1",
        "--log-root",
        str(log_root),
        "--device",
        "cpu",
    )
    assert_clean_usage_error(result, log_root, "--rdzv-endpoint", "HOST:PORT")


def _leaves(cfg, where: str = ""):
    """(dotted path, owning config, field name, value) of every non-config field, recursively."""
    for field in dataclasses.fields(cfg):
        value = getattr(cfg, field.name)
        if dataclasses.is_dataclass(value):
            yield from _leaves(value, f"{where}{field.name}.")
        else:
            yield f"{where}{field.name}", cfg, field.name, value


def _flag_of(cfg, path: str) -> str:
    """The flag of a dotted field path; the fields of a `flattened` nested config (the launch
    options) have flags without its prefix."""
    head, _, rest = path.partition(".")
    if not rest:
        return head.replace("_", "-")
    inner = _flag_of(getattr(cfg, head), rest)
    return inner if head in getattr(type(cfg), "flattened", ()) else f"{head.replace('_', '-')}.{inner}"


def _replace_at(cfg, path: str, value):
    head, _, rest = path.partition(".")
    if not rest:
        return dataclasses.replace(cfg, **{head: value})
    return dataclasses.replace(cfg, **{head: _replace_at(getattr(cfg, head), rest, value)})


def _outside(rule: str, value):
    """A value of the field's type that breaks `rule`."""
    if rule == "ordered":
        return (value[1] + 1.0, value[0])
    match = re.match(r"^(>=|>|<=|<)\s*(\S+)$", rule)
    if match:
        op, bound = match.group(1), float(match.group(2))
        bad = {">=": bound - 1, ">": bound, "<=": bound + 1, "<": bound}[op]
    else:
        low = float(re.match(r"^[\[(]\s*([^,]+),", rule).group(1))
        bad = low if rule.startswith("(") else low - 1
    sample = value[0] if isinstance(value, tuple) else value
    bad = int(bad) if isinstance(sample, int) else bad
    return (bad,) * len(value) if isinstance(value, tuple) else bad


def _numeric(value) -> bool:
    items = value if isinstance(value, tuple) else (value,)
    return bool(items) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in items)


@pytest.mark.parametrize("task_name", task_names())
def test_every_numeric_field_is_checked(task_name):
    """Walks every field of the train and play configs of every task: non-finite floats are
    rejected everywhere, each declared range is enforced, and every integer field declares one
    (an integer has no NaN to catch, so without a range it would go unchecked)."""
    from mjrl.config import check_numbers, field_rules
    from mjrl.runner.config import TrainConfig, validate
    from mjrl.tools.play import PlayConfig

    task = load_task(task_name)
    configs = [
        (TrainConfig.for_task(task), validate),
        (PlayConfig(env=task.env_cfg), check_numbers),
    ]
    checked = 0
    for cfg, check in configs:
        check(cfg)  # the defaults pass
        for path, owner, name, value in _leaves(cfg):
            if not _numeric(value) and value is not None:
                continue
            flag = "--" + _flag_of(cfg, path)
            rules = field_rules(type(owner)).get(name, ())
            is_int = isinstance(value[0] if isinstance(value, tuple) and value else value, int)
            assert rules or not is_int, f"integer field {path} declares no range in {type(owner).__name__}.bounds"
            bad_values = [] if is_int or value is None else [float("nan"), float("inf"), -float("inf")]
            bad_values = [(b,) * len(value) if isinstance(value, tuple) else b for b in bad_values]
            bad_values += [_outside(rule, value if value is not None else 1) for rule in rules]
            for bad in bad_values:
                with pytest.raises(UsageError, match=f"^{re.escape(flag)} must be"):
                    check(_replace_at(cfg, path, bad))
                checked += 1
    assert checked > 40


def test_tyros_refusal_is_one_plain_sentence_at_any_terminal_width(monkeypatch):
    """tyro wraps its box at the terminal's width, cutting a long path mid-token, and colours it
    on a terminal: the line is read from a parse as wide as the message, without colour codes."""
    import sys

    from mjrl.cli.common import _error_box, _one_line, parse_flags

    @dataclasses.dataclass
    class Flags:
        resume: bool = False
        """Resume."""
        history: int = 1
        """Steps of history."""

    path = "logs/Mjrl-Cartpole-Balance/2026-11-29_05-12-44_seed1/checkpoints/model_000150.pt"
    monkeypatch.setenv("COLUMNS", "40")
    with pytest.raises(UsageError) as refused:
        parse_flags(Flags, Flags(), ["--resume", path], "prog", "")
    assert str(refused.value) == (
        f"invalid choice '{path}' for argument '--resume'. Expected one of ('True', 'False'). (see `prog --help`)"
    )
    with pytest.raises(UsageError) as refused:
        parse_flags(Flags, Flags(), ["--history", "2.5"], "prog", "")
    assert str(refused.value).endswith("'2.5'; expected --history INT (see `prog --help`)")

    def coloured() -> None:  # tyro's box as a terminal gets it
        red, end = "\x1b[1;31m", "\x1b[0m"
        print(f"{red}╭─ Value error ─╮{end}\n{red}│{end} Error parsing --history: no {red}│{end}\n{red}╰───╯{end}",
              file=sys.stderr)  # fmt: skip
        raise SystemExit(2)

    assert _one_line(_error_box(coloured), "prog") == "Value error; Error parsing --history: no (see `prog --help`)"
