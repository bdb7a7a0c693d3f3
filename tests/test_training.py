"""Training through the real CLI: it learns, checkpoints round-trip, resume continues."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
import yaml
from conftest import WARM_UP, last_json, run_cli, run_main

from mjrl.checkpoint import list_checkpoints, load_checkpoint
from mjrl.config import apply_dict
from mjrl.envs import VecEnv
from mjrl.metrics_file import read_metrics
from mjrl.rl import build_actor_critic
from mjrl.runner.config import TrainConfig
from mjrl.tasks import load_task
from mjrl.tools.evaluate import run_episodes
from mjrl.tools.play import PlayConfig, evaluate
from mjrl.tools.trained import trained_env_config

TASK = "Mjrl-Cartpole-Balance"
# Short episodes keep the test fast; the learning signal is the same dm_control reward.
SMALL = [
    "--device",
    "cpu",
    "--logger",
    "none",
    "--env.num-envs",
    "64",
    "--env.episode-length-s",
    "5",
    "--runner.num-steps-per-env",
    "32",
    "--algorithm.num-mini-batches",
    "4",
]


def train(log_root: Path, *extra: str) -> dict:
    result = run_main("train", TASK, *SMALL, "--log-root", str(log_root), *extra)
    assert result.returncode == 0, result.stderr[-3000:]
    return last_json(result.stdout)


def play(checkpoint: Path, episodes: int = 16) -> dict:
    task = load_task(TASK)
    env = trained_env_config(task, load_checkpoint(checkpoint))
    return evaluate(task, PlayConfig(env=env, checkpoint=str(checkpoint), episodes=episodes, device="cpu"))


def test_short_run_learns_and_writes_a_complete_run_directory(log_root):
    summary = train(log_root, "--runner.max-iterations", "60", "--runner.save-interval", "30", "--run-name", "learn")
    run_dir = Path(summary["run_dir"])
    assert run_dir.parent == log_root / TASK and run_dir.name.endswith("_learn")
    metrics = read_metrics(run_dir / "metrics.jsonl")
    assert [m["iteration"] for m in metrics] == list(range(60))
    assert metrics[-1]["env_steps"] == (WARM_UP + 60) * 64 * 32
    required = {
        "iteration",
        "env_steps",
        "wall_s",
        "mean_episode_return",
        "mean_episode_length",
        "steps_per_second",
        "collection_s",
        "learning_s",
        "learning_rate",
        "mean_kl",
        "value_loss",
        "surrogate_loss",
        "entropy",
        "action_std",
        "reward/smooth_balance",
    }
    assert required <= set(metrics[-1])
    assert [p.name for p in list_checkpoints(run_dir)] == ["model_000030.pt", "model_000060.pt"]
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["task"] == TASK and saved["env"]["num_envs"] == 64

    # The trained deterministic policy clearly beats a freshly initialised one. Measured on this
    # setup: untrained about 24 of at most 100, 57 after 30 iterations, 98 after 60.
    trained = play(run_dir / "checkpoints" / "model_000060.pt")["mean_return"]
    untrained = untrained_return(run_dir)
    assert trained > max(2 * untrained, 50), (trained, untrained)


def untrained_return(run_dir: Path) -> float:
    """Return of a freshly initialised policy, evaluated the same way."""
    state = load_checkpoint(run_dir / "checkpoints" / "model_000030.pt")

    task = load_task(TASK)
    cfg = apply_dict(TrainConfig.for_task(task), state["config"])
    env_cfg = cfg.env.for_evaluation(16)
    env = VecEnv(env_cfg, task.build(env_cfg), torch.device("cpu"), seed=0)
    torch.manual_seed(0)
    policy = build_actor_critic(env.obs_dims, env.num_actions, cfg.policy, torch.device("cpu"))

    returns = run_episodes(env, policy, 16).returns
    return sum(returns) / len(returns)


def test_checkpoint_round_trip_reproduces_actions(log_root, tmp_path):
    summary = train(log_root, "--runner.max-iterations", "2")
    checkpoint = Path(summary["checkpoint"])
    state = load_checkpoint(checkpoint)
    assert {"policy", "optimizer", "iteration", "env_steps", "learning_rate", "rng", "config"} <= set(state)
    assert state["iteration"] == 2 and state["env_steps"] == (WARM_UP + 2) * 64 * 32

    task = load_task(TASK)
    cfg = apply_dict(TrainConfig.for_task(task), state["config"])
    env_cfg = dataclasses.replace(cfg.env, num_envs=4)
    env = VecEnv(env_cfg, task.build(env_cfg), torch.device("cpu"))
    obs = env.obs["actor"] * 3.0  # off the mean, so the normaliser matters

    def build() -> torch.nn.Module:
        return build_actor_critic(env.obs_dims, env.num_actions, cfg.policy, torch.device("cpu"))

    first, second = build(), build()
    first.load_state_dict(state["policy"])
    torch.save(first.state_dict(), tmp_path / "copy.pt")
    second.load_state_dict(torch.load(tmp_path / "copy.pt", weights_only=True))
    assert torch.equal(first.act_deterministic(obs), second.act_deterministic(obs))
    assert first.actor_normalizer.count > 0  # the normaliser travelled with the weights
    fresh = build()
    assert not torch.equal(fresh.act_deterministic(obs), first.act_deterministic(obs))


def test_resume_continues_iterations_without_repeats(log_root):
    first = train(log_root, "--runner.max-iterations", "5", "--runner.save-interval", "2")
    run_dir = Path(first["run_dir"])
    # Pretend the run died after its checkpoint at iteration 4: drop the last checkpoint.
    (run_dir / "checkpoints" / "model_000005.pt").unlink()
    second = train(log_root, "--runner.max-iterations", "7", "--resume", "True")
    assert second["run_dir"] == str(run_dir)
    metrics = read_metrics(run_dir / "metrics.jsonl")
    assert [m["iteration"] for m in metrics] == list(range(7))
    steps = [m["env_steps"] for m in metrics]
    assert steps == [(WARM_UP + i + 1) * 64 * 32 for i in range(7)]
    assert load_checkpoint(run_dir / "checkpoints" / "model_000007.pt")["iteration"] == 7
    # max-iterations counts the whole run: resuming a finished run does no more iterations.
    third = train(log_root, "--runner.max-iterations", "7", "--resume-dir", str(run_dir))
    assert third["iterations"] == 7
    assert len(read_metrics(run_dir / "metrics.jsonl")) == 7


def test_a_cpu_run_prints_nothing_on_stderr(log_root):
    """Nothing a user must learn to ignore: on a machine without an NVIDIA driver Warp's C++
    prints a warning when it starts, which the simulation layer keeps off the terminal."""
    result = run_cli("train", TASK, "--preset", "smoke", "--device", "cpu", "--log-root", str(log_root))
    assert result.returncode == 0 and result.stderr == "", result.stderr[-2000:]
    assert last_json(result.stdout)["iterations"] == 3


def test_saved_config_reproduces_the_run_settings(log_root):
    first = train(log_root, "--runner.max-iterations", "1", "--algorithm.learning-rate", "0.0007", "--seed", "3")
    config = Path(first["run_dir"]) / "config.yaml"
    again_args = ("--log-root", str(log_root), "--run-name", "again", "--runner.max-iterations", "1")
    result = run_main("train", "--config", str(config), *again_args)
    assert result.returncode == 0, result.stderr[-2000:]
    again = yaml.safe_load((Path(last_json(result.stdout)["run_dir"]) / "config.yaml").read_text())
    original = yaml.safe_load(config.read_text())
    assert again["algorithm"]["learning_rate"] == 0.0007 and again["seed"] == 3
    assert {k: v for k, v in again.items() if k != "run_name"} == {k: v for k, v in original.items() if k != "run_name"}


def wandb_records(path: Path) -> tuple[list[dict], dict[str, str]]:
    """History rows and {metric: its x-axis} of an offline run, read from its `.wandb` file: a
    LevelDB-style log (32 KiB blocks of chunks with 7-byte headers) of protobuf records."""
    from wandb.proto import wandb_internal_pb2

    data, pos, block, pending, rows, axes = path.read_bytes(), 7, 32768, b"", [], {}  # 7: W&B's header
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk  # 1 full, 2 first, 3 middle, 4 last
        if kind not in (1, 4):
            continue
        record = wandb_internal_pb2.Record.FromString(pending)
        if record.HasField("history"):
            items = record.history.item  # a key is in `key`, or split into `nested_key`
            rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in items})
        elif record.HasField("metric") and record.metric.step_metric:
            axes[record.metric.glob_name or record.metric.name] = record.metric.step_metric
    return rows, axes


@pytest.mark.heavy
def test_tensorboard_and_offline_wandb_tracking(log_root):
    tb = train(log_root, "--runner.max-iterations", "2", "--logger", "tensorboard", "--run-name", "tb")
    events = list((Path(tb["run_dir"]) / "tensorboard").glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 0
    # No API key and no network here: WandB must go offline by itself, inside the run directory,
    # and a resumed run must continue the same WandB run id. Real processes: WandB reads its
    # environment and starts a service process of its own.
    env = {"WANDB_MODE": "", "WANDB_API_KEY": ""}
    wandb_run = ("--logger", "wandb", "--runner.max-iterations", "2", "--runner.save-interval", "1")
    result = run_cli("train", TASK, *SMALL, "--log-root", str(log_root), *wandb_run, "--run-name", "wb", env=env,
                     timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = Path(last_json(result.stdout)["run_dir"])
    # Resume from iteration 1, as after a crash: iteration 1 is logged a second time, below
    # WandB's own step counter, and must not be dropped.
    (run_dir / "checkpoints" / "model_000002.pt").unlink()
    resumed = run_cli("train", TASK, *SMALL, "--log-root", str(log_root), *wandb_run, "--resume-dir", str(run_dir),
                      env=env, timeout=600)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    runs = sorted((run_dir / "wandb").glob("offline-run-*"))
    assert len(runs) == 2
    run_id = load_checkpoint(run_dir / "checkpoints" / "model_000002.pt")["wandb_id"]
    assert all(r.name.endswith(run_id) for r in runs), (runs, run_id)
    for run, iterations in zip(runs, ([0, 1], [1]), strict=True):
        rows, axes = wandb_records(next(run.glob("run-*.wandb")))
        assert axes == {"*": "iteration"}  # charts are drawn against the iteration, not WandB's step
        assert [row["iteration"] for row in rows if "learning_rate" in row] == iterations
