"""Teacher-student distillation through the algorithm seam: a student task without the base's
linear velocity learns a teacher's actions, resumes with the teacher it started with, exports,
runs on two ranks, and refuses teachers it cannot learn from."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from conftest import TINY_RUN, TWO_RANK_RUN, last_json, run_cli, run_main, train_tiny

from mjrl.checkpoint import load_newest_checkpoint
from mjrl.metrics_file import read_metrics
from mjrl.tasks import load_task

TEACHER_TASK = "Mjrl-Velocity-Flat-Quadruped"
STUDENT_TASK = "Mjrl-Velocity-Flat-Quadruped-Student"


@pytest.fixture(scope="module")
def teacher(tmp_path_factory) -> Path:
    """A (barely) trained teacher: what matters is that its actions are not the student's."""
    return train_tiny(TEACHER_TASK, tmp_path_factory.mktemp("teacher"), "--runner.max-iterations", "2")


def distil(teacher: Path, log_root: Path, *args: str):
    return run_main("train", STUDENT_TASK, *TINY_RUN, "--algo", "distillation", "--algorithm.teacher", str(teacher),
                    "--log-root", str(log_root), *args)  # fmt: skip


def test_the_student_learns_the_teachers_actions_and_exports_without_base_velocity(teacher, log_root, tmp_path):
    result = distil(teacher, log_root, "--runner.max-iterations", "12")
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = Path(last_json(result.stdout)["run_dir"])
    losses = [row["behavior_loss"] for row in read_metrics(run_dir / "metrics.jsonl")]
    assert len(losses) == 12 and losses[-1] < 0.3 * losses[0]
    # The student's actor and its checkpoint: only what a robot measures, plus the teacher.
    _, state = load_newest_checkpoint(run_dir)
    _, teacher_state = load_newest_checkpoint(teacher)
    assert state["obs_dims"]["teacher"] == teacher_state["obs_dims"]["actor"] == 48
    assert state["obs_dims"]["actor"] == (3 + 3 + 12 + 12 + 12) * 5 + 3  # history of 5, the command once
    for name, value in teacher_state["policy"].items():
        assert torch.equal(state["teacher"][name], value), name
    out = tmp_path / "student.onnx"
    exported = run_main("mjrl", "export", STUDENT_TASK, "--run-dir", str(run_dir), "--out", str(out))
    assert exported.returncode == 0, exported.stderr[-2000:]
    terms = [term["name"] for term in json.loads(Path(f"{out}.json").read_text())["observation_terms"]]
    assert "base_lin_vel" not in terms and "base_ang_vel" in terms


def test_a_resumed_student_keeps_the_teacher_it_started_with(teacher, log_root, tmp_path):
    """The teacher run goes on training after the student started; the resumed student still
    learns from the weights in its own checkpoint, not from the teacher's newest."""
    own_teacher = tmp_path / "teacher_run"
    shutil.copytree(teacher, own_teacher)
    first = distil(own_teacher, log_root, "--runner.max-iterations", "2")
    assert first.returncode == 0, first.stderr[-3000:]
    run_dir = Path(last_json(first.stdout)["run_dir"])
    _, original = load_newest_checkpoint(own_teacher)
    more = run_main("train", TEACHER_TASK, *TINY_RUN, "--resume-dir", str(own_teacher), "--runner.max-iterations", "4")
    assert more.returncode == 0, more.stderr[-3000:]
    # Resumed without naming its teacher: the run's own config names it.
    resumed = run_main("train", STUDENT_TASK, *TINY_RUN, "--resume-dir", str(run_dir), "--runner.max-iterations", "4")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert [row["iteration"] for row in read_metrics(run_dir / "metrics.jsonl")] == [0, 1, 2, 3]
    _, state = load_newest_checkpoint(run_dir)
    assert state["iteration"] == 4
    for name, value in original["policy"].items():
        assert torch.equal(state["teacher"][name], value), name
    # Another teacher would be ignored (the checkpoint holds the first): refused, nothing written.
    other = tmp_path / "other_teacher"
    shutil.copytree(teacher, other)
    swapped = run_main("train", STUDENT_TASK, *TINY_RUN, "--resume-dir", str(run_dir), "--algorithm.teacher",
                       str(other), "--runner.max-iterations", "5")  # fmt: skip
    assert swapped.returncode == 2 and f"this run distils from {own_teacher}" in swapped.stderr, swapped.stderr
    assert len(swapped.stderr.strip().splitlines()) == 1
    assert [row["iteration"] for row in read_metrics(run_dir / "metrics.jsonl")] == [0, 1, 2, 3]
    # A student's run goes on only as a distillation, and a teacher's only with PPO.
    as_ppo = run_main("train", STUDENT_TASK, *TINY_RUN, "--resume-dir", str(run_dir), "--algo", "ppo",
                      "--runner.max-iterations", "5")  # fmt: skip
    assert as_ppo.returncode == 2 and "--algo ppo chooses ppo, but this run trains with distillation" in as_ppo.stderr
    assert "Traceback" not in as_ppo.stderr


