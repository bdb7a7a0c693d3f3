"""Which run a job writes or continues, and how a resume takes everything back, top to bottom.

Rank 0 decides and every other rank learns the decision through a collective:
1. `agree_on_run`: the run directory (a fresh one, the one `--resume`/`--resume-dir` names, or
   the one an elastic restart of the same job continues: `choose_run_dir`) and, to resume, its
   newest readable checkpoint (`mjrl.checkpoint`, the one module that reads checkpoint files);
   every rank checks it was given rank 0's experiment (`check_same_config`).
2. `resume`, once the env and the algorithm are built: rank 0's algorithm takes back its
   weights, optimizer and bulky state (`restore_bulk_state`); every rank its env state
   (`restore_env_state`); rank 0 its random streams and counters
   (`restore_streams_and_counters`); then every rank takes rank 0's learning state and
   counters, and the other ranks go on with fresh random streams (`reseed_after_resume`).
The CLI asks `resumed_run_config_file` which run a command line continues before it parses the
flags, since that run's config is what they change.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from mjrl.checkpoint import bulk_path, check_task, load_bulk_state, load_newest_checkpoint, load_weights
from mjrl.config import to_dict
from mjrl.distributed import DistContext
from mjrl.distributed.context import TORCHRUN_DEFAULT_JOB_ID
from mjrl.envs import VecEnv
from mjrl.errors import SharedUsageError, UsageError
from mjrl.files import make_dirs, write_text
from mjrl.rl import Algorithm
from mjrl.runner.config import TRAINED, TrainConfig
from mjrl.runner.run_dir import claim_run_dir, newest_config, newest_run_dir
from mjrl.runner.state import RngStates, TrainingState, seed_everything, sync_from_main


@dataclasses.dataclass(frozen=True)
class ResumeTarget:
    """Which run a command line continues, as its flags (or its preset or config file) say,
    read before the config is composed: that run's config is what the flags change."""

    resume: bool = False
    resume_dir: str = ""
    log_root: str = TrainConfig.log_root


def resume_dir_of(task_name: str, cfg: TrainConfig | ResumeTarget) -> Path | None:
    if cfg.resume_dir:
        path = Path(cfg.resume_dir)
        if not path.is_dir():
            raise UsageError(f"--resume-dir {path}: no such run directory")
        return path
    return newest_run_dir(cfg.log_root, task_name) if cfg.resume else None


def resumed_run_config_file(task_name: str, cfg: ResumeTarget) -> Path | None:
    """The config file of the run that `cfg` continues (what it last ran with), which a resume
    starts from; None for a fresh run. Also None when the run is missing here: rank 0 reports
    that once the job starts, and a rank on a node without the run's folder must not stop
    before the others (`agree_on_run` then finds that it was given another config)."""
    try:
        run_dir = resume_dir_of(task_name, cfg)
    except UsageError:
        return None
    return newest_config(run_dir) if run_dir is not None else None


def choose_run_dir(task_name: str, cfg: TrainConfig, ctx: DistContext) -> tuple[Path, bool]:
    """(run directory, whether to continue from its checkpoints). Decided on rank 0 only.

    Inside an elastic job (torchrun or the built-in launcher) the directory is recorded under
    the job id (`DistContext.run_key`), so every restart of the same job continues the same
    run. A torchrun launch without an id of its own starts a new run (a recycled agent pid
    must not pick up an old launch's marker); only its restarts continue it."""
    explicit = resume_dir_of(task_name, cfg)
    if explicit is not None:
        return explicit, True
    if ctx.job_id is None:
        return claim_run_dir(cfg.log_root, task_name, cfg.run_name), False
    marker = Path(cfg.log_root) / task_name / ".jobs" / str(ctx.run_key)
    new_launch = ctx.job_id == TORCHRUN_DEFAULT_JOB_ID and ctx.restart_count == 0
    if marker.is_file() and not new_launch:
        run_dir = Path(marker.read_text().strip())
        return run_dir, any((run_dir / "checkpoints").glob("model_*.pt"))
    run_dir = claim_run_dir(cfg.log_root, task_name, cfg.run_name)
    make_dirs(marker.parent)
    write_text(marker, str(run_dir))
    return run_dir, False


def trained_digest(task_name: str, cfg: TrainConfig) -> str:
    """A digest of what `cfg` trains (`TRAINED`: not the per-node launch options)."""
    trained = {"task": task_name, **{k: v for k, v in to_dict(cfg).items() if k in TRAINED}}
    return hashlib.sha256(json.dumps(trained, sort_keys=True).encode()).hexdigest()


def agree_on_run(task_name: str, cfg: TrainConfig, ctx: DistContext) -> tuple[Path, Path | None, dict | None, bool]:
    """Rank 0 picks the run directory and loads the checkpoint to resume from; every rank
    learns the directory (and rank 0's usage error, if any, so that all ranks stop cleanly).
    Every rank must also have been given rank 0's experiment: ranks parse their own command
    lines, and a resume takes its config from the run's folder, which a node may lack."""
    check_same_config(task_name, cfg, ctx)
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


