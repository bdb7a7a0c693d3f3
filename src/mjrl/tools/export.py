"""Export of the deterministic actor for deployment: ONNX, pt2 (`torch.export`), an AOTInductor
package (compiled for this machine's CPU, run from C++ or Python) or TorchScript (deprecated by
torch), plus a JSON sidecar.

The model takes raw actor observations (the normaliser is folded in) and returns the policy
mean, or, with `scaled_actions`, the actuator targets. The sidecar tells a robot-side runtime
everything else: how to build the observation, what the outputs drive, at what rate, and which
run and checkpoint the weights come from.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import torch

from mjrl.envs import VecEnv
from mjrl.errors import UsageError
from mjrl.files import atomic_target, make_dirs
from mjrl.rl.networks import DeployedActor, SquashedActor
from mjrl.rl.policies import TrainedPolicy

Format = Literal["onnx", "pt2", "aoti", "torchscript"]
MODEL_FILES: dict[str, str] = {"onnx": "policy.onnx", "pt2": "policy.pt2", "aoti": "policy.aoti.pt2",
                               "torchscript": "policy.pt"}  # fmt: skip
FORMATS: tuple[str, ...] = tuple(MODEL_FILES)
SUFFIXES: dict[str, tuple[str, ...]] = {"onnx": (".onnx",), "pt2": (".pt2",), "aoti": (".pt2",),
                                        "torchscript": (".pt", ".ts")}  # fmt: skip
"""The file name endings each format's model may have (AOTInductor's loader insists on .pt2)."""
TORCHSCRIPT_NOTE = "note: torch deprecates TorchScript (torch.jit); --export pt2 (torch.export) is its successor"
SCHEMA = "mjrl-policy/6"
"""Version 6: `recurrent_state`. Version 5: `action_squash`. Version 4: `reference_inputs`.
Version 3: `target_feedforward`. Version 2: `action_scale` per action (version 1 had one number
for all). Every older version is still read."""


@dataclasses.dataclass(frozen=True)
class ObsTerm:
    name: str
    start: int
    """First column of the term in the observation vector."""
    size: int
    history: int = 1
    """Steps of the term, newest first: its `size` is history times the term's own width."""


@dataclasses.dataclass(frozen=True)
class Sidecar:
    """What `<model>.json` holds, next to the exported model."""

    format: str
    model_file: str
    """The model's file name, in the sidecar's directory."""
    input_name: str
    output_name: str
    observation_size: int
    observation_terms: tuple[ObsTerm, ...]
    """In the order they are concatenated; each as the task's observation function computes it,
    without noise. The normaliser is part of the model: feed raw values."""
    action_size: int
    action_joints: tuple[str, ...]
    """What each output drives, in output order (actuator order of the MJCF)."""
    action_scale: tuple[float, ...]
    """Per action (joints of one robot may differ: `RobotConfig.action_scale_from_torque`)."""
    action_clip: float
    action_offset: tuple[float, ...]
    actions_scaled: bool
    """True: the outputs are actuator targets already. False: targets = action_offset +
    action_scale * clip(output, -action_clip, action_clip)."""
    target_feedforward: dict | None
    """Offsets the task adds to the targets at every step, as the runtime must too (after the
    action transform, also when `actions_scaled`): a "kind", its "formula" in words and its
    parameters (`reference_swing`: a gait's leg swing in time with the gait_clock observation).
    None: nothing is added."""
    reference_inputs: dict | None
    """What the runtime supplies at every step beyond the robot's sensors, and which observation
    terms it feeds (a tracking policy's reference motion: its files, rate, joints and anchor).
    None: the robot's sensors and the last action are all the policy reads."""
    action_squash: dict | None
    """How the model bounds its outputs before the action transform: {"kind": "tanh", "bound":
    B, "formula": ...} for a squashed policy (SAC's: output = B x tanh(mean), within (-B, B));
    None: the outputs are the policy's mean, unbounded (the transform's clip bounds them)."""
    recurrent_state: dict | None
    """A recurrent policy's memory, which the runtime carries: {"inputs": ["h_in"(, "c_in")],
    "outputs": ["h_out"(, "c_out")], "shape": [layers, "robots", hidden], "zero_when": ...}.
    Each step feeds the previous step's outputs back as inputs; a robot's state is zeros at
    its first step and whenever its episode begins again. None: the model has no state."""
    control_period_s: float
    """Seconds between two policy steps (physics timestep x decimation)."""
    physics_timestep_s: float
    decimation: int
    task: str
    run_dir: str
    checkpoint: str
    iteration: int
    env_steps: int
    schema: str = SCHEMA

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Sidecar:
        data = json.loads(text)
        if data.get("schema") == "mjrl-policy/1":  # one scale for every action
            data |= {
                "schema": "mjrl-policy/2",
                "action_scale": [data.get("action_scale")] * len(data.get("action_offset", ())),
            }
        if data.get("schema") == "mjrl-policy/2":  # nothing added to the targets
            data |= {"schema": "mjrl-policy/3", "target_feedforward": None}
        if data.get("schema") == "mjrl-policy/3":  # no reference to supply
            data |= {"schema": "mjrl-policy/4", "reference_inputs": None}
        if data.get("schema") == "mjrl-policy/4":  # unbounded outputs
            data |= {"schema": "mjrl-policy/5", "action_squash": None}
        if data.get("schema") == "mjrl-policy/5":  # no state
            data |= {"schema": SCHEMA, "recurrent_state": None}
        if data.get("schema") != SCHEMA:
            raise UsageError(f"not an {SCHEMA} sidecar (schema {data.get('schema')!r})")
        try:
            terms = tuple(ObsTerm(**t) for t in data.pop("observation_terms"))
            tuples = {k: tuple(data.pop(k)) for k in ("action_joints", "action_offset", "action_scale")}
            return cls(observation_terms=terms, **tuples, **data)
        except (KeyError, TypeError) as exc:
            raise UsageError(f"a malformed {SCHEMA} sidecar ({type(exc).__name__}: {exc})") from None