def test_two_ranks_distil_in_lockstep(teacher, log_root):
    result = run_cli("train", STUDENT_TASK, *TWO_RANK_RUN, "--algo", "distillation", "--algorithm.teacher",
                     str(teacher), "--log-root", str(log_root), "--runner.max-iterations", "3",
                     "--runner.replica-check-interval", "1",
                     "--nproc-per-node", "2")  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    summary = last_json(result.stdout)
    assert len({rank["parameters_sha256"] for rank in summary["ranks"].values()}) == 1


def test_teachers_a_student_cannot_learn_from_are_refused_and_nothing_is_written(teacher, log_root, tmp_path):
    balance = run_main("train", "Mjrl-Cartpole-Balance", *TINY_RUN, "--runner.max-iterations", "1",
                       "--log-root", str(tmp_path / "balance"))  # fmt: skip
    cartpole = Path(last_json(balance.stdout)["run_dir"])
    cases = [
        (STUDENT_TASK, str(cartpole), "reads 5 observations and acts on 1 joints"),
        (STUDENT_TASK, str(tmp_path / "missing"), "no checkpoint file or run directory with checkpoints"),
        (TEACHER_TASK, str(teacher), "needs a task with a 'teacher' observation group"),
    ]
    with_symmetry = ["--algorithm.symmetry.augment", "True"]  # PPO's setting
    result = run_main("train", STUDENT_TASK, *TINY_RUN, "--algo", "distillation", "--algorithm.teacher", str(teacher),
                      *with_symmetry, "--log-root", str(log_root))  # fmt: skip
    assert result.returncode == 2 and "unknown flag --algorithm.symmetry.augment" in result.stderr
    assert not log_root.exists()
    for task, source, message in cases:
        result = run_main("train", task, *TINY_RUN, "--algo", "distillation", "--algorithm.teacher", source,
                          "--log-root", str(log_root))  # fmt: skip
        assert result.returncode == 2, (task, source, result.stderr[-2000:])
        assert message in result.stderr and "Traceback" not in result.stderr
        assert not log_root.exists(), (task, source)


def test_a_teacher_recorded_relatively_is_the_same_named_from_another_folder(tmp_path, monkeypatch):
    """A run records its teacher as given (`logs/T/run`); resumed from the folder above, the same
    teacher is `proj/logs/T/run` or its absolute path, and is not refused as another one."""
    from mjrl.cli.train import _same_path

    (tmp_path / "proj" / "logs" / "T" / "run").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert _same_path("proj/logs/T/run", "logs/T/run")
    assert _same_path(str(tmp_path / "proj" / "logs" / "T" / "run"), "logs/T/run")
    assert not _same_path("proj/logs/U/run", "logs/T/run")
    assert not _same_path("/elsewhere/run", str(tmp_path / "proj" / "logs" / "T" / "run"))


