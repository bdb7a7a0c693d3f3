"""What a task is made of: its config, its terms and the `TaskSpec` that gathers them.

A task is a scene (an MJCF file, and for legged robots a terrain composed in) plus dictionaries
of small functions (observation, reward, termination, event and command terms) over the env's
batched torch tensors; `VecEnv` (`mjrl.envs.env`) steps the simulation and evaluates them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Literal, Self

import torch

from mjrl.envs.robot import Robot, RobotConfig
from mjrl.errors import UsageError
from mjrl.mirror import ColumnMirror
from mjrl.sim import Scene, SimConfig

if TYPE_CHECKING:
    from mjrl.envs.component import EnvComponent
    from mjrl.envs.env import VecEnv

MirrorFn = Callable[["VecEnv", int], ColumnMirror]
"""How a term's columns mirror left-right, given the env and the term's width (one step of
history): `terms.unchanged`, `terms.mirror_signs(...)`, `terms.mirror_joints`, ..."""


@dataclasses.dataclass(frozen=True)
class EnvConfig:
    """Settings every task has. Tasks subclass this to add their own fields."""

    num_envs: int = 256
    """Parallel envs (MuJoCo-Warp worlds) per rank."""
    episode_length_s: float = 20.0
    """Episode length in seconds; episodes are truncated (not terminated) at this length."""
    action_scale: float = 1.0
    """Actions are clipped to [-action_clip, action_clip], then multiplied by this."""
    action_clip: float = 1.0
    """Bound on the raw policy action before scaling."""
    obs_noise: bool = True
    """Add the observation terms' noise to the groups that take it (`ObsGroup.noise`: the
    actor's, unless the task says otherwise; critic observations are clean)."""
    random_initial_episode_length: bool = True
    """Start envs at random points of their first episode so time-outs spread over iterations."""
    reward_floor: float | None = None
    """A step's total reward is kept at or above this (its terms are logged before it; None: no
    floor). 0, as MuJoCo Playground's locomotion tasks do, makes every step pay something or
    nothing: a fall then costs what the rest of the episode would have paid, whatever the
    termination term. Returns (evaluation's and play's too) are of the floored rewards, so
    they compare only between runs with the same floor; `mean_step_reward` sums the terms."""
    sim: SimConfig = SimConfig()
    """Physics settings."""

    bounds: ClassVar[dict] = {
        "num_envs": ">= 1",
        "episode_length_s": "> 0",
        "action_scale": "> 0",
        "action_clip": "> 0",
    }
    """Ranges of the numeric fields (see `mjrl.config.check_numbers`); a task's subclass
    adds its own."""

    def for_evaluation(self, num_envs: int, obs_noise: bool = False) -> Self:
        """This config as evaluation runs it (`play`, the periodic evaluation, export, videos):
        `num_envs` envs whose first episodes start at time 0, so every counted episode is a
        whole one, with clean observations unless `obs_noise`."""
        return dataclasses.replace(self, num_envs=num_envs, obs_noise=obs_noise, random_initial_episode_length=False)


@dataclasses.dataclass(frozen=True)
class ObsTerm:
    func: Callable[[VecEnv], torch.Tensor]
    """Returns a (num_envs, k) tensor."""
    noise_std: float = 0.0
    """Std of Gaussian noise added to actor observations when `obs_noise` is on."""
    history: int = 1
    """Steps of the term in the observation, newest first, as history * k columns: a policy
    without a velocity estimator reads motion from a few past steps. After a reset every slot
    holds the first value of the episode."""
    mirror: MirrorFn | None = None
    """How the term's columns mirror, for symmetry augmentation (`PpoConfig.symmetry`); a task
    whose every term and actions declare it can be trained with it."""
    std_floor: float = 0.0
    """The smallest std the policy's observation normaliser divides this term's columns by, in
    the term's units. A term whose spread can be noise alone (a height scan on flat ground)
    would otherwise be scaled up to unit variance and drown the other inputs in noise."""


@dataclasses.dataclass(frozen=True)
class ObsGroup:
    """A task's settings of one observation group, beyond its terms (`TaskSpec.obs_groups`)."""

    noise: bool | None = None
    """Add the terms' `noise_std` when `EnvConfig.obs_noise` is on. None (and a group the task
    does not name): for "actor" only, the policy must cope with its sensors while privileged
    state for the critic stays clean."""
    normalize: bool = True
    """Let a learner's running normaliser scale the group (False for inputs already in range)."""


@dataclasses.dataclass(frozen=True)
class RewardTerm:
    func: Callable[[VecEnv], torch.Tensor]
    """Returns a (num_envs,) tensor; the env reward is the weighted sum of all terms."""
    weight: float = 1.0


@dataclasses.dataclass(frozen=True)
class TerminationTerm:
    func: Callable[[VecEnv], torch.Tensor]
    """Returns a (num_envs,) bool tensor."""
    time_out: bool = False
    """A time-out truncates (the value of the final observation is bootstrapped)."""


