"""The top-level training config, and turning configs into plain dicts (YAML) and back."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Generic, Literal, TypeVar

from mjrl.envs import EnvConfig
from mjrl.errors import UsageError
from mjrl.rl.config import AgentConfig

EnvT = TypeVar("EnvT", bound=EnvConfig)


@dataclasses.dataclass(frozen=True)
class TrainConfig(Generic[EnvT]):
    """Train a policy with PPO on MuJoCo-Warp worlds."""

    env: EnvT
    """Task and simulation settings."""
    agent: AgentConfig = AgentConfig()
    """PPO, policy and training-loop settings."""
    device: str = "auto"
    """auto (cuda:<LOCAL_RANK> if CUDA is present, else cpu), cpu, cuda, or cuda:N."""
    seed: int = 42
    """Random seed; rank r uses seed + r."""
    log_root: str = "logs"
    """Runs are written to <log-root>/<task>/<YYYY-mm-dd_HH-MM-SS>[_<run-name>]/."""
    run_name: str = ""
    """Suffix of the run directory name, and the WandB run name."""
    logger: Literal["wandb", "tensorboard", "none"] = "tensorboard"
    """Experiment tracker besides metrics.jsonl (always written). WandB goes offline by itself
    when there is no API key or no network."""
    wandb_project: str = "mjrl"
    """WandB project name."""
    resume: bool = False
    """Continue the newest run of this task from its newest checkpoint, in the same directory."""
    resume_dir: str = ""
    """Continue this run directory instead of the newest one (implies resume)."""
    distributed: bool = False
    """Run as one rank of a job started by torchrun (`torchrun ... --no_python train TASK
    --distributed True`): rank, world size and rendezvous come from the launcher's variables."""
    nproc_per_node: int = 0
    """Start this many ranks on this node with mjrl's built-in elastic launcher (0: one process,
    no launcher)."""
    nnodes: int = 1
    """Nodes of the job (built-in launcher); start `train` on each node with the same flags."""
    node_rank: int = -1
    """This node's rank for a static rendezvous at --rdzv-endpoint (-1: c10d rendezvous assigns
    node ranks)."""
    rdzv_endpoint: str = ""
    """HOST:PORT where the nodes meet (needed with --nnodes > 1; default: a free local port)."""
    rdzv_id: str = ""
    """Job id shared by all nodes (needed with --nnodes > 1; default: a fresh id). Restarts of
    the same job id continue the same run directory."""
    rdzv_timeout_s: float = 60.0
    """How long the built-in launcher waits for all nodes to join the rendezvous."""
    max_restarts: int = 0
    """Restart the workers of this node up to this many times after a failure; each restart
    resumes from the newest checkpoint (torch counts restarts per node)."""
    collective_timeout_s: float = 300.0
    """Timeout of every collective operation (torch's defaults are 10 to 30 minutes)."""
    hang_timeout_s: float = 60.0
    """A rank that stops making progress (or stops answering) for this long stops the whole job,
    named in the error. Must cover the slowest iteration phase between two heartbeats."""
    video_interval: int = 0
    """Every this many iterations (from the first), record `video_seconds` of the training env's
    first world and draw it into <run-dir>/videos/iteration_N.mp4 in a separate low-priority
    process; also sent to TensorBoard (as a GIF) or WandB. 0: never."""
    video_seconds: float = 5.0
    """Length of a training clip in simulated seconds."""
    export: Literal["none", "onnx", "torchscript"] = "none"
    """At the end of training, also write the deterministic actor in this format to
    <run-dir>/exported/ (as `mjrl export` does)."""
    fault: str = ""
    """Testing only: inject a fault, KIND@RANK:ITERATION with KIND one of raise, exit, kill,
    hang, perturb, nan (see mjrl/runner/faults.py)."""
    torch_threads: int = 0
    """CPU threads for torch in this process; 0 picks, on the CPU, one thread for the rollout
    (small batched ops, while Warp steps the physics on one thread) and the cores of the machine
    shared out among the ranks on this node for the PPO update (1.8 s -> 1.1 s per quadruped
    update of 12,288 samples on 2 cores); on a GPU, torch's default."""