def default_output(run_dir: Path, fmt: Format) -> Path:
    return run_dir / "exported" / MODEL_FILES[fmt]


def export_policy(
    env: VecEnv,
    policy: TrainedPolicy,
    fmt: Format,
    out: Path,
    source: dict[str, Any],
    scaled_actions: bool = False,
) -> tuple[Path, Path]:
    """Write the deterministic actor of `policy` to `out` and its sidecar to `out` + ".json".
    `env` (any number of envs) gives the observation layout and action transform; `source`
    holds task, run_dir, checkpoint, iteration and env_steps. Returns both paths."""
    cfg = env.cfg
    feedforward = None
    if env.task.action_feedforward is not None:
        # The targets move with time, which the model does not see: the sidecar says how.
        if env.task.action_feedforward_deployment is None:
            raise UsageError("this task adds offsets to the joint targets that it cannot describe for export")
        feedforward = env.task.action_feedforward_deployment(env)
    offset = env.action_offset.float().cpu()
    # A plugin's policy written before `deployable` existed is an actor-critic: its actor, as mlp's.
    deployable = getattr(policy, "deployable", lambda *args: DeployedActor(policy, *args))
    model = deployable(offset, env.action_scale, cfg.action_clip) if scaled_actions else deployable()
    obs_size = env.obs_dims["actor"]
    writers = {"onnx": _write_onnx, "pt2": _write_pt2, "aoti": _write_aoti, "torchscript": _write_torchscript}
    if fmt not in writers:
        raise UsageError(f"unknown export format {fmt!r}; expected {', '.join(FORMATS)}")
    if fmt == "aoti":
        check_aoti_compiler()
    make_dirs(out.parent)
    signature = Signature.of(model, obs_size)
    sidecar = _sidecar(env, fmt, out, obs_size, offset, scaled_actions, feedforward, source, action_squash(policy))
    sidecar = dataclasses.replace(sidecar, recurrent_state=signature.recurrent_state(model))
    if sum(t.size for t in sidecar.observation_terms) != obs_size:
        raise ValueError("observation terms do not add up to the actor's input size")
    sidecar_path = out.with_name(out.name + ".json")
    # Both written to temporaries first, renamed into place only when both are whole: a model
    # without its sidecar (a full disk between the two) would be unusable and look finished.
    with atomic_target(out, suffix=out.suffix) as model_tmp:
        writers[fmt](model, signature, model_tmp)
        with atomic_target(sidecar_path) as sidecar_tmp:
            sidecar_tmp.write_text(sidecar.to_json())
    return out, sidecar_path