def test_a_distillation_of_the_former_layout_resumes_and_the_former_flags_still_choose_it(teacher, log_root, tmp_path):
    """Before distillation was an ordinary algorithm, naming a teacher chose it (`algo: auto`,
    a `distillation` section beside PPO's `algorithm`, `--distillation.teacher RUN`). Such a
    run's config.yaml and checkpoints resume as a distillation; the old flags still work, each
    with one note naming the flag that holds its value now."""
    import yaml

    from mjrl.config import to_dict
    from mjrl.rl import PpoConfig

    old_flags = run_main("train", STUDENT_TASK, *TINY_RUN, "--distillation.teacher", str(teacher),
                         "--algorithm.clip-param", "0.1", "--log-root", str(log_root),
                         "--runner.max-iterations", "1")  # fmt: skip
    assert old_flags.returncode == 0, old_flags.stderr[-3000:]
    assert "note: --distillation.teacher is now --algorithm.teacher, with --algo distillation" in old_flags.stderr
    # PPO's flags beside it (TINY_RUN's minibatches too) were ignored by distillation: still.
    assert "note: --algorithm.clip-param beside --distillation.teacher was PPO's" in old_flags.stderr
    run_dir = Path(last_json(old_flags.stdout)["run_dir"])
    assert load_newest_checkpoint(run_dir)[1]["config"]["algorithm"]["num_mini_batches"] == 4  # distillation's own

    def former(config: dict) -> dict:  # today's layout, written back as the former one
        return {**config, "algo": "auto", "algorithm": to_dict(PpoConfig()), "distillation": config["algorithm"]}

    config_file = run_dir / "config.yaml"
    config_file.write_text(yaml.safe_dump(former(yaml.safe_load(config_file.read_text()))))
    for path in (run_dir / "checkpoints").glob("model_*.pt"):
        raw = torch.load(path, weights_only=True)
        torch.save({**raw, "config": former(raw["config"])}, path)
    resumed = run_main("train", STUDENT_TASK, *TINY_RUN, "--resume-dir", str(run_dir), "--runner.max-iterations", "2")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "behavior_loss" in read_metrics(run_dir / "metrics.jsonl")[-1]
    _, state = load_newest_checkpoint(run_dir)
    assert state["iteration"] == 2 and state["config"]["algo"] == "distillation"
    assert state["config"]["algorithm"]["teacher"] == str(teacher) and "distillation" not in state["config"]
    # Without a teacher, the former flags chose PPO: they are dropped with a note.
    no_teacher = run_main("train", "Mjrl-Cartpole-Balance", *TINY_RUN, "--distillation.teacher", "",
                          "--runner.max-iterations", "1", "--log-root", str(tmp_path / "ppo"))  # fmt: skip
    assert no_teacher.returncode == 0, no_teacher.stderr[-3000:]
    assert "names no teacher: ignored, PPO trains as before" in no_teacher.stderr
    assert "clip_fraction" in read_metrics(Path(last_json(no_teacher.stdout)["run_dir"]) / "metrics.jsonl")[0]
    # Another algorithm beside the former flags is one line.
    both = run_main("train", STUDENT_TASK, "--algo", "ppo", "--distillation.teacher", str(teacher))
    assert both.returncode == 2 and "--algo ppo does not distil" in both.stderr and both.stderr.count("\n") == 1
    # The former flags on a run that trained PPO: one line naming them.
    on_ppo = run_main("train", TEACHER_TASK, *TINY_RUN, "--resume-dir", str(teacher), "--distillation.teacher",
                      str(teacher))  # fmt: skip
    assert on_ppo.returncode == 2
    assert "--distillation.teacher chooses distillation, but this run trains with ppo" in on_ppo.stderr


def test_the_blind_rough_student_reads_neither_the_height_scan_nor_the_base_velocity():
    """Issue 63's blind student: its actor feels the terrain through its joints only; its teacher
    group is what the rough task's actor reads, height scan and all."""
    student, rough = (
        load_task("Mjrl-Velocity-Rough-Quadruped-Blind-Student"),
        load_task("Mjrl-Velocity-Rough-Quadruped"),
    )
    groups = student.build(student.env_cfg).observations
    assert not {"height_scan", "base_lin_vel"} & set(groups["actor"]) and groups["actor"]["joint_pos"].history == 5
    assert list(groups["teacher"]) == list(rough.build(rough.env_cfg).observations["actor"])
    assert {"height_scan", "base_lin_vel"} <= set(groups["critic"])
