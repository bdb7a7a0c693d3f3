"""`play TASK --checkpoint PATH | --run-dir DIR [--episodes K] [--num-envs N]`: evaluate a policy.

Runs the deterministic policy (the Gaussian's mean) for K full episodes and prints the mean
episode return and length, ending with one JSON line.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

from mjrl.cli.common import parse_flags, run_command
from mjrl.errors import UsageError


@dataclasses.dataclass(frozen=True)
class PlayConfig:
    """Evaluate a trained policy."""

    checkpoint: str = ""
    """Checkpoint file to evaluate."""
    run_dir: str = ""
    """Run directory; its newest readable checkpoint is evaluated."""
    episodes: int = 16
    """Episodes to run (each env runs whole episodes from a fresh reset)."""
    num_envs: int = 0
    """Parallel envs; 0 means one env per episode."""
    device: str = "auto"
    """auto, cpu, cuda or cuda:N."""
    seed: int = 0
    """Seed of the reset distribution."""
    obs_noise: bool = False
    """Keep the actor's observation noise (off: evaluate on clean observations)."""


def _play(argv: list[str]) -> int:
    from mjrl.tasks import describe_tasks

    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(
            f"usage: play TASK --checkpoint PATH | --run-dir DIR [--episodes K] [--num-envs N]\n\n"
            f"tasks:\n{describe_tasks()}"
        )
        return 0 if args else 2
    task_name = args.pop(0)
    from mjrl.tasks import load_task

    task = load_task(task_name)
    cfg = parse_flags(PlayConfig, PlayConfig(), args, f"play {task_name}", f"Evaluate a {task_name} policy.")
    if bool(cfg.checkpoint) == bool(cfg.run_dir):
        raise UsageError("give exactly one of --checkpoint PATH or --run-dir DIR")
    if cfg.episodes < 1 or cfg.num_envs < 0:
        raise UsageError("--episodes must be at least 1 and --num-envs at least 0")
    result = evaluate(task, cfg)
    extra = "".join(f" | {k} {v:.3f}" for k, v in result.items() if k.endswith("_error"))
    print(
        f"{task_name}: {result['episodes']} episodes | mean return {result['mean_return']:.2f} | "
        f"mean length {result['mean_length']:.1f}{extra}"
    )
    print(json.dumps(result))
    return 0


def evaluate(task, cfg: PlayConfig) -> dict:
    import torch

    from mjrl.distributed.context import resolve_device
    from mjrl.envs import VecEnv
    from mjrl.runner.checkpoint import load_checkpoint, load_newest_checkpoint
    from mjrl.runner.config import TrainConfig, apply_dict
    from mjrl.runner.runner import build_policy
    from mjrl.runner.start import check_task, restore_policy

    if cfg.run_dir:
        if not Path(cfg.run_dir).is_dir():
            raise UsageError(f"--run-dir {cfg.run_dir}: no such run directory")
        path, state = load_newest_checkpoint(Path(cfg.run_dir))
    else:
        path = Path(cfg.checkpoint)
        state = load_checkpoint(path)
    check_task(state, task.name, path)
    device = resolve_device(cfg.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    train_cfg = apply_dict(TrainConfig(env=task.env_cfg, agent=task.agent_cfg), state["config"])
    num_envs = cfg.num_envs or cfg.episodes
    env_cfg = dataclasses.replace(
        train_cfg.env, num_envs=num_envs, obs_noise=cfg.obs_noise, random_initial_episode_length=False
    )
    env = VecEnv(env_cfg, task.build(env_cfg), device, seed=cfg.seed)
    policy = build_policy(env, train_cfg, device)
    restore_policy(policy, state, path)
    policy.eval()
    returns, lengths, extra = run_episodes(env, policy, cfg.episodes, task.play_metrics)
    return {
        **{f"mean_{name}": value for name, value in extra.items()},
        "task": task.name,
        "checkpoint": str(path),
        "iteration": state["iteration"],
        "episodes": len(returns),
        "mean_return": sum(returns) / len(returns),
        "mean_length": sum(lengths) / len(lengths),
        "min_return": min(returns),
        "max_return": max(returns),
    }


def run_episodes(env, policy, episodes: int, metrics_fn=None) -> tuple[list[float], list[int], dict[str, float]]:
    """Each env runs ceil(episodes / num_envs) whole episodes from a reset; the first `episodes`
    count. `metrics_fn(env)` values are averaged over the steps of the counted episodes. Host
    synchronisation every step is fine here: this is evaluation, not training."""
    import torch

    per_env = math.ceil(episodes / env.num_envs)
    finished: list[list[tuple[float, int]]] = [[] for _ in range(env.num_envs)]
    obs = env.reset()
    episode_return = torch.zeros(env.num_envs, device=env.device)
    episode_length = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
    sums: dict[str, float] = {}
    steps = 0
    with torch.no_grad():
        while min(len(f) for f in finished) < per_env:
            counting = torch.tensor([len(f) < per_env for f in finished], device=env.device)
            obs, reward, terminated, truncated, _ = env.step(policy.act_deterministic(obs["actor"]))
            if metrics_fn is not None:
                for name, value in metrics_fn(env).items():
                    sums[name] = sums.get(name, 0.0) + float(value[counting].sum())
                steps += int(counting.sum())
            episode_return += reward
            episode_length += 1
            done = terminated | truncated
            for i in done.nonzero().flatten().tolist():
                finished[i].append((episode_return[i].item(), int(episode_length[i])))
            episode_return *= ~done
            episode_length *= ~done
    pairs = [p for f in finished for p in f[:per_env]][:episodes]
    means = {name: total / max(steps, 1) for name, total in sums.items()}
    return [r for r, _ in pairs], [n for _, n in pairs], means


def main(argv: list[str] | None = None) -> int:
    return run_command("play", _play, argv)


if __name__ == "__main__":
    sys.exit(main())
