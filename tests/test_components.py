"""A task's own state as an env component (`EnvComponent`): built with the env, advanced after
each physics step, reset with the envs, kept in checkpoints and logged as gauges, with no edit
to the env or the runner."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from conftest import DEVICE, TINY_RUN, last_json, run_main

from mjrl.checkpoint import load_checkpoint
from mjrl.envs import EnvComponent, VecEnv
from mjrl.metrics_file import read_metrics
from mjrl.tasks import load_task, register_task

BALANCE = load_task("Mjrl-Cartpole-Balance")


class StepCounter(EnvComponent):
    """Env steps since each env's reset, and resets so far: what a motion library's clock is."""

    def __init__(self, env: VecEnv):
        self.steps = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
        self.resets = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)

    def update(self, env: VecEnv) -> None:
        self.steps += 1

    def reset(self, env: VecEnv, mask: torch.Tensor) -> None:
        self.steps.masked_fill_(mask, 0)
        self.resets += mask

    def resume_state(self) -> dict[str, torch.Tensor]:
        return {"counter_resets": self.resets.clone()}

    def load_resume_state(self, saved) -> bool:
        resets = saved.get("counter_resets")
        if resets is not None and resets.shape == self.resets.shape:
            self.resets.copy_(resets)
        return False

    def gauges(self) -> dict[str, torch.Tensor]:
        return {"counter/steps": torch.stack([self.steps.double().sum(), torch.tensor(float(self.steps.numel()))])}


def with_counter(cfg):
    return dataclasses.replace(BALANCE.build(cfg), components={"counter": StepCounter})


def test_a_component_follows_every_step_and_reset_of_its_env():
    cfg = dataclasses.replace(BALANCE.env_cfg, num_envs=8, episode_length_s=0.25, random_initial_episode_length=False)
    env = VecEnv(cfg, with_counter(cfg), torch.device(DEVICE), seed=0)
    counter = env.components["counter"]
    assert list(env.components) == ["counter"]  # flat ground, no task state: nothing else
    first = counter.resets.clone()
    for _ in range(7):  # episodes of 5 steps: one reset of every env on the way
        env.step(torch.zeros(8, 1, device=env.device))
    assert torch.equal(counter.steps, env.episode_length)  # advanced once per env step, zeroed at the reset
    assert torch.equal(counter.resets, first + 1)
    assert env.gauges()["counter/steps"].tolist() == [2.0 * 8, 8.0]
    resumed = VecEnv(cfg, with_counter(cfg), torch.device(DEVICE), seed=0)
    resumed.load_resume_state(env.resume_state())
    assert torch.equal(resumed.components["counter"].resets, counter.resets)


def test_a_task_with_a_component_trains_logs_it_and_checkpoints_it(tmp_path):
    task = dataclasses.replace(BALANCE, name="Test-Balance-With-Counter", build=with_counter)
    register_task(task.name, task, "Balance with a step counter (tests/test_components.py)")
    result = run_main("train", task.name, *TINY_RUN, "--runner.max-iterations", "2", "--log-root", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    summary = last_json(result.stdout)
    metrics = read_metrics(Path(summary["run_dir"]) / "metrics.jsonl")
    assert all(0 < m["counter/steps"] < 1000 for m in metrics)
    saved = load_checkpoint(Path(summary["checkpoint"]))["env_ranks"][0]
    assert saved["counter_resets"].sum() > 0
