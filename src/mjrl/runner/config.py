"""The top-level training config, and turning configs into plain dicts (YAML) and back."""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar

import tyro

from mjrl.distributed.options import LaunchOptions
from mjrl.envs import EnvConfig
from mjrl.errors import UsageError
from mjrl.rl.config import AgentConfig, PolicyConfig, PpoConfig, RunnerConfig

EnvT = TypeVar("EnvT", bound=EnvConfig)


@dataclasses.dataclass(frozen=True)
class TrainConfig(Generic[EnvT]):
    """Train a policy with PPO on MuJoCo-Warp worlds."""

    env: EnvT
    """Task and simulation settings."""
    runner: RunnerConfig = RunnerConfig()
    """The training loop: rollout length, iterations, checkpoints, evaluation."""
    algorithm: PpoConfig = PpoConfig()
    """PPO's update, its learning-rate schedule and how ranks stay in step."""
    policy: PolicyConfig = PolicyConfig()
    """The actor-critic: its networks, action noise and observation normalisation."""
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
    export: Literal["none", "onnx", "torchscript"] = "none"
    """At the end of training, also write the deterministic actor in this format to
    <run-dir>/exported/ (as `mjrl export` does)."""
    fault: str = ""
    """Testing only: inject a fault, KIND@RANK:ITERATION with KIND one of raise, exit, kill,
    hang, perturb, nan, slow (see mjrl/runner/faults.py)."""
    torch_threads: int = 0
    """CPU threads for torch in this process; 0 picks, on the CPU, one thread for the rollout
    (small batched ops, while Warp steps the physics on one thread) and the cores of the machine
    shared out among the ranks on this node for the PPO update (1.8 s -> 1.1 s per quadruped
    update of 12,288 samples on 2 cores); on a GPU, torch's default."""

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
    split: ClassVar[dict[str, tuple[str, ...]]] = {"agent": ("runner", "algorithm", "policy")}
    """Sections of older config files whose keys now live in one of these sections: the
    `agent` section of runs before issue 23 (each key goes to the section that has the field)."""
    flattened: ClassVar[tuple[str, ...]] = ("launch",)
    """Nested configs whose fields read as this config's own: their flags have no prefix, and
    `to_dict` and `apply_dict` write and read their keys flat, as config files and checkpoints
    held them before they were nested."""

    @classmethod
    def for_task(cls, task: Any) -> TrainConfig:
        """A task's defaults: its env config and its agent's three sections."""
        agent: AgentConfig = task.agent_cfg
        return cls[type(task.env_cfg)](
            env=task.env_cfg, runner=agent.runner, algorithm=agent.algorithm, policy=agent.policy
        )


def to_dict(cfg: Any) -> Any:
    """Dataclasses to nested dicts of plain values (tuples become lists), for YAML and checkpoints;
    the fields of a `flattened` nested config go into its parent's dict."""
    if dataclasses.is_dataclass(cfg):
        out = {}
        for f in dataclasses.fields(cfg):
            value = to_dict(getattr(cfg, f.name))
            out.update(value if f.name in _flattened(cfg) else {f.name: value})
        return out
    if isinstance(cfg, tuple):
        return [to_dict(v) for v in cfg]
    return cfg


# Where and how one particular run is written or continued, not what the experiment is:
# feeding them back would continue the old run (resume_dir, rdzv_id, whose job marker names
# the run directory), write into a folder that may not exist on this machine (log_root), or
# inject a test fault again.
NOT_REPRODUCED = ("log_root", "resume", "resume_dir", "rdzv_id", "fault")


def experiment_config(task_name: str, given: TrainConfig) -> dict[str, Any]:
    """config.yaml: the config as the user gave it (launch options included: a run started with
    --nproc-per-node 2 records 2, not what the launcher handed its workers), without the keys
    that locate or continue one particular run. `train --config` with it reproduces the run."""
    config = {k: v for k, v in to_dict(given).items() if k not in NOT_REPRODUCED}
    return {"task": task_name, **config}


def _flattened(cfg: Any) -> tuple[str, ...]:
    return getattr(type(cfg), "flattened", ())