def to_dict(cfg: Any) -> Any:
    """Dataclasses to nested dicts of plain values (tuples become lists), for YAML and checkpoints."""
    if dataclasses.is_dataclass(cfg):
        return {f.name: to_dict(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)}
    if isinstance(cfg, tuple):
        return [to_dict(v) for v in cfg]
    return cfg


def apply_dict(cfg: Any, values: dict, where: str = "") -> Any:
    """Return `cfg` with the (possibly partial, nested) `values` applied; unknown keys are errors."""
    hints = typing.get_type_hints(type(cfg))
    fields = {f.name: f for f in dataclasses.fields(cfg)}
    changes = {}
    for key, value in values.items():
        name = key.replace("-", "_")
        if name not in fields:
            raise UsageError(f"unknown config key '{where}{key}'; valid keys: {', '.join(fields)}")
        current = getattr(cfg, name)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise UsageError(f"config key {where}{key} must be a mapping")
            changes[name] = apply_dict(current, value, f"{where}{key}.")
        else:
            changes[name] = _coerce(value, hints[name], f"{where}{key}")
    return dataclasses.replace(cfg, **changes)


def _coerce(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    if origin is tuple and isinstance(value, list):
        return tuple(value)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if origin is Literal and value not in typing.get_args(hint):
        raise UsageError(f"config key {where}: {value!r} is not one of {typing.get_args(hint)}")
    if origin in (typing.Union, types.UnionType) or origin is Literal or hint is Any:
        return value
    if isinstance(hint, type) and not isinstance(value, hint):
        raise UsageError(f"config key {where}: expected {hint.__name__}, got {value!r}")
    return value


def validate(cfg: TrainConfig) -> None:
    """Reject configs that cannot run, with a message saying which flag to change."""
    env, agent = cfg.env, cfg.agent
    checks = [
        (env.num_envs >= 1, f"--env.num-envs must be at least 1 (got {env.num_envs})"),
        (env.episode_length_s > 0, "--env.episode-length-s must be positive"),
        (env.sim.decimation >= 1, "--env.sim.decimation must be at least 1"),
        (agent.num_steps_per_env >= 1, "--agent.num-steps-per-env must be at least 1"),
        (agent.max_iterations >= 1, "--agent.max-iterations must be at least 1"),
        (agent.save_interval >= 1, "--agent.save-interval must be at least 1"),
        (agent.num_learning_epochs >= 1, "--agent.num-learning-epochs must be at least 1"),
        (agent.num_mini_batches >= 1, "--agent.num-mini-batches must be at least 1"),
        (agent.learning_rate > 0, "--agent.learning-rate must be positive"),
        (agent.init_noise_std > 0, "--agent.init-noise-std must be positive"),
        (0 < agent.gamma <= 1 and 0 <= agent.lam <= 1, "--agent.gamma must be in (0, 1], --agent.lam in [0, 1]"),
        (cfg.nproc_per_node >= 0, "--nproc-per-node must be at least 0"),
        (
            not (cfg.distributed and cfg.nproc_per_node),
            "--distributed True is for workers started by torchrun and --nproc-per-node starts mjrl's own "
            "launcher: give one of them",
        ),
        (cfg.collective_timeout_s > 0, "--collective-timeout-s must be positive"),
        (cfg.video_interval >= 0 and cfg.video_seconds > 0, "--video-interval must be >= 0, --video-seconds > 0"),
        (cfg.hang_timeout_s > 0, "--hang-timeout-s must be positive"),
    ]
    for ok, message in checks:
        if not ok:
            raise UsageError(message)
    batch = env.num_envs * agent.num_steps_per_env
    if batch % agent.num_mini_batches:
        raise UsageError(
            f"--agent.num-mini-batches {agent.num_mini_batches} does not divide the batch of "
            f"{batch} samples (--env.num-envs {env.num_envs} x --agent.num-steps-per-env "
            f"{agent.num_steps_per_env}); pick a divisor of {batch}"
        )
