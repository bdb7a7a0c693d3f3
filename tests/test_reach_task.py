"""A task with a fixed-base robot, by registration only (`reach_task.py`: a two-link arm fixed to
the world reaches for targets it is given every two seconds): PPO teaches it in well under a
minute of CPU, and it plays and refuses the terms a floating base needs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import reach_task  # registers Test-Reach-Arm
import torch
from conftest import last_json, run_main

from mjrl.envs import ObsTerm, VecEnv
from mjrl.envs import terms as mdp
from mjrl.errors import UsageError
from mjrl.metrics_file import read_metrics

ITERATIONS = 150  # 230k env steps: about 20 s on this project's 2-core CPU


@pytest.mark.heavy
def test_ppo_teaches_a_fixed_base_arm_to_reach_its_targets(tmp_path):
    result = run_main("train", "Test-Reach-Arm", "--device", "cpu", "--logger", "none", "--runner.max-iterations",
                      str(ITERATIONS), "--log-root", str(tmp_path))  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = Path(last_json(result.stdout)["run_dir"])
    metrics = read_metrics(run_dir / "metrics.jsonl")
    untrained = -metrics[0]["reward/distance"]  # mean fingertip distance per step, first rollout
    assert untrained > 0.3
    play = run_main("play", "Test-Reach-Arm", "--run-dir", str(run_dir), "--device", "cpu", "--episodes", "16")
    assert play.returncode == 0, play.stderr[-3000:]
    # The deterministic policy's fingertip, averaged over every step of 16 episodes (each target
    # approached from the last one, two targets per episode): within 10 cm (measured 0.062 m
    # after these 150 iterations, 0.079 m after 100; about 0.55 m untrained).
    assert last_json(play.stdout)["mean_tip_distance"] < 0.10


def test_a_fixed_base_robot_refuses_the_terms_of_a_floating_base():
    cfg = dataclasses.replace(reach_task.REACH.env_cfg, num_envs=2)
    spec = reach_task.build(cfg)
    env = VecEnv(cfg, spec, torch.device("cpu"))
    assert env.robot.free_qpos is None and env.robot.terrain_geom is None
    assert torch.allclose(reach_task.fingertip(env).norm(dim=-1), torch.full((2,), 0.55), atol=0.4)
    observations = {**spec.observations["actor"], "base_lin_vel": ObsTerm(mdp.base_lin_vel)}
    floating = dataclasses.replace(spec, observations={"actor": observations, "critic": observations})
    with pytest.raises(UsageError, match="this robot's base is fixed"):
        VecEnv(cfg, floating, torch.device("cpu"))