@dataclasses.dataclass(frozen=True)
class EventTerm:
    func: Callable[[VecEnv, torch.Tensor], None]
    """Called with the env and a (num_envs,) bool mask of the envs it applies to."""
    mode: Literal["startup", "reset", "interval", "episode_end"] = "reset"
    """startup: once for all envs; reset: on the envs being reset; interval: every
    `interval_s` seconds (drawn uniformly from the range) per env; episode_end: on the envs whose
    episode ended this step, before the reset wipes their state (a curriculum judges the
    episode here). Envs reset by `VecEnv.reset()` did not end an episode."""
    interval_s: tuple[float, float] = (0.0, 0.0)


@dataclasses.dataclass(frozen=True)
class CommandTerm:
    """A command the policy follows (a target velocity, a pose): `dim` values per env, kept in
    `env.commands[name]`, drawn afresh at every reset and every `resample_interval_s`."""

    sample: Callable[[VecEnv], torch.Tensor]
    """Returns fresh (num_envs, dim) values; the env keeps those of the envs due."""
    dim: int
    resample_interval_s: tuple[float, float] = (math.inf, math.inf)
    """Resampled after a time drawn uniformly from this range (and at resets)."""
    follow: Callable[[VecEnv], None] | None = None
    """Called after every physics step and every reset, for commands that follow the state (a
    yaw rate steered towards a commanded heading); None for commands that hold still."""


@dataclasses.dataclass
class TaskSpec:
    """Everything that makes a task: its model and its terms."""

    scene: Scene
    """The MJCF, with a terrain composed in for legged robots."""
    observations: dict[str, dict[str, ObsTerm]]
    """Observation groups: "actor" and "critic" (privileged state may go to the critic only)."""
    rewards: dict[str, RewardTerm]
    terminations: dict[str, TerminationTerm]
    events: dict[str, EventTerm] = dataclasses.field(default_factory=dict)
    commands: dict[str, CommandTerm] = dataclasses.field(default_factory=dict)
    obs_groups: dict[str, ObsGroup] = dataclasses.field(default_factory=dict)
    """Settings of the observation groups it names (noise, normalisation); see `ObsGroup` for
    a group it does not name."""
    robot: RobotConfig | None = None
    """A floating-base robot, resolved into `env.robot` when the env is built."""
    contacts: bool = False
    """Find which geoms touch the ground (with a robot; else anything) once per env step, into
    `env.contacts` (num_envs, ngeom)."""
    action_offset: Callable[[VecEnv], torch.Tensor] | None = None
    """ctrl = offset + action scale * action (`VecEnv.action_scale`); None: an offset of zero."""
    action_feedforward: Callable[[VecEnv], torch.Tensor] | None = None
    """(num_envs, num_actions) added to ctrl at every step, from the state the policy acted on:
    targets that move with time (a gait's reference swing), around which the actions are
    corrections. None: nothing added."""
    action_feedforward_deployment: Callable[[VecEnv], dict] | None = None
    """What an exported policy's sidecar tells a robot-side runtime to add to the targets in
    place of `action_feedforward` (JSON data: its parameters and formula). A task with a
    feedforward but without this cannot be exported."""
    video_ghost: Callable[[VecEnv], torch.Tensor] | None = None
    """(num_envs, nq) a second pose of the robot, drawn translucent over it in videos (a tracking
    task's reference); None: the robot alone."""
    deployment_inputs: Callable[[VecEnv], dict] | None = None
    """What an exported policy's sidecar tells a robot-side runtime to supply at every step beyond
    the robot's own sensors (JSON data: a reference motion's frame, for a tracking task); None:
    nothing."""
    action_mirror: MirrorFn | None = None
    """How actions mirror (see `ObsTerm.mirror`); None: the task has no symmetry."""
    state: Callable[[VecEnv], EnvComponent] | None = None
    """Builds the task's shared per-step state (`env.state`) once, with the env."""
    components: dict[str, Callable[[VecEnv], EnvComponent]] = dataclasses.field(default_factory=dict)
    """Further state of the task (a motion library, an object), each built once with the env,
    after its state, into `env.components[name]`."""
    refresh_kinematics_on_reset: bool = False
    """Recompute body poses after resets, for tasks whose observations read xpos or sites."""


def check_task_spec(spec: TaskSpec) -> None:
    """Compile the task's scene and resolve its robot's names on the host (a fraction of a
    second), so a wrong file, name or terrain setting is a usage error before a run directory is
    made or kernels compile."""
    unknown = sorted(set(spec.obs_groups) - set(spec.observations))
    if unknown:
        raise UsageError(f"obs_groups names {unknown}, which are no observation groups of the task")
    for group, terms in spec.observations.items():
        for name, term in terms.items():
            if not isinstance(term.history, int) or term.history < 1:
                raise UsageError(f"observation {group}.{name}: history must be an integer of at least 1")
            if not term.std_floor >= 0:
                raise UsageError(f"observation {group}.{name}: std_floor must be >= 0, got {term.std_floor}")
    model, _ = spec.scene.build()
    if spec.robot is not None:
        Robot.resolve(model, spec.robot, torch.device("cpu"))