@dataclasses.dataclass(frozen=True)
class Signature:
    """An exported model's inputs and outputs: `obs` -> `actions`, and a recurrent model's state
    parts (`h`, an LSTM's `c` too) as `<part>_in` -> `<part>_out`, each (layers, robots, hidden)."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    example: tuple[torch.Tensor, ...]
    """Inputs for a batch of 2 robots (a batch of 1 would be fixed into the graph)."""

    @classmethod
    def of(cls, model: torch.nn.Module, obs_size: int) -> Signature:
        parts = getattr(model, "state_names", ())  # a recurrent model's (`DeployedRecurrentActor`)
        states = tuple(torch.zeros(model.state_shape(2)) for _ in parts)
        inputs, outputs = tuple(f"{p}_in" for p in parts), tuple(f"{p}_out" for p in parts)
        return cls(("obs", *inputs), ("actions", *outputs), (torch.zeros(2, obs_size), *states))

    def dynamic_shapes(self) -> dict[str, dict[int, Any]]:
        """The robots' dimension of every input, free: observations (robots, size), states (layers, robots, hidden)."""
        robots = torch.export.Dim("batch")
        return {name: {0 if name == "obs" else 1: robots} for name in self.inputs}

    def recurrent_state(self, model: torch.nn.Module) -> dict | None:
        """The sidecar's `recurrent_state`."""
        if len(self.inputs) == 1:
            return None
        layers, _, hidden = model.state_shape()
        zero_when = "zeros for a robot at its first step and whenever its episode begins again (a reset, a fall)"
        return {"inputs": list(self.inputs[1:]), "outputs": list(self.outputs[1:]), "shape": [layers, "robots", hidden],
                "zero_when": zero_when}  # fmt: skip


def action_squash(policy: TrainedPolicy) -> dict | None:
    """The sidecar's `action_squash` of a policy: a squashed one's bound, else None."""
    actor = getattr(policy, "actor", None)
    if not isinstance(actor, SquashedActor):
        return None
    bound = float(actor.bound)
    formula = f"output = {bound:g} * tanh(mean), within (-{bound:g}, {bound:g})"
    return {"kind": "tanh", "bound": bound, "formula": formula}