def apply_dict(cfg: Any, values: dict, where: str = "") -> Any:
    """Return `cfg` with the (possibly partial, nested) `values` applied; unknown keys are errors.
    Keys of a `flattened` nested config may stand at this level (as `to_dict` writes them), and a
    config's `renamed` (old name -> field) and `retired` (old names, ignored) let the config.yaml
    of older runs load."""
    hints = typing.get_type_hints(type(cfg))
    fields = {f.name: f for f in dataclasses.fields(cfg)}
    changes = {}
    values = _nest_flattened(cfg, _spread_split(cfg, values, where))
    renamed, retired = getattr(type(cfg), "renamed", {}), getattr(type(cfg), "retired", ())
    for key, value in values.items():
        name = key.replace("-", "_")
        name = renamed.get(name, name)  # a key of an older run's config.yaml
        if name in retired:
            continue
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


def _spread_split(cfg: Any, values: dict, where: str) -> dict:
    """`values` with each older section named in the config's `split` spread over the sections
    that now hold its keys (a key of the older section stays an error if no section has it)."""
    values = dict(values)
    for old, sections in getattr(type(cfg), "split", {}).items():
        if old not in values:
            continue
        if not isinstance(values[old], dict):
            raise UsageError(f"config key {where}{old} must be a mapping")
        for key, value in values.pop(old).items():
            owner = next((n for n in sections if key.replace("-", "_") in _field_names(getattr(cfg, n))), None)
            if owner is None:
                valid = ", ".join(name for n in sections for name in _field_names(getattr(cfg, n)))
                raise UsageError(f"unknown config key '{where}{old}.{key}'; valid keys: {valid}")
            values[owner] = {**values.get(owner, {}), key: value}
    return values


def _field_names(cfg: Any) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cfg))


