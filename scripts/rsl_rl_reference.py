"""Train one of mjrl's tasks with rsl_rl's PPO instead of mjrl's: the reference for PPO changes.

rsl_rl is not a dependency of mjrl. Run this with a Python that has both (a separate venv):

    python -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install torch==2.13.0 rsl-rl-lib==5.5.1
    /tmp/refvenv/bin/pip install -e .   # mjrl itself
    /tmp/refvenv/bin/python scripts/rsl_rl_reference.py Mjrl-Cartpole-Swingup --seed 1 --out ref_dir
    mjrl plot logs/Mjrl-Cartpole-Swingup/<run> ref_dir --metrics mean_episode_return mean_kl

Only the learner differs from mjrl's run (docs/benchmarks.md, "How the scripts measure").
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import torch
from rsl_rl.algorithms import PPO as RslPPO
from rsl_rl.env import VecEnv as RslVecEnv
from tensordict import TensorDict

from mjrl.envs import VecEnv
from mjrl.rl.config import AgentConfig, SymmetryConfig
from mjrl.runner.metrics import episode_metrics, term_metrics
from mjrl.tasks import load_task

# PPO's settings that rsl_rl names as mjrl does.
SAME_NAMES = ("num_learning_epochs", "num_mini_batches", "learning_rate", "schedule", "gamma", "lam", "entropy_coef",
              "desired_kl", "max_grad_norm", "value_loss_coef", "clip_param")  # fmt: skip


class MjrlAsRslEnv(RslVecEnv):
    """mjrl's `VecEnv` behind rsl_rl's env interface (observation groups "actor" and "critic")."""

    def __init__(self, env: VecEnv):
        self.env = env
        self.num_envs = env.num_envs
        self.num_actions = env.num_actions
        self.max_episode_length = env.max_episode_length
        self.device = env.device
        self.cfg = dataclasses.asdict(env.cfg)

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return self.env.episode_length

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.env.episode_length.copy_(value)

    def get_observations(self) -> TensorDict:
        # Copies: mjrl's env writes each step's observations into the same buffers (fixed
        # addresses, for CUDA graphs), while rsl_rl keeps the observations `act` saw and stores
        # them after the step. Without the copy its storage held the next step's (before 2026-11-29).
        return TensorDict({group: obs.clone() for group, obs in self.env.obs.items()}, batch_size=[self.num_envs])

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        _, reward, terminated, truncated, _ = self.env.step(actions)
        # rsl_rl bootstraps time-outs itself, from the value of the step's own observation.
        return self.get_observations(), reward, (terminated | truncated).long(), {"time_outs": truncated}


def mirror_augmentation(env: VecEnv):
    """rsl_rl's `data_augmentation_func` from the mirrors the task declares (`env.mirrors`): each
    batch is followed by its mirror image, as mjrl's `--algorithm.symmetry.augment` does."""
    mirrors = env.mirrors

    def augment(env, obs: TensorDict | None, actions: torch.Tensor | None):
        if obs is not None:
            image = TensorDict({k: mirrors[k](v) for k, v in obs.items()}, batch_size=obs.batch_size)
            obs = torch.cat([obs, image])
        if actions is not None:
            actions = torch.cat([actions, mirrors["actions"](actions)])
        return obs, actions

    return augment


def rsl_rl_config(agent: AgentConfig, seed: int, env: VecEnv) -> dict:
    """rsl_rl 5.x's runner config with the same network and hyperparameters as `agent`, and its
    symmetry extension set as `agent`'s (from the mirrors `env` declares)."""
    runner, algorithm, policy = agent.runner, agent.algorithm, agent.policy
    symmetry = algorithm.symmetry
    symmetry_cfg = None
    if symmetry.enabled:
        symmetry_cfg = {
            "data_augmentation_func": mirror_augmentation(env),
            "use_data_augmentation": symmetry.augment,
            "use_mirror_loss": symmetry.mirror_loss_coef > 0,
            "mirror_loss_coeff": symmetry.mirror_loss_coef,
        }

    def model(hidden: tuple[int, ...], distribution: dict | None, network: str) -> dict:
        cfg = {"class_name": "MLPModel", "hidden_dims": list(hidden), "activation": policy.activation,
               "obs_normalization": policy.normalize_observations, "distribution_cfg": distribution}  # fmt: skip
        if policy.rnn_type != "none" and policy.rnn_networks in (network, "both"):
            # rsl_rl's memory ahead of the MLP, as mjrl's; its sequences span the whole rollout (no
            # windows, no burn-in), and it refuses symmetry augmentation with it.
            cfg |= {"class_name": "RNNModel", "rnn_type": policy.rnn_type, "rnn_hidden_dim": policy.rnn_hidden_size,
                    "rnn_num_layers": policy.rnn_num_layers}  # fmt: skip
        return cfg

    gaussian = {"class_name": "GaussianDistribution", "init_std": policy.init_noise_std, "std_type": "scalar"}
    return {
        "seed": seed,
        "num_steps_per_env": runner.num_steps_per_env,
        "obs_groups": {"actor": ["actor"], "critic": ["critic"]},
        "multi_gpu": None,
        "actor": model(policy.actor_hidden_dims, gaussian, "actor"),
        "critic": model(policy.critic_hidden_dims, None, "critic"),
        "algorithm": {
            "class_name": "PPO",
            **{name: getattr(algorithm, name) for name in SAME_NAMES},
            "use_clipped_value_loss": algorithm.value_clip_param > 0,
            "symmetry_cfg": symmetry_cfg,
        },
    }


