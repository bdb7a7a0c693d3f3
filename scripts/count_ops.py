"""Tensor operations per env step and per PPO update: the host's share of the work on a GPU.

    python scripts/count_ops.py [--task Mjrl-Velocity-Flat-Quadruped] [--num-envs 64]

On a GPU each tensor operation costs several microseconds of Python and dispatch on the host,
whatever the number of envs, so at thousands of envs the host, not the device, bounds the speed.
A dispatch mode counts every operation that reaches torch's kernels (autograd's backward
included) during real env steps, policy steps and one PPO update with the task's own config.
Prints one JSON line: counts per env step (env alone, and env plus the policy's `act`), per
update and per minibatch step.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class OpCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[str(func)] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def count(fn, repeats: int) -> tuple[float, collections.Counter[str]]:
    with OpCounter() as counter:
        for _ in range(repeats):
            fn()
    return counter.total / repeats, counter.counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="Mjrl-Velocity-Flat-Quadruped")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=24, help="env steps counted (one rollout by default)")
    parser.add_argument("--top", type=int, default=0, help="also print the N most frequent ops")
    args = parser.parse_args()

    from mjrl.distributed.context import single_process
    from mjrl.envs import VecEnv
    from mjrl.rl import make_algorithm
    from mjrl.runner.config import TrainConfig
    from mjrl.tasks import load_task

    torch.set_num_threads(1)
    task = load_task(args.task)
    env_cfg = dataclasses.replace(task.env_cfg, num_envs=args.num_envs)
    cfg = dataclasses.replace(TrainConfig.for_task(task), env=env_cfg)
    env = VecEnv(env_cfg, task.build(env_cfg), torch.device("cpu"), seed=0)
    steps = cfg.runner.num_steps_per_env
    algorithm = make_algorithm(cfg, env, steps, single_process("cpu"), seed=0)

    def env_step() -> None:
        env.step(torch.randn(env.num_envs, env.num_actions))

    def policy_and_env_step() -> None:
        env.step(algorithm.act(env.obs))  # act stores into the rollout's current step; nothing advances

    for _ in range(3):  # first calls build caches and compile kernels
        policy_and_env_step()
    env_ops, env_counts = count(env_step, args.steps)
    step_ops, _ = count(policy_and_env_step, args.steps)

    # Fill a real rollout, then count one update.
    obs = env.obs
    for _ in range(steps):
        obs, rewards, terminated, truncated, extras = env.step(algorithm.act(obs))
        algorithm.process_env_step(rewards, terminated, truncated, extras)
    algorithm.compute_returns(obs)
    update_ops, update_counts = count(algorithm.update, 1)
    minibatch_steps = cfg.algorithm.num_learning_epochs * cfg.algorithm.num_mini_batches
    print(json.dumps({
        "task": args.task, "num_envs": args.num_envs,
        "ops_per_env_step": round(env_ops, 1), "ops_per_env_and_policy_step": round(step_ops, 1),
        "ops_per_update": int(update_ops), "ops_per_minibatch_step": round(update_ops / minibatch_steps, 1),
    }))  # fmt: skip
    if args.top:
        for name, counts in (("env step", env_counts), ("update", update_counts)):
            print(f"{name}: " + ", ".join(f"{op} {n}" for op, n in counts.most_common(args.top)))


if __name__ == "__main__":
    main()