def _sidecar(
    env: VecEnv,
    fmt: Format,
    out: Path,
    obs_size: int,
    offset: torch.Tensor,
    scaled_actions: bool,
    feedforward: dict | None,
    source: dict[str, Any],
    squash: dict | None = None,
) -> Sidecar:
    """What a robot-side runtime needs beside the model: the observation's layout, what the
    outputs drive and how, the rates, and where the policy came from."""
    return Sidecar(
        format=fmt,
        model_file=out.name,
        input_name="obs",
        output_name="actions",
        observation_size=obs_size,
        observation_terms=tuple(
            ObsTerm(name, cols.start, cols.stop - cols.start, env.task.observations["actor"][name].history)
            for name, cols in env.obs_term_slices("actor").items()
        ),
        action_size=env.num_actions,
        action_joints=tuple(env.sim.actuator_joints()),
        action_scale=tuple(float(x) for x in env.action_scale.cpu()),
        action_clip=float(env.cfg.action_clip),
        action_offset=tuple(float(x) for x in offset),
        actions_scaled=scaled_actions,
        target_feedforward=feedforward,
        reference_inputs=env.task.deployment_inputs(env) if env.task.deployment_inputs else None,
        action_squash=squash,
        recurrent_state=None,
        control_period_s=float(env.step_dt),
        physics_timestep_s=float(env.sim.mj_model.opt.timestep),
        decimation=env.cfg.sim.decimation,
        task=source["task"],
        run_dir=str(source["run_dir"]),
        checkpoint=str(source["checkpoint"]),
        iteration=int(source["iteration"]),
        env_steps=int(source["env_steps"]),
    )


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """torch's exporters warn about deprecations and absent optional packages (torchvision) that
    say nothing about this model, and its loader logs a damaged file's error before raising it;
    the user sees only mjrl's own line."""
    loggers = [logging.getLogger(name) for name in ("torch.onnx", "torch.export")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _write_onnx(model: torch.nn.Module, signature: Signature, out: Path) -> None:
    # The dynamo exporter: the TorchScript-based one is deprecated in torch and due for removal.
    with _quiet_exporter(), contextlib.redirect_stdout(None):
        torch.onnx.export(
            model,
            signature.example,
            str(out),
            input_names=list(signature.inputs),
            output_names=list(signature.outputs),
            dynamic_shapes=_by_parameter(model, signature),
            dynamo=True,
            external_data=False,  # one file: the weights are small
        )


def _by_parameter(model: torch.nn.Module, signature: Signature) -> dict[str, Any]:
    """`signature.dynamic_shapes()` keyed by the names of `model.forward`'s parameters, as
    torch.export reads them."""
    import inspect

    names = list(inspect.signature(model.forward).parameters)[: len(signature.inputs)]
    return dict(zip(names, signature.dynamic_shapes().values(), strict=True))


def _exported_program(model: torch.nn.Module, signature: Signature) -> torch.export.ExportedProgram:
    """torch.export's program of `model`, the robots' dimension free."""
    return torch.export.export(model, signature.example, dynamic_shapes=_by_parameter(model, signature))


def _write_pt2(model: torch.nn.Module, signature: Signature, out: Path) -> None:
    # torch.export's program: `torch.export.load(path).module()` runs it in any torch process
    # (mjrl not needed), and AOTInductor can compile it on the robot's machine (`_write_aoti`).
    with _quiet_exporter():
        torch.export.save(_exported_program(model, signature), str(out))


def check_aoti_compiler() -> None:
    """A usage error where AOTInductor finds no C++ compiler (`--format aoti`, `--export aoti`):
    said before any work, not after a training."""
    from torch._inductor.cpp_builder import get_cpp_compiler
    from torch._inductor.exc import InvalidCxxCompiler

    try:
        get_cpp_compiler()
    except InvalidCxxCompiler:
        raise UsageError("--format aoti compiles C++: install g++ (or name a compiler in CXX), or export pt2") from None


def _write_aoti(model: torch.nn.Module, signature: Signature, out: Path) -> None:
    # The program compiled ahead of time by AOTInductor into a package of machine code for this
    # machine's CPU kind (x86-64 or aarch64, and its vector width): a C++ runtime runs it with
    # libtorch's `torch::inductor::AOTIModelPackageLoader`, Python with
    # `torch._inductor.aoti_load_package`, without Python's interpreter in the loop.
    from torch._inductor import aoti_compile_and_package

    with _quiet_exporter():
        aoti_compile_and_package(_exported_program(model, signature), package_path=str(out))


def _write_torchscript(model: torch.nn.Module, signature: Signature, out: Path) -> None:
    # Traced, not scripted: the forward has no data-dependent control flow, and `scaled` is a
    # constant of the export. torch deprecates TorchScript: the caller says so once.
    print(TORCHSCRIPT_NOTE)
    with _quiet_exporter():
        traced = torch.jit.trace(model, signature.example)
        torch.jit.save(traced, str(out))


class ExportedPolicy:
    """A `policy.pt2` (or an AOTInductor package, `policy.aoti.pt2`) as a robot runs it, for
    `play --exported`: raw actor observations in, the policy's actions out (an export with
    `--scaled-actions True` outputs actuator targets, which an env does not take: refused)."""

    def __init__(self, path: Path, device: torch.device) -> None:
        self.sidecar = read_sidecar(path)
        fmt = self.sidecar.format
        if fmt not in ("pt2", "aoti"):
            raise UsageError(f"--exported {path}: play runs pt2 exports (mjrl export --format pt2, or aoti), not {fmt}")
        if self.sidecar.actions_scaled:
            raise UsageError(f"--exported {path}: it outputs actuator targets (--scaled-actions True): export without")
        try:
            with _quiet_exporter():
                self.module = (
                    _load_aoti(path, device) if fmt == "aoti" else torch.export.load(str(path)).module().to(device)
                )
        except (RuntimeError, ValueError, OSError, KeyError, zipfile.BadZipFile) as exc:  # not an export, or damaged
            raise UsageError(f"--exported {path}: not a readable {fmt} model ({type(exc).__name__})") from None

        self.state: list[torch.Tensor] | None = None
        """A recurrent export's state parts, carried from step to step as a robot's runtime does."""

    @torch.no_grad()
    def act_deterministic(self, actor_obs: torch.Tensor) -> torch.Tensor:
        memory = self.sidecar.recurrent_state
        if memory is None:
            return self.module(actor_obs)
        if self.state is None or self.state[0].shape[1] != actor_obs.shape[0]:
            layers, _, hidden = memory["shape"]
            self.state = [actor_obs.new_zeros(layers, actor_obs.shape[0], hidden) for _ in memory["inputs"]]
        actions, *self.state = self.module(actor_obs, *self.state)
        return actions

    def reset(self, dones: torch.Tensor) -> None:
        """A recurrent export's state zeroed for the robots whose episode ended."""
        if self.state is not None:
            self.state = [torch.where(dones.view(1, -1, 1), 0.0, part) for part in self.state]


def _load_aoti(path: Path, device: torch.device) -> Callable[..., Any]:
    """An AOTInductor package as a function like the exported module (its outputs as the model
    returns them). The package holds CPU code: inputs go to the CPU, outputs back to `device`."""
    from torch._inductor import aoti_load_package

    package = aoti_load_package(str(path))

    def run(*inputs: torch.Tensor) -> Any:
        outputs = package(*(x.cpu() for x in inputs))
        return outputs.to(device) if isinstance(outputs, torch.Tensor) else tuple(o.to(device) for o in outputs)

    return run


def read_sidecar(model: Path) -> Sidecar:
    """The sidecar beside an exported model (`<model>.json`), checked: one line if it is missing."""
    path = model.with_name(model.name + ".json")
    if not model.is_file():
        raise UsageError(f"--exported {model}: no such file")
    if not path.is_file():
        raise UsageError(f"--exported {model}: its sidecar {path.name} is missing (export writes both)")
    try:
        return Sidecar.from_json(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise UsageError(f"{path}: not a JSON sidecar") from None
