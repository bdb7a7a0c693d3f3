"""The one way to rebuild a trained policy: find and check its checkpoint, rebuild the env config
and the policy config it was trained with, and load its weights into a fresh env and policy.
`play`, videos, export, the benchmark scripts and the tests all start here."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mjrl.errors import UsageError

if TYPE_CHECKING:
    import torch

    from mjrl.envs import EnvConfig, Task, VecEnv
    from mjrl.rl import TrainedPolicy


def load_checkpoint_of(task: Task, checkpoint: str | None, run_dir: str | None) -> tuple[Path, dict]:
    """The checkpoint a tool reads: a file, or the newest readable one of a run directory."""
    from mjrl.checkpoint import check_task, load_checkpoint, load_newest_checkpoint

    if bool(checkpoint) == bool(run_dir):
        raise UsageError("give exactly one of --checkpoint PATH or --run-dir DIR")
    if run_dir:
        if not Path(run_dir).is_dir():
            raise UsageError(f"--run-dir {run_dir}: no such run directory")
        path, state = load_newest_checkpoint(Path(run_dir))
    else:
        path = Path(checkpoint)
        state = load_checkpoint(path)
    check_task(state, task.name, path)
    return path, state


def trained_env_config(task: Task, state: dict | None) -> EnvConfig:
    """The env config a checkpoint was trained with (the task's defaults without a checkpoint)."""
    from mjrl.config import apply_dict

    if state is None:
        return task.env_cfg
    return apply_dict(task.env_cfg, state["config"]["env"], "env.")


def load_trained(
    task: Task, state: dict, source: Path, env_cfg: EnvConfig, device: torch.device, seed: int = 0
) -> tuple[VecEnv, TrainedPolicy]:
    """An env built from `env_cfg` and the checkpoint's policy on it (`mjrl.rl.load_policy`: of
    whatever kind it was trained as), in eval mode."""
    from mjrl.envs import VecEnv
    from mjrl.rl import load_policy

    env = VecEnv(env_cfg, task.build(env_cfg), device, seed=seed)
    policy = load_policy(state, source, task.agent_cfg.policy, env.obs_spec, env.num_actions, device)
    return env, policy
