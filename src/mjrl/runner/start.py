"""How a rank builds its run, in one pass (`build_run`, the one way, for `train`, the
benchmarks and the tests): the config checked, the run directory and the checkpoint agreed on
(`mjrl.runner.resume`), the env and the algorithm built, then either a fresh start (lockstep
with rank 0, the warm-up) or a resume (`resume`), and the runner over them."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch

from mjrl.distributed import DistContext
from mjrl.distributed.preemption import StopFlag
from mjrl.envs import Task, VecEnv, check_task_spec, symmetry_problem
from mjrl.errors import UsageError
from mjrl.rl import AgentConfig, Algorithm, check_agent_config, make_algorithm
from mjrl.rl.algorithm import compile_loop
from mjrl.runner.config import TrainConfig, validate
from mjrl.runner.faults import fault_hooks
from mjrl.runner.graphs import loop_graphs
from mjrl.runner.hooks import LoopHook
from mjrl.runner.resume import agree_on_run, resume
from mjrl.runner.runner import Runner, RunParts
from mjrl.runner.state import TrainingState, seed_everything, sync_from_main


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


def warm_up(env: VecEnv, algorithm: Algorithm, ctx: DistContext, cfg: TrainConfig) -> int:
    """The algorithm's warm-up before a fresh run's first iteration, offered one rollout's
    steps (PPO's normalisers: one rollout with `warm_up_normalizers`, else the first
    observations); returns the env steps it took on every rank."""

    def step(actions: torch.Tensor) -> dict[str, torch.Tensor]:
        return env.step(actions)[0]

    steps = algorithm.warm_up(env.obs, step, cfg.runner.num_steps_per_env)
    env.pop_term_stats()  # the warm-up's reward terms are not iteration 0's
    return steps * env.num_envs * ctx.world_size
