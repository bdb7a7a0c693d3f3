"""The top-level training config: what `train` parses, records in config.yaml and validates."""

from __future__ import annotations

import dataclasses
import importlib.util
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar

import tyro

from mjrl.config import apply_dict, check_numbers, to_dict
from mjrl.distributed.options import LaunchOptions
from mjrl.envs import EnvConfig
from mjrl.errors import UsageError
from mjrl.rl.config import AgentConfig, PolicyConfig, PpoConfig, RunnerConfig
from mjrl.rl.registry import algorithm_spec, chosen_name

EnvT = TypeVar("EnvT", bound=EnvConfig)
AlgorithmT = TypeVar("AlgorithmT")


@dataclasses.dataclass(frozen=True)
class TrainConfig(Generic[EnvT, AlgorithmT]):
    """Train a policy on MuJoCo-Warp worlds."""

    env: EnvT
    """Task and simulation settings."""
    runner: RunnerConfig = RunnerConfig()
    """The training loop: rollout length, iterations, checkpoints, evaluation."""
    algo: str = "ppo"
    """The learning algorithm, by registered name (`train --help` lists them): ppo;
    distillation (its teacher is --algorithm.teacher RUN); or one a plugin registers. The
    chosen algorithm's settings are --algorithm.*. auto: ppo (what older runs recorded)."""
    algorithm: AlgorithmT = PpoConfig()
    """The algorithm's settings (PPO's: its update, learning-rate schedule and how ranks stay in step)."""
    plugins: tuple[str, ...] = ()
    """Python modules (on the Python path) imported before the task and the algorithm are looked
    up, in every process of the run: they register tasks, algorithms and terrain types."""
    policy: PolicyConfig = PolicyConfig()
    """The policy: its kind, networks, action noise and observation normalisation."""
    device: str = "auto"
    """auto (cuda:<LOCAL_RANK> if CUDA is present, else cpu), cpu, cuda (cuda:<LOCAL_RANK>), or
    cuda:N (one rank per node, or ranks given GPUs of their own). A rank that sees fewer GPUs than
    the node has ranks, with CUDA_VISIBLE_DEVICES set (SLURM --gpus-per-task), takes the one it sees."""
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
    force_collectives: bool = False
    """Issue the collectives even in a one-process run, in a process group of its own (NCCL on a
    GPU, gloo on the CPU): what several ranks run, captured in CUDA graphs too, checked where one
    GPU is at hand. It changes no result (a mean over one rank is the rank's own)."""
    # Flattened (see `flattened`): `--nproc-per-node`, not `--launch.nproc-per-node`.
    launch: Annotated[LaunchOptions, tyro.conf.OmitArgPrefixes] = LaunchOptions()
    """mjrl's built-in elastic launcher: ranks per node, nodes and where they meet."""
    collective_timeout_s: float = 300.0
    """Timeout of every collective operation (torch's defaults are 10 to 30 minutes)."""
    hang_timeout_s: float = 60.0
    """A rank that stops making progress (or stops answering) for this long stops the whole job,
    named in the error. Must cover the slowest iteration phase between two heartbeats."""
    startup_timeout_s: float = 1800.0
    """How long the ranks wait for each other to build their envs (which compiles the Warp
    kernels: minutes on a cold kernel cache) before the first collective, whose timeout is
    `collective_timeout_s`."""
    video_interval: int = 0
    """Every this many iterations (from the first), record `video_seconds` of the training env's
    first world and draw it into <run-dir>/videos/iteration_N.mp4 in a separate low-priority
    process; also sent to TensorBoard (as a GIF) or WandB. 0: never."""
    video_seconds: float = 5.0
    """Length of a training clip in simulated seconds."""
    export: Literal["none", "onnx", "pt2", "aoti", "torchscript"] = "none"
    """At the end of training, also write the deterministic actor in this format to
    <run-dir>/exported/ (as `mjrl export` does)."""
    fault: str = ""
    """Testing only: inject a fault, KIND@RANK:ITERATION with KIND one of raise, exit, kill,
    hang, perturb, nan, slow (see mjrl/runner/faults.py)."""
    torch_threads: int = 0
    """CPU threads for torch in this process; 0 picks, on the CPU, one thread for the rollout
    (small batched ops, while Warp steps the physics on one thread) and the cores this process may
    use (its CPU affinity: Slurm's `--cpus-per-task`, `taskset`) shared out among the ranks on
    this node for the PPO update (1.8 s -> 1.1 s per quadruped update of 12,288 samples on 2
    cores); on a GPU, torch's default."""

    bounds: ClassVar[dict] = {
        "seed": ">= 0",
        "collective_timeout_s": "> 0",
        "hang_timeout_s": "> 0",
        "startup_timeout_s": "> 0",
        "torch_threads": ">= 0",
        "video_interval": ">= 0",
        "video_seconds": "> 0",
    }
    """Ranges of the numeric fields, checked by `check_numbers` (as in every config class)."""
    flattened: ClassVar[tuple[str, ...]] = ("launch",)
    """Nested configs whose fields read as this config's own: their flags have no prefix, and
    `to_dict` and `apply_dict` write and read their keys flat, as config files and checkpoints
    held them before they were nested."""

    @classmethod
    def for_task(cls, task: Any, algo: str = "ppo", settings: bool = True) -> TrainConfig:
        """A task's defaults for `algo`: its env config and its agent's sections (an algorithm the
        task has no settings for starts from its config class's defaults), then, with
        `settings`, those the task gives that algorithm (`Task.algorithm_settings`). A resumed
        run's config goes over the defaults without them: a key it lacks was added since, and
        its class default keeps what the run trained."""
        agent: AgentConfig = task.agent_cfg
        spec = algorithm_spec(chosen_name(algo))
        algorithm = agent.algorithm if isinstance(agent.algorithm, spec.config) else spec.config()
        cfg = cls[type(task.env_cfg), type(algorithm)](
            env=task.env_cfg, runner=agent.runner, algo=spec.name, algorithm=algorithm, policy=agent.policy
        )
        given = task.algorithm_settings.get(spec.name) if settings else None
        return cfg if given is None else apply_dict(cfg, given)