def _nest_flattened(cfg: Any, values: dict) -> dict:
    """`values` with the keys of `flattened` nested configs moved under their config's name."""
    values = dict(values)
    for name in _flattened(cfg):
        inner = {f.name for f in dataclasses.fields(getattr(cfg, name))}
        moved = {k: values.pop(k) for k in list(values) if k.replace("-", "_") in inner}
        if moved:
            values[name] = {**values.get(name, {}), **moved}
    return values


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """`value` from a YAML file as a value of type `hint`, or a UsageError naming the key: the
    dataclasses themselves check nothing, and a wrong type fails much later with a traceback."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin is Literal:
        if value not in args:
            raise UsageError(f"config key {where}: {value!r} is not one of {args}")
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, option, where)
            except UsageError:
                continue
        raise UsageError(f"config key {where}: expected {_type_name(hint)}, got {value!r}")
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise UsageError(f"config key {where}: expected a list of {_type_name(hint)}, got {value!r}")
        hints = [args[0]] * len(value) if len(args) == 2 and args[1] is Ellipsis else list(args)
        if len(hints) != len(value):
            raise UsageError(f"config key {where}: expected a list of {len(hints)} items, got {value!r}")
        return tuple(_coerce(v, h, f"{where}[{i}]") for i, (v, h) in enumerate(zip(value, hints, strict=True)))
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    # bool is an int to Python, not to a config: `num_envs: true` is a mistake.
    if isinstance(hint, type) and (not isinstance(value, hint) or (hint is not bool and isinstance(value, bool))):
        raise UsageError(f"config key {where}: expected {_type_name(hint)}, got {value!r}")
    return value


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) is tuple:
        return " ".join(dict.fromkeys(_type_name(a) for a in typing.get_args(hint) if a is not Ellipsis))
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(hint))
    return "null" if hint is type(None) else getattr(hint, "__name__", str(hint))


# The rules a config class may declare for its numeric fields, in its `bounds` class attribute
# (a field name -> a rule or a tuple of rules). Numbers: ">= 1", "> 0", "<= 1", "< 1", or an
# interval "(0, 1]"; they apply to each element of a tuple field. "ordered": a (low, high)
# range with low <= high.
_COMPARISON = re.compile(r"^(>=|>|<=|<)\s*(\S+)$")
_INTERVAL = re.compile(r"^([\[(])\s*([^,]+?)\s*,\s*([^\])]+?)\s*([\])])$")
_WORDS = {">=": "at least", ">": "greater than", "<=": "at most", "<": "less than"}


def field_rules(cls: type) -> dict[str, tuple[str, ...]]:
    """The `bounds` of `cls` and of the config classes it derives from (a task's env config
    inherits EnvConfig's)."""
    rules: dict[str, tuple[str, ...]] = {}
    for klass in reversed(cls.__mro__):
        for name, rule in vars(klass).get("bounds", {}).items():
            rules[name] = (rule,) if isinstance(rule, str) else tuple(rule)
    return rules


def rule_holds(rule: str, value: Any) -> bool:
    if value is None:  # an optional field left unset (SimConfig.nconmax)
        return True
    if rule == "ordered":
        return list(value) == sorted(value)
    items = value if isinstance(value, tuple) else (value,)
    if match := _COMPARISON.match(rule):
        op, bound = match.group(1), float(match.group(2))
        compare = {">=": float.__ge__, ">": float.__gt__, "<=": float.__le__, "<": float.__lt__}[op]
        return all(compare(float(x), bound) for x in items)
    match = _INTERVAL.match(rule)
    if match is None:
        raise ValueError(f"malformed bounds rule {rule!r}")
    low, high = float(match.group(2)), float(match.group(3))
    closed_low, closed_high = match.group(1) == "[", match.group(4) == "]"
    return all(
        (low <= x if closed_low else low < x) and (x <= high if closed_high else x < high) for x in map(float, items)
    )


def describe_rule(rule: str, value: Any) -> str:
    if rule == "ordered":
        return "a range LOW HIGH with LOW <= HIGH"
    each = "each " if isinstance(value, tuple) else ""
    if match := _COMPARISON.match(rule):
        return f"{each}{_WORDS[match.group(1)]} {match.group(2)}"
    return f"{each}in {rule}"


def check_numbers(cfg: Any, where: str = "") -> None:
    """Every numeric field of `cfg` and of its nested configs (a task's included) must be finite
    and obey its class's `bounds`. The fields are walked, not listed, so a new field is checked
    for finiteness from the start and for its range once it declares one."""
    rules = field_rules(type(cfg))
    names = [f.name for f in dataclasses.fields(cfg)]
    if unknown := set(rules) - set(names):
        raise TypeError(f"{type(cfg).__name__}.bounds names fields it does not have: {sorted(unknown)}")
    for name in names:
        value = getattr(cfg, name)
        if dataclasses.is_dataclass(value):
            check_numbers(value, where if name in _flattened(cfg) else f"{where}{name}.")
            continue
        flag = "--" + f"{where}{name}".replace("_", "-")
        items = value if isinstance(value, tuple) else (value,)
        if any(isinstance(x, float) and not math.isfinite(x) for x in items):
            raise UsageError(f"{flag} must be a finite number (got {_text(value)})")
        for rule in rules.get(name, ()):
            if not rule_holds(rule, value):
                raise UsageError(f"{flag} must be {describe_rule(rule, value)} (got {_text(value)})")


def _text(value: Any) -> str:
    return " ".join(map(str, value)) if isinstance(value, tuple) else str(value)


def validate(cfg: TrainConfig) -> None:
    """Reject configs that cannot run, with a message saying which flag to change."""
    check_numbers(cfg)
    env, runner, algorithm = cfg.env, cfg.runner, cfg.algorithm
    if cfg.distributed and cfg.launch.nproc_per_node:
        raise UsageError(
            "--distributed True is for workers started by torchrun and --nproc-per-node starts mjrl's own "
            "launcher: give one of them"
        )
    batch = env.num_envs * runner.num_steps_per_env
    if batch % algorithm.num_mini_batches:
        raise UsageError(
            f"--algorithm.num-mini-batches {algorithm.num_mini_batches} does not divide the batch of "
            f"{batch} samples (--env.num-envs {env.num_envs} x --runner.num-steps-per-env "
            f"{runner.num_steps_per_env}); pick a divisor of {batch}"
        )
