"""Algorithms by registration (`mjrl.rl.registry`): an off-policy learner written for the test
(`replay_learner.py`: a replay buffer filled while collecting, gradient steps between env steps)
trains through `train --algo replay-test`, checkpoints its buffer, resumes deterministically and
trains on two ranks in lockstep, with no edit under the runner, the env or the learners."""

from __future__ import annotations

import shutil
from pathlib import Path

import replay_learner  # registers --algo replay-test
import torch
from conftest import TWO_RANK_RUN, last_json, read_jsonl, run_cli, run_main

from mjrl.checkpoint import load_checkpoint
from mjrl.runner.config import TrainConfig
from mjrl.tasks import load_task

BALANCE = "Mjrl-Cartpole-Balance"
FLAGS = ("--logger", "none", "--env.num-envs", "16", "--runner.num-steps-per-env", "16", "--algo", "replay-test",
         "--algorithm.batch-size", "64", "--runner.save-interval", "2")  # fmt: skip


def train(*args: str) -> dict:
    result = run_main("train", BALANCE, "--device", "cpu", *FLAGS, *args)
    assert result.returncode == 0, result.stderr[-3000:]
    return last_json(result.stdout)


def test_the_chosen_algorithm_types_the_algorithm_section():
    task = load_task(BALANCE)
    assert type(TrainConfig.for_task(task).algorithm).__name__ == "PpoConfig"
    assert isinstance(TrainConfig.for_task(task, "replay-test").algorithm, replay_learner.ReplayConfig)


def test_an_off_policy_learner_checkpoints_its_buffer_and_resumes_deterministically(tmp_path):
    first = train("--runner.max-iterations", "2", "--log-root", str(tmp_path / "a"))
    run_a = Path(first["run_dir"])
    saved = load_checkpoint(Path(first["checkpoint"]))
    assert saved["config"]["algo"] == "replay-test" and saved["config"]["algorithm"]["batch_size"] == 64
    assert int(saved["replay"]["written"]) == 2 * 16 * 16  # every transition of both rollouts
    metrics = read_jsonl(run_a / "metrics.jsonl")
    # Gradient steps between env steps: one per step once a batch is stored (4 steps of 16 envs).
    assert [m["gradient_steps"] for m in metrics] == [16 - 4 + 1, 16]
    assert all(torch.isfinite(torch.tensor(m["td_loss"])) for m in metrics)
    # Two resumes of the same checkpoint go on alike, bit for bit: its buffer, weights, optimizer
    # and random streams are all restored.
    run_b = tmp_path / "b" / run_a.name
    shutil.copytree(run_a, run_b)
    ends = [train("--runner.max-iterations", "4", "--resume-dir", str(run)) for run in (run_a, run_b)]
    final = [load_checkpoint(Path(end["checkpoint"])) for end in ends]
    for part in ("policy", "replay"):
        assert all(torch.equal(final[0][part][k], final[1][part][k]) for k in final[0][part])
    resumed = [read_jsonl(run / "metrics.jsonl")[2:] for run in (run_a, run_b)]
    timings = {"wall_s", "steps_per_second", "collection_s", "learning_s", "collective_s"}
    assert [{k: v for k, v in m.items() if k not in timings} for m in resumed[0]] == [
        {k: v for k, v in m.items() if k not in timings} for m in resumed[1]
    ]
    assert int(final[0]["replay"]["written"]) == 4 * 16 * 16


def test_an_off_policy_learner_trains_on_two_ranks_in_lockstep(tmp_path):
    result = run_main("train", BALANCE, *TWO_RANK_RUN[:2], *FLAGS, "--runner.max-iterations", "3",
                      "--log-root", str(tmp_path), "--nproc-per-node", "2")  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = last_json(result.stdout)["ranks"]
    assert set(ranks) == {"0", "1"} and len({r["parameters_sha256"] for r in ranks.values()}) == 1


def test_an_unknown_algorithm_and_another_algorithms_flag_are_one_line(tmp_path):
    unknown = run_main("train", BALANCE, "--algo", "sac", "--log-root", str(tmp_path))
    assert unknown.returncode == 2 and "registered: " in unknown.stderr and "replay-test" in unknown.stderr
    ppo_flag = run_main("train", BALANCE, *FLAGS, "--algorithm.clip-param", "0.1", "--log-root", str(tmp_path))
    assert ppo_flag.returncode == 2 and "Traceback" not in ppo_flag.stderr
    # A learner written before `--runner.compile` has no compile(): one line, not a traceback.
    log_root = tmp_path / "compiled"
    compiled = run_main("train", BALANCE, *FLAGS, "--runner.compile", "update", "--log-root", str(log_root))
    assert compiled.returncode == 2 and compiled.stderr.count("\n") == 1 and "--runner.compile" in compiled.stderr
    assert not log_root.exists()
    assert not any(tmp_path.iterdir())  # nothing half-made


def test_a_plugin_module_registers_its_algorithm_for_train_and_for_the_resume(tmp_path):
    """`train --plugins MODULE` imports it before the algorithm is looked up (a fresh process,
    as a user runs it); the run's config records it, so a resume imports it again unasked."""
    tests_dir = str(Path(replay_learner.__file__).parent)
    env = {"PYTHONPATH": tests_dir}
    first = run_cli("train", BALANCE, "--device", "cpu", "--plugins", "replay_learner", *FLAGS,
                    "--runner.max-iterations", "1", "--log-root", str(tmp_path), env=env)  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    run_dir = Path(last_json(first.stdout)["run_dir"])
    again = run_cli("train", BALANCE, "--resume-dir", str(run_dir), "--runner.max-iterations", "2", env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert [m["iteration"] for m in read_jsonl(run_dir / "metrics.jsonl")] == [0, 1]
    missing = run_main("train", BALANCE, "--plugins", "no_such_plugin", "--log-root", str(tmp_path / "x"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no_such_plugin" in missing.stderr
