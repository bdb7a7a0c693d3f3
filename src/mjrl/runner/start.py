"""How a rank starts or resumes a job, in one pass (`train`): the config checked, the run
directory and the checkpoint agreed on, the env and the algorithm built, then either a fresh
start (lockstep with rank 0, the warm-up) or a resume (`resume`: the whole learning state, the
env's state, the random streams and counters), and the loop run. Rank 0 decides; every other
rank learns the decision through a collective."""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mjrl.checkpoint import bulk_path, check_task, load_bulk_state, load_newest_checkpoint, load_weights
from mjrl.config import to_dict
from mjrl.distributed import DistContext
from mjrl.distributed.context import TORCHRUN_DEFAULT_JOB_ID
from mjrl.distributed.preemption import StopFlag
from mjrl.envs import Task, VecEnv, check_task_spec, symmetry_problem
from mjrl.errors import SharedUsageError, UsageError
from mjrl.files import make_dirs, write_text
from mjrl.rl import AgentConfig, Algorithm, check_agent_config, make_algorithm
from mjrl.runner.config import TRAINED, TrainConfig, validate
from mjrl.runner.faults import fault_hooks
from mjrl.runner.graphs import loop_graphs
from mjrl.runner.hooks import LoopHook
from mjrl.runner.run_dir import claim_run_dir, newest_config, newest_run_dir
from mjrl.runner.runner import Runner, RunParts
from mjrl.runner.state import TrainingState, restore_env_state, restore_streams_and_counters, sync_from_main


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def reseed_after_resume(seed: int, iteration: int, *generators: torch.Generator) -> None:
    """Ranks other than 0 keep no checkpoint of their random streams: after a resume they go
    on with fresh streams of their own (the env's, the algorithm's and the global ones), or
    they would replay the resets and action noise of their start-up."""
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


def resumed_run_config_file(task_name: str, cfg: TrainConfig) -> Path | None:
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
    if not ctx.is_distributed:
        return
    digest = trained_digest(task_name, cfg)
    ranks = ctx.ranks_where(ctx.broadcast_text(digest) != digest)
    if ranks:
        raise SharedUsageError(
            f"rank(s) {ranks} were given another config than rank 0 (other flags, or, when resuming, no copy of "
            "the run's folder on their node): give every node the same flags and the run's folder"
        )


def train(
    task: Task[AgentConfig],
    cfg: TrainConfig,
    ctx: DistContext,
    stop: StopFlag | None = None,
    given: TrainConfig | None = None,
    hooks: Sequence[LoopHook] = (),
) -> dict[str, Any]:
    """Run (or resume) one training job on this rank; returns its summary (see `build_run`)."""
    return build_run(task, cfg, ctx, stop, given, hooks).run()


def build_run(
    task: Task[AgentConfig],
    cfg: TrainConfig,
    ctx: DistContext,
    stop: StopFlag | None = None,
    given: TrainConfig | None = None,
    hooks: Sequence[LoopHook] = (),
) -> Runner:
    """The one way a run is built, for `train`, the benchmarks and the tests: the config
    checked, the run directory and the checkpoint agreed on (a resume resolved here, once), the
    env and the algorithm built, then either a fresh start (lockstep with rank 0, the warm-up)
    or the whole state restored (`resume`), and the runner over them. `given` is the config as
    the user gave it, recorded in config.yaml (default: `cfg`; the built-in launcher hands its
    workers a changed one); `hooks` run at the loop's fixed points, after `--fault`'s."""
    validate(cfg)
    hooks = [*fault_hooks(cfg.fault, ctx.rank, ctx.restart_count), *hooks]
    spec = task.build(cfg.env)
    check_task_spec(spec)
    check_agent_config(cfg, task.name, set(spec.observations), lambda: symmetry_problem(spec))
    run_dir, source, checkpoint, resumed = agree_on_run(task.name, cfg, ctx)

    seed_everything(cfg.seed + ctx.rank)
    try:
        env = VecEnv(cfg.env, spec, ctx.device, seed=cfg.seed + ctx.rank)
        ctx.wait_for_all("env built", cfg.startup_timeout_s)  # before the first collective
        algorithm = make_algorithm(cfg, env, cfg.runner.num_steps_per_env, ctx, seed=cfg.seed + ctx.rank)
        compile_loop(cfg.runner.compile, env, algorithm)
        graphs = loop_graphs(cfg.runner.cuda_graphs, ctx, env, [env.generator, algorithm.generator])
    except UsageError:
        # What only the built env can tell (joint names a term matches against the model, a
        # teacher reading other observations, whether the GPU can capture the loop): a fresh
        # run's directory is still empty, and is not left behind.
        if ctx.is_main and not resumed and ctx.job_id is None and not any(run_dir.iterdir()):
            run_dir.rmdir()
            with contextlib.suppress(OSError):  # the task's folder and the log root, when empty
                run_dir.parent.rmdir()
                run_dir.parent.parent.rmdir()
        raise
    if resumed:
        state = resume(ctx, cfg, checkpoint, source, algorithm, env)
        if ctx.is_main:
            print(f"resuming {run_dir} from iteration {state.iteration}", flush=True)
    else:
        state = sync_from_main(ctx, algorithm, TrainingState())  # rank 0's initial weights
        state.env_steps = warm_up(env, algorithm, ctx, cfg)
    parts = RunParts(task, env, algorithm, run_dir, state, resumed)
    return Runner(parts, cfg, ctx, stop=stop or StopFlag(), given=given, graphs=graphs, hooks=hooks)


def compile_loop(setting: str, env: VecEnv, algorithm: Algorithm) -> None:
    """`--runner.compile`: step fuses the rollout step (the env's and the policy's), update the
    update, all both."""
    rollout, update = setting in ("step", "all"), setting in ("update", "all")
    if (rollout or update) and not hasattr(algorithm, "compile"):  # a plugin's, written before it
        raise UsageError(f"--runner.compile {setting}: {type(algorithm).__name__} has no compile(); use off")
    if rollout:
        env.compile()
    if rollout or update:
        algorithm.compile(rollout, update)


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
    algorithm.load_bulk_state(bulk)


def warm_up(env: VecEnv, algorithm: Algorithm, ctx: DistContext, cfg: TrainConfig) -> int:
    """The algorithm's warm-up before a fresh run's first iteration, offered one rollout's
    steps (PPO's normalisers: one rollout with `warm_up_normalizers`, else the first
    observations); returns the env steps it took on every rank."""

    def step(actions: torch.Tensor) -> dict[str, torch.Tensor]:
        return env.step(actions)[0]

    steps = algorithm.warm_up(env.obs, step, cfg.runner.num_steps_per_env)
    env.pop_term_stats()  # the warm-up's reward terms are not iteration 0's
    return steps * env.num_envs * ctx.world_size
