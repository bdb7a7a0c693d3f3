"""RL layer: the algorithm interface, PPO, its networks and its observation normaliser. Knows
nothing of simulators: observations, rewards and done flags arrive as tensors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from mjrl.rl.algorithm import Algorithm, EnvInfo, Observations
from mjrl.rl.config import (
    AgentConfig,
    DistillationConfig,
    PolicyConfig,
    PpoConfig,
    RunnerConfig,
    SymmetryConfig,
)
from mjrl.rl.networks import ActorCritic, build_actor_critic

if TYPE_CHECKING:
    from mjrl.distributed import DistContext

__all__ = [
    "ActorCritic",
    "AgentConfig",
    "AgentSections",
    "Algorithm",
    "DistillationConfig",
    "EnvInfo",
    "Observations",
    "PolicyConfig",
    "PpoConfig",
    "RunnerConfig",
    "SymmetryConfig",
    "build_actor_critic",
    "check_agent_config",
    "make_algorithm",
]


class AgentSections(Protocol):
    """The sections of a run's config that choose and build its algorithm (`TrainConfig` and
    `AgentConfig` have them)."""

    algorithm: PpoConfig
    policy: PolicyConfig
    distillation: DistillationConfig


def check_agent_config(
    cfg: AgentSections, task_name: str, observation_groups: set[str], symmetry_problem: Callable[[], str | None]
) -> None:
    """Refuse, before anything is built or written, what the task cannot train with: symmetry
    the task cannot do (`symmetry_problem()` says why, or None), distillation without a
    "teacher" observation group or a teacher checkpoint, or with symmetry."""
    from mjrl.errors import UsageError

    if cfg.distillation.teacher:
        from mjrl.rl.distillation import TEACHER_GROUP

        if TEACHER_GROUP not in observation_groups:
            raise UsageError(
                f"--distillation.teacher needs a task with a {TEACHER_GROUP!r} observation group, which {task_name} "
                "lacks; distil into a student task (e.g. Mjrl-Velocity-Flat-Quadruped-Student)"
            )
        if cfg.algorithm.symmetry.enabled:
            raise UsageError("--algorithm.symmetry is PPO's: drop it, or drop --distillation.teacher")
        teacher = Path(cfg.distillation.teacher)
        if not teacher.is_file() and not any(teacher.glob("checkpoints/model_*.pt")):
            raise UsageError(f"--distillation.teacher {teacher}: no checkpoint file or run directory with checkpoints")
    elif cfg.algorithm.symmetry.enabled and (problem := symmetry_problem()) is not None:
        raise UsageError(f"--algorithm.symmetry needs a task that mirrors left and right; {task_name}: {problem}")


def make_algorithm(cfg: AgentSections, env: EnvInfo, num_steps: int, ctx: DistContext, seed: int) -> Algorithm:
    """The algorithm a run trains with on `env`, for rollouts of `num_steps` steps: PPO, or
    distillation when `cfg.distillation` names a teacher. Its initial weights and its generator
    come from `seed` alone, whatever else has drawn from torch's global generator."""
    import torch

    with torch.random.fork_rng(devices=[]):  # torch's layers initialise from the global generator
        torch.manual_seed(seed)
        policy = build_actor_critic(env.obs_dims, env.num_actions, cfg.policy, ctx.device, env.obs_std_floors)
    algorithm: Algorithm
    if cfg.distillation.teacher:
        from mjrl.rl.distillation import Distillation, load_teacher

        teacher = load_teacher(cfg.distillation, env, ctx.device)
        algorithm = Distillation(policy, teacher, cfg.distillation, ctx, env.num_envs, num_steps)
    else:
        from mjrl.rl.ppo import PPO

        if cfg.algorithm.symmetry.enabled and env.mirrors is None:
            from mjrl.errors import UsageError

            raise UsageError(f"--algorithm.symmetry: the task's mirrors do not hold: {env.mirror_problem}")
        algorithm = PPO(policy, cfg.algorithm, ctx, env.num_envs, num_steps, env.mirrors)
    algorithm.generator.manual_seed(seed)
    return algorithm