@dataclasses.dataclass(frozen=True)
class TrainCommand(TrainConfig[EnvT, AlgorithmT]):
    """Train a policy on MuJoCo-Warp worlds."""

    preset: str = ""
    """A preset from configs/ (`train --help` lists them): its values over the task's defaults
    (and over the resumed run's config)."""
    config: str = ""
    """A config file (a run's config.yaml reproduces that run): its values over the preset's."""

    @classmethod
    def of(cls, cfg: TrainConfig) -> TrainCommand:
        """`cfg` as the command's defaults (no preset or config file named)."""
        return cls(**{field.name: getattr(cfg, field.name) for field in dataclasses.fields(TrainConfig)})

    def train_config(self) -> TrainConfig:
        """What the run is given: the config without the command's own fields, which only
        composed it."""
        values = {field.name: getattr(self, field.name) for field in dataclasses.fields(TrainConfig)}
        return TrainConfig[type(self.env), type(self.algorithm)](**values)


# Where and how one particular run is written or continued, not what the experiment is:
# feeding them back would continue the old run (resume_dir, rdzv_id, whose job marker names
# the run directory), write into a folder that may not exist on this machine (log_root), or
# inject a test fault again.
NOT_REPRODUCED = ("log_root", "resume", "resume_dir", "rdzv_id", "fault")


# What a job trains, which every rank must be given alike (as opposed to where and how each
# process runs it: device, threads, launch and rendezvous options, which differ per node).
TRAINED = ("env", "runner", "algo", "algorithm", "plugins", "policy", "seed")
# What a resume takes from the run's saved config: what it trains and what it writes. Not how
# it ran (device, threads, launcher or torchrun, ranks, rendezvous, timeouts): the resumed run
# may be on another machine, and the command line says how to run it there.
RESUMED = (*TRAINED, "logger", "wandb_project", "video_interval", "video_seconds", "export")


def experiment_config(task_name: str, given: TrainConfig) -> dict[str, Any]:
    """config.yaml: the config as the user gave it (launch options included: a run started with
    --nproc-per-node 2 records 2, not what the launcher handed its workers), without the keys
    that locate or continue one particular run. `train --config` with it reproduces the run."""
    config = {k: v for k, v in to_dict(given).items() if k not in NOT_REPRODUCED}
    return {"task": task_name, **config}


def validate(cfg: TrainConfig) -> None:
    """Reject configs that cannot run, with a message saying which flag to change."""
    check_numbers(cfg)
    env, runner = cfg.env, cfg.runner
    if cfg.distributed and cfg.launch.nproc_per_node:
        raise UsageError(
            "--distributed True is for workers started by torchrun and --nproc-per-node starts mjrl's own "
            "launcher: give one of them"
        )
    batch = env.num_envs * runner.num_steps_per_env
    minibatches = getattr(cfg.algorithm, "num_mini_batches", 1)  # an algorithm that splits its rollout
    if batch % minibatches:
        raise UsageError(
            f"--algorithm.num-mini-batches {minibatches} does not divide the batch of "
            f"{batch} samples (--env.num-envs {env.num_envs} x --runner.num-steps-per-env "
            f"{runner.num_steps_per_env}); pick a divisor of {batch}"
        )
    if cfg.export == "aoti":
        from mjrl.tools.export import check_aoti_compiler

        check_aoti_compiler()  # before the training, not after it
    if cfg.logger == "wandb" and importlib.util.find_spec("wandb") is None:
        # A dependency, yet missing where mjrl was installed without its dependencies (the
        # offline GPU machine's pack leaves it out unless asked).
        raise UsageError("--logger wandb needs the wandb package: pip install wandb, or pick --logger tensorboard")
