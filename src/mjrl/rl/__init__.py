"""RL layer: the algorithm interface, PPO, its networks and its observation normaliser. Knows
nothing of simulators: observations, rewards and done flags arrive as tensors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mjrl.rl.algorithm import Algorithm, EnvInfo, Observations
from mjrl.rl.config import (
    AgentConfig,
    DistillationConfig,
    PolicyConfig,
    PpoConfig,
    RunnerConfig,
    SacConfig,
    SymmetryConfig,
)
from mjrl.rl.networks import ActorCritic, build_actor_critic
from mjrl.rl.policies import (
    PolicyKind,
    TrainedPolicy,
    build_policy,
    check_policy_kind,
    load_policy,
    policy_kind_names,
    register_policy_kind,
)
from mjrl.rl.registry import (
    AlgorithmSpec,
    TaskFacts,
    algorithm_names,
    algorithm_spec,
    chosen_spec,
    register_algorithm,
)

if TYPE_CHECKING:
    from mjrl.distributed import DistContext

__all__ = [
    "ActorCritic",
    "AgentConfig",
    "AgentSections",
    "Algorithm",
    "AlgorithmSpec",
    "DistillationConfig",
    "EnvInfo",
    "Observations",
    "PolicyConfig",
    "PolicyKind",
    "PpoConfig",
    "RunnerConfig",
    "SacConfig",
    "SymmetryConfig",
    "TaskFacts",
    "TrainedPolicy",
    "algorithm_names",
    "algorithm_spec",
    "build_actor_critic",
    "build_policy",
    "check_agent_config",
    "check_policy_kind",
    "chosen_spec",
    "load_policy",
    "make_algorithm",
    "policy_kind_names",
    "register_algorithm",
    "register_policy_kind",
]


class AgentSections(Protocol):
    """The sections of a run's config that build its algorithm (`TrainConfig` and `AgentConfig`
    have them; `TrainConfig.algo` chooses it, PPO without)."""

    algorithm: Any
    policy: PolicyConfig


def check_agent_config(
    cfg: AgentSections, task_name: str, observation_groups: set[str], symmetry_problem: Callable[[], str | None]
) -> None:
    """Refuse, before anything is built or written, what the task cannot train with: an unknown
    algorithm or policy kind, and what the chosen algorithm's own check refuses (PPO: symmetry
    the task cannot do; distillation: a task without a "teacher" observation group, no teacher
    checkpoint)."""
    from mjrl.errors import UsageError

    spec = chosen_spec(cfg)
    check_policy_kind(cfg.policy.kind)
    if cfg.policy.kind not in ("auto", spec.policy_kind) and spec.policy_kind != "mlp":
        # An algorithm with a kind of its own (SAC's squashed actor) trains that kind only.
        raise UsageError(f"--algo {spec.name} trains --policy.kind {spec.policy_kind} (or auto), not {cfg.policy.kind}")
    _check_recurrent(cfg, spec)
    if spec.check is not None:
        spec.check(cfg, TaskFacts(task_name, observation_groups, symmetry_problem))


def _check_recurrent(cfg: AgentSections, spec: AlgorithmSpec) -> None:
    """A memory only for the `recurrent` kind, which PPO and distillation train, windows no
    shorter than their burn-in, and as many windows for each minibatch."""
    from mjrl.errors import UsageError
    from mjrl.rl.registry import policy_kind_of

    policy = cfg.policy

    kind = policy_kind_of(policy.kind, spec.name, policy.rnn_type)
    if kind == "recurrent" and policy.rnn_type == "none":
        raise UsageError("--policy.kind recurrent needs a memory: --policy.rnn-type lstm or gru")
    if policy.rnn_type == "none":
        return
    if kind != "recurrent":
        raise UsageError(
            f"--policy.rnn-type {policy.rnn_type}: the {kind} policy kind has no memory; recurrent policies are "
            "--policy.kind auto (or recurrent) with --algo ppo or distillation"
        )
    if policy.rnn_sequence_length < policy.rnn_burn_in:
        raise UsageError(
            f"--policy.rnn-sequence-length {policy.rnn_sequence_length} is shorter than --policy.rnn-burn-in "
            f"{policy.rnn_burn_in}: a window should learn from at least as many steps as it warms up on"
        )
    _check_windows(cfg)


def _check_windows(cfg: AgentSections) -> None:
    """A burn-in that some window runs, and minibatches that split the windows evenly (N envs x
    ceil(T / length) windows)."""
    from mjrl.errors import UsageError

    envs = getattr(getattr(cfg, "env", None), "num_envs", None)
    runner = getattr(cfg, "runner", None)
    if envs is None or runner is None:
        return
    steps, minibatches = runner.num_steps_per_env, getattr(cfg.algorithm, "num_mini_batches", 1)
    length, burn_in = cfg.policy.rnn_sequence_length, cfg.policy.rnn_burn_in
    if burn_in and length >= steps:  # one window per rollout, at its start: nothing before it to warm up on
        fix = f"a sequence length from {burn_in} to {steps - 1}"
        if burn_in >= steps:
            fix = f"a burn-in under {steps} and a sequence length from it to {steps - 1}"
        raise UsageError(
            f"--policy.rnn-burn-in {burn_in} is never run: --policy.rnn-sequence-length {length} spans the whole "
            f"rollout of {steps} steps (--runner.num-steps-per-env), so each window starts at its first step; "
            f"give {fix}, or --policy.rnn-burn-in 0"
        )
    chunks = -(-steps // min(length, steps))
    if (envs * chunks) % minibatches:
        raise UsageError(
            f"--algorithm.num-mini-batches {minibatches} does not divide the update's {envs * chunks} windows "
            f"(--env.num-envs {envs} x {chunks} per rollout of {steps} steps, --policy.rnn-sequence-length "
            f"{cfg.policy.rnn_sequence_length}): give a divisor of {envs * chunks}"
        )


def make_algorithm(cfg: AgentSections, env: EnvInfo, num_steps: int, ctx: DistContext, seed: int) -> Algorithm:
    """The algorithm a run trains with on `env` (`--algo`; PPO without), for rollouts of
    `num_steps` steps. Its initial weights (the policy's and the algorithm's own networks')
    and its generator come from `seed` alone, whatever else has drawn from torch's global
    generator."""
    import torch

    from mjrl.errors import UsageError
    from mjrl.rl.algorithm import update_every

    spec = chosen_spec(cfg)
    with torch.random.fork_rng(devices=[]):  # torch's layers initialise from the global generator
        torch.manual_seed(seed)
        policy = build_policy(env.obs_spec, env.num_actions, cfg.policy, ctx.device, spec.name)
        # An algorithm's own networks (SAC's critics) too.
        algorithm = spec.build(cfg, policy, env, num_steps, ctx)
    every = update_every(algorithm)
    if every and num_steps % every:
        raise UsageError(
            f"--algo {spec.name} learns every {every} env steps, which does not divide --runner.num-steps-per-env "
            f"{num_steps}: give a multiple of {every}"
        )
    algorithm.generator.manual_seed(seed)
    return algorithm


# ------------------------------------------------------------------- mjrl's own algorithms


def _check_symmetry(cfg: AgentSections, task: TaskFacts) -> None:
    """`--algorithm.symmetry` (PPO's and SAC's) on a task that does not mirror."""
    from mjrl.errors import UsageError

    if cfg.algorithm.symmetry.enabled and (problem := task.symmetry_problem()) is not None:
        raise UsageError(f"--algorithm.symmetry needs a task that mirrors left and right; {task.name}: {problem}")


def _mirrors(cfg: AgentSections, env: EnvInfo) -> Any:
    """The env's mirrors when `--algorithm.symmetry` is on (None when off); refused when the
    task's mirror declarations do not hold on its model."""
    if not cfg.algorithm.symmetry.enabled:
        return None
    if env.mirrors is None:
        from mjrl.errors import UsageError

        raise UsageError(f"--algorithm.symmetry: the task's mirrors do not hold: {env.mirror_problem}")
    return env.mirrors


def _check_ppo(cfg: AgentSections, task: TaskFacts) -> None:
    _check_symmetry(cfg, task)


def _build_ppo(cfg: AgentSections, policy: ActorCritic, env: EnvInfo, num_steps: int, ctx: DistContext) -> Algorithm:
    from mjrl.rl.ppo import PPO
    from mjrl.rl.recurrent import RecurrentActorCritic

    if isinstance(policy, RecurrentActorCritic):
        from mjrl.rl.recurrent_ppo import RecurrentPPO

        return RecurrentPPO(policy, cfg.algorithm, cfg.policy, ctx, env.num_envs, num_steps, _mirrors(cfg, env))
    return PPO(policy, cfg.algorithm, ctx, env.num_envs, num_steps, _mirrors(cfg, env))


def _check_distillation(cfg: AgentSections, task: TaskFacts) -> None:
    from mjrl.errors import UsageError
    from mjrl.rl.distillation import TEACHER_GROUP

    if TEACHER_GROUP not in task.observation_groups:
        raise UsageError(
            f"--algo distillation needs a task with a {TEACHER_GROUP!r} observation group, which {task.name} "
            "lacks; distil into a student task (e.g. Mjrl-Velocity-Flat-Quadruped-Student)"
        )
    if cfg.policy.rnn_type != "none" and cfg.policy.rnn_networks == "critic":
        raise UsageError(
            "a recurrent student reads through an actor memory: --policy.rnn-networks actor or both, not critic"
        )
    teacher = Path(cfg.algorithm.teacher)
    if not cfg.algorithm.teacher:
        raise UsageError("--algo distillation needs a teacher: --algorithm.teacher RUN_DIR or checkpoint")
    if not teacher.is_file() and not any(teacher.glob("checkpoints/model_*.pt")):
        raise UsageError(f"--algorithm.teacher {teacher}: no checkpoint file or run directory with checkpoints")


def _build_distillation(
    cfg: AgentSections, policy: ActorCritic, env: EnvInfo, num_steps: int, ctx: DistContext
) -> Algorithm:
    from mjrl.rl.distillation import Distillation, load_teacher
    from mjrl.rl.recurrent import RecurrentActorCritic

    teacher = load_teacher(cfg.algorithm, env, ctx.device)
    if isinstance(policy, RecurrentActorCritic):
        from mjrl.rl.recurrent_distillation import RecurrentDistillation

        return RecurrentDistillation(policy, teacher, cfg.algorithm, cfg.policy, ctx, env.num_envs, num_steps)
    return Distillation(policy, teacher, cfg.algorithm, ctx, env.num_envs, num_steps)


def _check_sac(cfg: AgentSections, task: TaskFacts) -> None:
    """What a SAC run cannot train with, before anything is built: symmetry on a task that does
    not mirror, a ring that cannot hold a batch, or n-step windows longer than the ring."""
    from mjrl.errors import UsageError

    _check_symmetry(cfg, task)
    sac, envs = cfg.algorithm, getattr(getattr(cfg, "env", None), "num_envs", None)
    if sac.n_step > sac.buffer_steps:
        raise UsageError(
            f"--algorithm.n-step {sac.n_step} is longer than the ring (--algorithm.buffer-steps {sac.buffer_steps}): "
            "give n-step at most buffer-steps"
        )
    if envs is not None and sac.buffer_steps * envs < sac.batch_size:
        raise UsageError(
            f"the ring holds {sac.buffer_steps * envs} transitions (--algorithm.buffer-steps {sac.buffer_steps} x "
            f"--env.num-envs {envs}), fewer than a batch (--algorithm.batch-size {sac.batch_size}): raise "
            "buffer-steps or lower batch-size"
        )


def _build_sac(cfg: AgentSections, policy: Any, env: EnvInfo, num_steps: int, ctx: DistContext) -> Algorithm:
    from mjrl.rl.sac import SAC

    return SAC(policy, cfg.algorithm, cfg.policy, env, ctx, _mirrors(cfg, env))


register_algorithm(
    AlgorithmSpec("ppo", PpoConfig, _build_ppo, "PPO (rsl_rl's), settings --algorithm.*", check=_check_ppo)
)
register_algorithm(
    AlgorithmSpec(
        "distillation",
        DistillationConfig,
        _build_distillation,
        "teacher-student distillation (DAgger), settings --algorithm.* (--algorithm.teacher RUN)",
        check=_check_distillation,
    )
)
register_algorithm(
    AlgorithmSpec(
        "sac",
        SacConfig,
        _build_sac,
        "soft actor-critic (FastSAC's family: distributional twin critics, n-step, replay ring), --algorithm.*",
        check=_check_sac,
        policy_kind="squashed",
    )
)
