"""How a rank starts or resumes a job: the run directory, the checkpoint, and lockstep with
rank 0. Rank 0 decides; every other rank learns the decision through a collective."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import torch

from mjrl.distributed import DistContext
from mjrl.envs import VecEnv
from mjrl.errors import SharedUsageError, UsageError
from mjrl.rl.networks import ActorCritic
from mjrl.rl.ppo import PPO, merge_into
from mjrl.runner.checkpoint import load_newest_checkpoint
from mjrl.runner.config import TrainConfig
from mjrl.runner.run_dir import claim_run_dir, newest_run_dir


def build_policy(env: VecEnv, cfg: TrainConfig, device: torch.device) -> ActorCritic:
    a = cfg.agent
    return ActorCritic(
        env.obs_dims["actor"],
        env.obs_dims["critic"],
        env.num_actions,
        a.actor_hidden_dims,
        a.critic_hidden_dims,
        a.activation,
        a.init_noise_std,
        a.normalize_observations,
        a.obs_std_offset,
    ).to(device)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def reseed_after_resume(seed: int, iteration: int, *generators: torch.Generator) -> None:
    """Ranks other than 0 keep no checkpoint of their random streams: after a resume they go
    on with fresh streams of their own, the global one included (it draws the action noise).
    Reseeding only their generators made them replay the action noise of their start-up."""
    reseed = seed + 7919 * iteration
    seed_everything(reseed)
    for generator in generators:
        generator.manual_seed(reseed)


def resume_dir_of(task_name: str, cfg: TrainConfig) -> Path | None:
    if cfg.resume_dir:
        path = Path(cfg.resume_dir)
        if not path.is_dir():
            raise UsageError(f"--resume-dir {path}: no such run directory")
        return path
    return newest_run_dir(cfg.log_root, task_name) if cfg.resume else None


def restore_policy(policy: ActorCritic, state: dict, source: Path) -> None:
    try:
        policy.load_state_dict(state["policy"])
    except RuntimeError as exc:
        raise UsageError(
            f"checkpoint {source} does not fit this task's policy (different observation, action or "
            f"layer sizes): {str(exc).splitlines()[1].strip() if len(str(exc).splitlines()) > 1 else exc}"
        ) from exc


def restore_policy_everywhere(ctx: DistContext, policy: ActorCritic, state: dict | None, source: Path | None) -> None:
    """Rank 0 (which alone holds the checkpoint) loads its weights; if they do not fit the
    configured network, every rank raises the same error. Raised on rank 0 alone, it left the
    others in the next collective until their watchdogs ended the job with exit code 75."""
    error = ""
    if state is not None:
        try:
            restore_policy(policy, state, source)
        except UsageError as exc:
            error = str(exc)
    error = ctx.broadcast_text(error)
    if error:
        raise SharedUsageError(error)


def check_task(state: dict, task_name: str, source: Path) -> None:
    if state.get("task") != task_name:
        raise UsageError(f"checkpoint {source} belongs to task {state.get('task')!r}, not {task_name!r}")


def choose_run_dir(task_name: str, cfg: TrainConfig, ctx: DistContext) -> tuple[Path, bool]:
    """(run directory, whether to continue from its checkpoints). Decided on rank 0 only.

    Inside an elastic job (torchrun or the built-in launcher) the directory is recorded under
    the job id, so every restart of the same job continues the same run."""
    explicit = resume_dir_of(task_name, cfg)
    if explicit is not None:
        return explicit, True
    if ctx.job_id is None:
        return claim_run_dir(cfg.log_root, task_name, cfg.run_name), False
    marker = Path(cfg.log_root) / task_name / ".jobs" / ctx.job_id
    if marker.is_file():
        run_dir = Path(marker.read_text().strip())
        return run_dir, any((run_dir / "checkpoints").glob("model_*.pt"))
    run_dir = claim_run_dir(cfg.log_root, task_name, cfg.run_name)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(str(run_dir))
    return run_dir, False


def agree_on_run(task_name: str, cfg: TrainConfig, ctx: DistContext) -> tuple[Path, Path | None, dict | None, bool]:
    """Rank 0 picks the run directory and loads the checkpoint to resume from; every rank
    learns the directory (and rank 0's usage error, if any, so that all ranks stop cleanly)."""
    outcome, source, state = "", None, None
    if ctx.is_main:
        try:
            run_dir, resume = choose_run_dir(task_name, cfg, ctx)
            if resume:
                source, state = load_newest_checkpoint(run_dir)
                check_task(state, task_name, source)
            outcome = f"ok\t{run_dir}\t{int(resume)}"
        except UsageError as exc:
            outcome = f"error\t{exc}"
    kind, *rest = ctx.broadcast_text(outcome).split("\t")
    if kind == "error":
        raise SharedUsageError(rest[0])
    return Path(rest[0]), source, state, rest[1] == "1"


@torch.no_grad()
def warm_up_normalizers(env: VecEnv, ppo: PPO, ctx: DistContext, steps: int) -> int:
    """Start the observation normalisers from one rollout of the untrained policy (every rank's),
    not from the first observations alone; returns the env steps this took on all ranks. With
    `steps` 0 it merges the first observations only (`AgentConfig.warm_up_normalizers` off).

    At a reset every robot is near its home pose, so statistics of the first observations are far
    too narrow (the quadruped's joint velocities: std 1.4 there against 5.9 under the first
    policy). Normalised with them, iteration 0's inputs were twice as large as later ones and its
    first update moved the policy by a KL of 0.3 against about 0.013 afterwards, which drove the
    adaptive learning rate to its floor. Features that still do not vary (a last action before
    any action) keep unit variance: their scale is unknown, and a tiny one would blow up the
    first rollout's deviations.
    """
    normalizers = {"actor": ppo.policy.actor_normalizer, "critic": ppo.policy.critic_normalizer}
    normalizers = {group: n for group, n in normalizers.items() if n is not None}
    if not normalizers:
        return 0

    def merge(group: str, obs: torch.Tensor) -> None:
        normalizer = normalizers[group]
        normalizer.reset()
        merge_into(normalizer, obs, ctx)
        normalizer.var.masked_fill_(normalizer.var < 1e-6, 1.0)

    # The warm-up policy sees the first observations' statistics; then all of them replace those.
    seen = {group: [env.obs[group]] for group in normalizers}
    for group in normalizers:
        merge(group, env.obs[group])
    for _ in range(steps):
        obs, *_ = env.step(ppo.act(env.obs["actor"], env.obs["critic"])["actions"])
        for group in normalizers:
            seen[group].append(obs[group])
    for group in normalizers:
        merge(group, torch.cat(seen[group]))
    env.pop_term_stats()  # the warm-up's reward terms are not iteration 0's
    return steps * env.num_envs * ctx.world_size
