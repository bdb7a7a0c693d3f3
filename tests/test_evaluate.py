"""`run_episodes`, shared by `play` and the evaluation during training (CPU, real worlds)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mjrl.envs import VecEnv
from mjrl.tasks import load_task
from mjrl.tools.evaluate import ZeroActions, run_episodes

BALANCE = load_task("Mjrl-Cartpole-Balance")
STEPS_PER_EPISODE = 5  # 0.25 s at 0.05 s per env step; Balance ends episodes only at the time limit


def make_env(num_envs: int) -> VecEnv:
    cfg = dataclasses.replace(
        BALANCE.env_cfg,
        num_envs=num_envs,
        episode_length_s=0.25,
        obs_noise=False,
        random_initial_episode_length=False,
    )
    return VecEnv(cfg, BALANCE.build(cfg), torch.device("cpu"), seed=0)


def cart_distance(env: VecEnv) -> dict[str, torch.Tensor]:
    return {"cart_distance": env.sim.qpos[:, 0].abs()}


class HostReads(TorchDispatchMode):
    """Counts the operations that bring device data to the host (a synchronisation on a GPU):
    scalar reads (`.item()`, `int()`, `bool()`, `float()`) and `nonzero`, whose size the host
    needs."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.nonzero.default):
            self.count += 1
        return func(*args, **(kwargs or {}))


def test_host_reads_per_step_do_not_grow_with_the_number_of_envs():
    """`play` on thousands of envs must not read every finished env back one by one."""
    reads = {}
    for num_envs in (4, 64):
        env = make_env(num_envs)
        with HostReads() as mode:
            episodes = run_episodes(env, ZeroActions(env.num_actions), 2 * num_envs, cart_distance)
        assert episodes.steps == num_envs * 2 * STEPS_PER_EPISODE
        reads[num_envs] = mode.count
    assert reads[64] == reads[4] <= 2 * 2 * STEPS_PER_EPISODE + 4, reads


def test_episodes_are_counted_env_by_env_up_to_the_number_asked_for():
    """6 episodes on 4 envs: each env runs 2, and the first 6 in env order count (env 0's two,
    env 1's two, env 2's two). Checked against the rewards of a twin env stepped by hand."""
    env, twin = make_env(4), make_env(4)
    episodes = run_episodes(env, ZeroActions(env.num_actions), 6, cart_distance)
    twin.reset()  # as run_episodes does first
    rewards, distance = [], 0.0
    for _ in range(2 * STEPS_PER_EPISODE):
        _, reward, _, _, _ = twin.step(torch.zeros(4, twin.num_actions))
        rewards.append(reward)
        distance += float(twin.sim.qpos[:, 0].abs().sum())
    per_episode = torch.stack(rewards).view(2, STEPS_PER_EPISODE, 4).sum(dim=1)  # (episode, env)
    expected = [per_episode[j, i].item() for i in range(4) for j in range(2)][:6]
    torch.testing.assert_close(torch.tensor(episodes.returns), torch.tensor(expected))
    assert episodes.lengths == [STEPS_PER_EPISODE] * 6 and episodes.terminated == [False] * 6
    assert episodes.steps == 4 * 2 * STEPS_PER_EPISODE  # every env counts until its 2 episodes end
    assert episodes.metric_sums["cart_distance"] == pytest.approx(distance, rel=1e-6)


class Alternating:
    """+0.5, then -0.5, then +0.5, ... from every reset: a squared change of 1 between steps."""

    def __init__(self, env: VecEnv):
        self.sign = torch.ones(env.num_envs, 1)

    def act_deterministic(self, actor_obs: torch.Tensor) -> torch.Tensor:
        actions = 0.5 * self.sign
        self.sign = -self.sign
        return actions

    def reset(self, dones: torch.Tensor) -> None:
        self.sign = torch.where(dones.unsqueeze(1), 1.0, self.sign)


def test_the_action_rate_is_the_squared_change_between_steps_of_an_episode():
    """`mean_action_rate` (`eval/mean_action_rate` in training): 1 on every step but each
    episode's first, whose change from the episode before does not count."""
    env = make_env(3)
    summary = run_episodes(env, Alternating(env), 6).summary()
    assert summary["mean_action_rate"] == pytest.approx((STEPS_PER_EPISODE - 1) / STEPS_PER_EPISODE)
    assert run_episodes(make_env(3), ZeroActions(1), 3).summary()["mean_action_rate"] == 0.0
