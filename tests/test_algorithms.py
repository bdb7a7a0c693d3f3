"""Algorithms by registration (`mjrl.rl.registry`): an off-policy learner written for the test
(`replay_learner.py`: a replay ring fed by every transition, updates the loop schedules after
every env step) trains through `train --algo replay-test`, keeps its ring beside its
checkpoints, resumes deterministically and trains on two ranks in lockstep, with no edit under
the runner, the env or the learners."""

from __future__ import annotations

import shutil
from pathlib import Path

import replay_learner  # registers --algo replay-test
import torch
from conftest import TWO_RANK_RUN, last_json, run_cli, run_main

from mjrl.checkpoint import load_bulk_state, load_checkpoint
from mjrl.metrics_file import read_metrics
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


def test_a_tasks_settings_for_an_algorithm_are_that_algorithms_defaults_for_it():
    """`Task.algorithm_settings`: `--algo sac` on Balance starts from the SAC settings measured
    for it, PPO's defaults stay the task's agent's, and every registered task's settings name
    keys the config has (a misspelt one would only fail when someone chose that algorithm)."""
    from mjrl.tasks import task_names

    task = load_task(BALANCE)
    sac, ppo = TrainConfig.for_task(task, "sac"), TrainConfig.for_task(task)
    assert (sac.env.num_envs, sac.algorithm.batch_size, sac.algorithm.symmetry.augment) == (64, 1024, True)
    assert ppo.env == task.env_cfg and ppo.algorithm == task.agent_cfg.algorithm
    assert sac.policy == ppo.policy == task.agent_cfg.policy  # what the settings do not name stays the task's
    for name in task_names():
        task = load_task(name)
        for algo, settings in task.algorithm_settings.items():
            cfg = TrainConfig.for_task(task, algo)
            assert cfg.algo == algo and set(settings) <= {"env", "runner", "algorithm", "policy"}, name


def test_an_off_policy_learner_keeps_its_ring_beside_its_checkpoints_and_resumes_deterministically(tmp_path):
    first = train("--runner.max-iterations", "2", "--log-root", str(tmp_path / "a"))
    run_a, checkpoint = Path(first["run_dir"]), Path(first["checkpoint"])
    saved = load_checkpoint(checkpoint)
    assert saved["config"]["algo"] == "replay-test" and saved["config"]["algorithm"]["batch_size"] == 64
    # The ring is bulky state: a file of its own beside the checkpoint, only the newest kept.
    assert "replay" not in saved
    assert sorted(p.name for p in (run_a / "checkpoints").glob("bulk_*.pt")) == ["bulk_000002.pt"]
    ring = load_bulk_state(checkpoint)
    assert int(ring["written"]) == 2 * 16 * 16  # every transition of both rollouts
    metrics = read_metrics(run_a / "metrics.jsonl")
    # Updates after every env step: one gradient step each once a batch is stored (4 steps of
    # 16 envs), timed as learning.
    assert [m["gradient_steps"] for m in metrics] == [16 - 4 + 1, 16]
    assert all(torch.isfinite(torch.tensor(m["td_loss"])) for m in metrics)
    assert all(m["learning_s"] > 0 and m["collection_s"] > 0 for m in metrics)
    # Two resumes of the same checkpoint go on alike, bit for bit: its ring, weights, optimizer
    # and random streams are all restored.
    run_b = tmp_path / "b" / run_a.name
    shutil.copytree(run_a, run_b)
    ends = [train("--runner.max-iterations", "4", "--resume-dir", str(run)) for run in (run_a, run_b)]
    final = [Path(end["checkpoint"]) for end in ends]
    policies, rings = [load_checkpoint(p)["policy"] for p in final], [load_bulk_state(p) for p in final]
    for part in (policies, rings):
        assert all(torch.equal(part[0][k], part[1][k]) for k in part[0])
    resumed = [read_metrics(run / "metrics.jsonl")[2:] for run in (run_a, run_b)]
    timings = {"wall_s", "steps_per_second", "collection_s", "learning_s", "collective_s"}
    assert [{k: v for k, v in m.items() if k not in timings} for m in resumed[0]] == [
        {k: v for k, v in m.items() if k not in timings} for m in resumed[1]
    ]
    assert int(rings[0]["written"]) == 4 * 16 * 16
    assert sorted(p.name for p in (run_a / "checkpoints").glob("bulk_*.pt")) == ["bulk_000004.pt"]


def test_a_resume_without_the_ring_starts_it_empty_and_says_so(tmp_path):
    """`--runner.save-bulk-state False` writes no ring; a resume then starts it empty, with one
    note, and learns again once it holds a batch."""
    first = train("--runner.max-iterations", "1", "--runner.save-bulk-state", "False", "--log-root", str(tmp_path))
    run_dir = Path(first["run_dir"])
    assert not list((run_dir / "checkpoints").glob("bulk_*.pt"))
    result = run_main("train", BALANCE, "--device", "cpu", *FLAGS, "--runner.max-iterations", "2",
                      "--resume-dir", str(run_dir))  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "note: no bulk_000001.pt beside model_000001.pt" in result.stdout
    assert [m["gradient_steps"] for m in read_metrics(run_dir / "metrics.jsonl")] == [13, 13]


def test_a_ring_that_does_not_fit_the_resumed_learner_is_one_line(tmp_path):
    first = train("--runner.max-iterations", "1", "--log-root", str(tmp_path))
    run_dir = Path(first["run_dir"])
    result = run_main("train", BALANCE, "--device", "cpu", *FLAGS, "--runner.max-iterations", "2",
                      "--resume-dir", str(run_dir), "--algorithm.buffer-size", "512")  # fmt: skip
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "bulk_000001.pt does not fit this run's algorithm" in result.stderr and "delete it" in result.stderr
    assert [m["iteration"] for m in read_metrics(run_dir / "metrics.jsonl")] == [0]


def test_an_update_schedule_that_does_not_divide_the_rollout_is_one_line(tmp_path):
    log_root = tmp_path / "logs"
    result = run_main("train", BALANCE, "--device", "cpu", *FLAGS, "--algorithm.update-every", "5",
                      "--log-root", str(log_root))  # fmt: skip
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "learns every 5 env steps" in result.stderr and "--runner.num-steps-per-env 16" in result.stderr
    assert not log_root.exists()  # nothing half-made


def test_an_off_policy_learner_trains_on_two_ranks_in_lockstep(tmp_path):
    result = run_main("train", BALANCE, *TWO_RANK_RUN[:2], *FLAGS, "--runner.max-iterations", "3",
                      "--log-root", str(tmp_path), "--nproc-per-node", "2")  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = last_json(result.stdout)["ranks"]
    assert set(ranks) == {"0", "1"} and len({r["parameters_sha256"] for r in ranks.values()}) == 1


def test_an_unknown_algorithm_and_another_algorithms_flag_are_one_line(tmp_path):
    unknown = run_main("train", BALANCE, "--algo", "nope", "--log-root", str(tmp_path))
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
    assert [m["iteration"] for m in read_metrics(run_dir / "metrics.jsonl")] == [0, 1]
    missing = run_main("train", BALANCE, "--plugins", "no_such_plugin", "--log-root", str(tmp_path / "x"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no_such_plugin" in missing.stderr