def check_same_config(task_name: str, cfg: TrainConfig, ctx: DistContext) -> None:
    """Raise the same SharedUsageError on every rank if any rank was told to train something
    other than rank 0 (launch options such as --node-rank may differ)."""
    if not ctx.issues_collectives:
        return
    digest = trained_digest(task_name, cfg)
    ranks = ctx.ranks_where(ctx.broadcast_text(digest) != digest)
    if ranks:
        raise SharedUsageError(
            f"rank(s) {ranks} were given another config than rank 0 (other flags, or, when resuming, no copy of "
            "the run's folder on their node): give every node the same flags and the run's folder"
        )


def resume(
    ctx: DistContext, cfg: TrainConfig, checkpoint: dict | None, source: Path | None, algorithm: Algorithm, env: VecEnv
) -> TrainingState:
    """Continue a run where its checkpoint stopped, on every rank. Rank 0, which alone holds the
    checkpoint, loads the algorithm's whole state (weights that do not fit the configured
    networks raise the same error on every rank: raised on rank 0 alone, it left the others in
    the next collective until their watchdogs ended the job); every rank takes back its env
    state, rank 0 its random streams and counters; then every rank takes rank 0's learning
    state and counters, and the other ranks continue with fresh random streams of their own."""
    error = ""
    if checkpoint is not None:
        try:
            if "optimizer" not in checkpoint:  # a kept finished run, or a GPU window's thinned checkpoint
                raise UsageError(
                    f"checkpoint {source} holds no optimizer state (kept to play or thinned): it plays, exports "
                    "and teaches a student, it does not resume; start a new run"
                )
            load_weights(lambda: algorithm.load_state_dict(checkpoint), source)
            restore_bulk_state(algorithm, source)
        except UsageError as exc:
            error = str(exc)
    error = ctx.broadcast_text(error)
    if error:
        raise SharedUsageError(error)
    restore_env_state(ctx, checkpoint, env)  # before the random streams: envs may restart episodes
    state = TrainingState() if checkpoint is None else restore_streams_and_counters(checkpoint, algorithm, env)
    state = sync_from_main(ctx, algorithm, state)
    if checkpoint is None:
        reseed_after_resume(cfg.seed + ctx.rank, state.iteration, env.generator, algorithm.generator)
    return state


def restore_bulk_state(algorithm: Algorithm, source: Path) -> None:
    """Rank 0's algorithm takes back the bulky state saved beside its checkpoint (a replay
    buffer); without that file (not saved, or an older checkpoint) it starts that state empty,
    and says so."""
    if not hasattr(algorithm, "load_bulk_state"):
        return
    bulk = load_bulk_state(source)
    if bulk is None:
        print(f"note: no {bulk_path(source).name} beside {source.name}: the algorithm's bulky state starts empty")
        return
    try:
        algorithm.load_bulk_state(bulk)
    except (RuntimeError, KeyError, ValueError) as exc:  # shapes or names of another configuration
        raise UsageError(
            f"{bulk_path(source)} does not fit this run's algorithm ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}); delete it to resume without it"
        ) from exc


def restore_env_state(ctx: DistContext, checkpoint: dict[str, Any] | None, env: VecEnv) -> None:
    """Every rank takes back the env state it saved (rank 0 holds the checkpoint and sends each
    rank its own). A rank the checkpoint has none for (a run resumed on more ranks, or saved
    before every rank's was kept) takes rank 0's: its envs go on from the curriculum rank 0
    reached rather than from the first rows. A collective: every rank of a resume calls it,
    before the random streams are restored (the envs restart their episodes)."""
    saved: list[dict[str, torch.Tensor]] = checkpoint["env_ranks"] if checkpoint is not None else []
    if not ctx.issues_collectives:
        env.load_resume_state(saved[0] if saved else {})
        return
    template = env.resume_state()
    names = list(template)
    by_rank = {
        name: torch.zeros(ctx.world_size, *value.shape, dtype=value.dtype, device=ctx.device)
        for name, value in template.items()
    }
    present = torch.zeros(ctx.world_size, len(names), dtype=torch.long, device=ctx.device)
    for rank in range(ctx.world_size if saved else 0):
        source = saved[rank] if rank < len(saved) else saved[0]
        for k, name in enumerate(names):
            value = source.get(name)
            if value is not None and value.shape == template[name].shape:
                by_rank[name][rank] = value.to(ctx.device, template[name].dtype)
                present[rank, k] = 1
    ctx.broadcast_tensors([present, *by_rank.values()])
    mine = {name: by_rank[name][ctx.rank] for k, name in enumerate(names) if present[ctx.rank, k]}
    env.load_resume_state(mine)


def restore_streams_and_counters(checkpoint: dict[str, Any], algorithm: Algorithm, env: VecEnv) -> TrainingState:
    """The random streams restored in place (the algorithm's state and the env's were, before:
    `resume`); returns the run's counters."""
    RngStates.from_dict(checkpoint["rng"]).restore(env, algorithm)
    return TrainingState(
        iteration=checkpoint["iteration"],
        env_steps=checkpoint["env_steps"],
        wall_s=checkpoint["wall_s"],
        tracker_id=checkpoint["wandb_id"],
    )


def reseed_after_resume(seed: int, iteration: int, *generators: torch.Generator) -> None:
    """Ranks other than 0 keep no checkpoint of their random streams: after a resume they go
    on with fresh streams of their own (the env's, the algorithm's and the global ones), or
    they would replay the resets and action noise of their start-up."""
    reseed = seed + 7919 * iteration
    seed_everything(reseed)
    for generator in generators:
        generator.manual_seed(reseed)