def record_update_trace(alg: RslPPO) -> dict[str, list[float]]:
    """Per-minibatch KL (against the rollout policy) and learning rate of `alg`'s updates:
    rsl_rl computes both but does not return them."""
    trace: dict[str, list[float]] = {"kl": [], "lr": []}
    kl_of, step = alg.actor.get_kl_divergence, alg.optimizer.step

    def kl_recorded(*args, **kwargs):
        kl = kl_of(*args, **kwargs)
        trace["kl"].append(kl.mean().item())
        return kl

    def step_recorded(*args, **kwargs):
        trace["lr"].append(alg.optimizer.param_groups[0]["lr"])
        return step(*args, **kwargs)

    alg.actor.get_kl_divergence = kl_recorded
    alg.optimizer.step = step_recorded
    return trace


def iteration_metrics(env: VecEnv, alg: RslPPO, trace: dict[str, list[float]]) -> dict[str, float]:
    """The iteration's metrics as mjrl's runner computes them from the env's statistics, and the update's."""
    stats = {name: value.item() for name, value in env.pop_statistics().items()}
    metrics = episode_metrics(stats) | term_metrics(stats, env.term_names())
    metrics |= {
        "mean_kl": sum(trace["kl"]) / max(len(trace["kl"]), 1),
        "mean_learning_rate": sum(trace["lr"]) / max(len(trace["lr"]), 1),
        "learning_rate": alg.learning_rate,
        "action_std": alg.actor.output_std.mean().item(),
    }
    trace["kl"].clear()
    trace["lr"].clear()
    return metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--num-envs", type=int, default=0, help="0: the task's default")
    parser.add_argument("--iterations", type=int, default=0, help="0: the task's max_iterations")
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--symmetry", choices=["task", "on", "off"], default="task",
                        help="rsl_rl's symmetry augmentation (the task's mirrors): as configured, on, off")  # fmt: skip
    parser.add_argument("--out", type=Path, required=True, help="a directory; metrics.jsonl goes inside")
    args = parser.parse_args()
    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)

    task = load_task(args.task)
    env_cfg = task.env_cfg if not args.num_envs else dataclasses.replace(task.env_cfg, num_envs=args.num_envs)
    env = VecEnv(env_cfg, task.build(env_cfg), torch.device("cpu"), seed=args.seed)
    agent = task.agent_cfg
    if args.symmetry != "task":  # the task's symmetry setting, or augmentation on or off
        agent = agent.replace(symmetry=SymmetryConfig(augment=args.symmetry == "on"))
    if agent.algorithm.symmetry.enabled and env.mirrors is None:
        parser.error(f"{args.task} declares no mirrors")
    if agent.algorithm.symmetry.enabled and agent.policy.rnn_type != "none":
        parser.error(f"rsl_rl refuses symmetry augmentation for recurrent models ({args.task}): add --symmetry off")
    cfg = rsl_rl_config(agent, args.seed, env)
    args.out.mkdir(parents=True, exist_ok=True)
    learn(env, cfg, args.iterations or task.agent_cfg.runner.max_iterations, args.out / "metrics.jsonl")


def learn(env: VecEnv, cfg: dict, iterations: int, metrics: Path) -> None:
    """The loop of rsl_rl's OnPolicyRunner.learn, with mjrl's metrics written each iteration."""
    rsl_env = MjrlAsRslEnv(env)
    alg = RslPPO.construct_algorithm(rsl_env.get_observations(), rsl_env, cfg, "cpu")
    trace = record_update_trace(alg)
    env_steps, wall_s, obs = 0, 0.0, rsl_env.get_observations()
    alg.train_mode()
    with metrics.open("w") as out:
        for iteration in range(iterations):
            start = time.perf_counter()
            with torch.inference_mode():
                for _ in range(cfg["num_steps_per_env"]):
                    obs, rewards, dones, extras = rsl_env.step(alg.act(obs))
                    alg.process_env_step(obs, rewards, dones, extras)
                alg.compute_returns(obs)
            collected = time.perf_counter()
            losses = alg.update()
            done = time.perf_counter()
            env_steps += cfg["num_steps_per_env"] * env.num_envs
            wall_s += done - start
            line = {"iteration": iteration, "env_steps": env_steps, "wall_s": round(wall_s, 3)}
            line |= {"collection_s": collected - start, "learning_s": done - collected}
            line |= iteration_metrics(env, alg, trace)
            line |= {"value_loss": losses["value"], "surrogate_loss": losses["surrogate"], "entropy": losses["entropy"]}
            out.write(json.dumps(line) + "\n")
            out.flush()
            ret, kl, lr = line["mean_episode_return"], line["mean_kl"], line["mean_learning_rate"]
            print(f"it {iteration:5d} | return {ret:9.2f} | kl {kl:.4f} | lr {lr:.1e}", flush=True)


if __name__ == "__main__":
    main()
