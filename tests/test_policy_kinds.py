"""Policies by registration (`mjrl.rl.policies`): a kind written for the test
(`policy_kind.py`) trains, plays and exports through the commands users run, from fresh
processes, with no edit under `src/`; an unknown kind is one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime
import torch
from conftest import TINY_RUN, last_json, run_cli, run_main

from mjrl.checkpoint import load_newest_checkpoint
from mjrl.rl import policy_kind_names
from mjrl.tasks import load_task
from mjrl.tools.trained import load_trained, trained_env_config

BALANCE = "Mjrl-Cartpole-Balance"
TESTS = str(Path(__file__).parent)


def test_a_registered_policy_kind_trains_plays_and_exports(tmp_path):
    env = {"PYTHONPATH": TESTS}
    trained = run_cli("train", BALANCE, *TINY_RUN, "--plugins", "policy_kind", "--policy.kind", "layernorm-mlp",
                      "--runner.max-iterations", "2", "--log-root", str(tmp_path), env=env)  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-3000:]
    run_dir = Path(last_json(trained.stdout)["run_dir"])
    path, state = load_newest_checkpoint(run_dir)
    assert state["config"]["policy"]["kind"] == "layernorm-mlp"
    assert "actor.0.weight" in state["policy"] and state["policy"]["actor.0.weight"].dim() == 1  # the LayerNorm's
    # play and export rebuild the kind from the run's recorded plugins: no --plugins given.
    played = run_cli("play", BALANCE, "--run-dir", str(run_dir), "--episodes", "2", "--device", "cpu", env=env)
    assert played.returncode == 0, played.stderr[-3000:]
    assert last_json(played.stdout)["episodes"] == 2
    out = tmp_path / "policy.onnx"
    exported = run_cli("mjrl", "export", BALANCE, "--run-dir", str(run_dir), "--out", str(out), env=env)
    assert exported.returncode == 0, exported.stderr[-3000:]
    # The exported model is the trained policy: its actions on observations the policy visits.
    import policy_kind  # noqa: F401  (registers the kind in this process, as play's import did in its own)

    task = load_task(BALANCE)
    env_cfg = trained_env_config(task, state).for_evaluation(8)
    sim, policy = load_trained(task, state, path, env_cfg, torch.device("cpu"))
    assert isinstance(policy.actor[0], torch.nn.LayerNorm)
    obs = sim.step(policy.act_deterministic(sim.obs["actor"]))[0]["actor"]
    session = onnxruntime.InferenceSession(str(out))
    got = session.run(None, {"obs": obs.numpy()})[0]
    np.testing.assert_allclose(got, policy.act_deterministic(obs).numpy(), atol=1e-5)
    assert json.loads(out.with_name(out.name + ".json").read_text())["observation_size"] == obs.shape[1]


def test_an_unknown_policy_kind_is_one_line(tmp_path):
    log_root = tmp_path / "logs"
    result = run_main("train", BALANCE, *TINY_RUN, "--policy.kind", "transformer", "--log-root", str(log_root))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "--policy.kind transformer: no such policy kind; registered: " in result.stderr
    assert "mlp" in policy_kind_names() and "mlp" in result.stderr
    assert not log_root.exists()
