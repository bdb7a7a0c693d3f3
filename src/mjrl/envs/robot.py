"""A floating-base robot as data: its MJCF and the names the terms need, resolved to indices
when the env is built.

A `RobotConfig` only names things (bodies, joints, geoms, a keyframe), so a user's own MJCF
works by config alone, with its own names. `Robot.resolve` looks the names up in the compiled
model once, checks them, and keeps what the terms read every step as device tensors or slices.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from typing import ClassVar

import mujoco
import numpy as np
import torch

from mjrl.compat import MOVED_ROBOT_FILES
from mjrl.errors import UsageError
from mjrl.mirror import ColumnMirror
from mjrl.sim import TERRAIN_GEOM

Index = slice | torch.Tensor
"""Columns of a batched state tensor: a slice when they are contiguous (a view, no copy), else a
long tensor on the env's device (a Python list would be copied there at every use)."""


OWN_ROBOT = "mjrl:"
"""Prefix of an MJCF path that names one of mjrl's own robots (`mjrl:robots/go1.xml`): a file
of the installed `mjrl.tasks` package, wherever mjrl is installed."""


def robot_file(mjcf: str) -> Path:
    """The file a robot config's `mjcf` names: `mjrl:NAME` is one of mjrl's own robots, any
    other path is the path as given. mjrl's robots are named so that a run's config.yaml plays
    and resumes on another machine. Configs written before named them by the absolute path of
    the installation that wrote them (`/any/site-packages/mjrl/tasks/velocity/go1.xml`): when
    that file is missing, the same robot of this installation is used, and said. Names of
    robots that moved since resolve to where they are now (`mjrl.compat.MOVED_ROBOT_FILES`)."""
    if mjcf.startswith(OWN_ROBOT):
        return _own_robot(mjcf.removeprefix(OWN_ROBOT)) or Path(mjcf)
    given = Path(mjcf)
    if given.is_file() or not given.is_absolute() or given.parts[-4:-2] != ("mjrl", "tasks"):
        return given
    own = _own_robot("/".join(given.parts[-2:]))
    if own is None:
        return given
    print(f"note: {mjcf} does not exist here; using mjrl's own {own}", file=sys.stderr)
    return own


def _own_robot(name: str) -> Path | None:
    """The file `name` (`robots/go1.xml`) of the installed `mjrl.tasks` package, if any."""
    if ".." in Path(name).parts or Path(name).is_absolute():
        return None
    name = MOVED_ROBOT_FILES.get(name, name)
    spec = importlib.util.find_spec("mjrl.tasks")  # the package's folder, without importing it
    folders = spec.submodule_search_locations or [] if spec is not None else []
    return next((Path(f) / name for f in folders if (Path(f) / name).is_file()), None)


@dataclasses.dataclass(frozen=True)
class RobotConfig:
    """A robot, floating (legged) or fixed to the world (an arm): its MJCF file and the names of
    the parts the terms read."""

    mjcf: str
    """Path of the robot's MJCF, without a floor (the task composes the terrain in). Actuator k
    must drive the k-th joint of `joints`. `mjrl:robots/go1.xml` names one of mjrl's own
    robots, wherever mjrl is installed (see `robot_file`)."""
    base_body: str = "trunk"
    """The body of the free joint, whose velocity and orientation are the base's; or, for a
    fixed-base robot, the body fixed to the world that its chain starts from (terms that read a
    floating base are then refused)."""
    joints: tuple[str, ...] = ()
    """Actuated joints in action order; empty: the joints the actuators drive, in actuator order."""
    home_keyframe: str = "home"
    """Keyframe of the standing pose: resets start from it and actions are offsets from it."""
    foot_geoms: tuple[str, ...] = ()
    """Geoms of the feet (spheres, capsules, boxes, cylinders or ellipsoids): their contacts,
    heights and speeds drive the gait terms."""
    fatal_contact_geoms: tuple[str, ...] = ()
    """Geoms whose ground contact ends the episode (e.g. base and thighs)."""
    undesired_contact_geoms: tuple[str, ...] = ()
    """Geoms whose ground contact is penalised (e.g. every colliding part but the feet)."""
    mirror_names: tuple[tuple[str, str], ...] = ()
    """Left-right symmetry, for symmetry augmentation: pairs of name parts that swap when the
    robot is mirrored in its x-z plane, e.g. (("FL", "FR"), ("RL", "RR")): the mirror image of
    joint FL_hip_joint is FR_hip_joint. A name with neither part is its own image (a waist).
    Which joints change sign is read from their axes in the home pose. Empty: not symmetric."""
    locked_joints: tuple[str, ...] = ()
    """Hinge joints welded at their home angle, removed from the model with their actuators:
    the robot moves without them, and cheaper (a humanoid's waist and arms on the CPU). `joints`
    must not list them."""
    action_scale_from_torque: float = 0.0
    """When > 0, each joint's action scale is this share of its actuator's torque limit over its
    position gain (rad per unit action), read from the MJCF: a unit action asks every joint for
    the same share of its torque, whatever its motor (mjlab's humanoid rule, 0.25 tau_max / kp).
    0: every joint takes the task's `action_scale`."""

    bounds: ClassVar[dict] = {"action_scale_from_torque": ">= 0"}

    @property
    def mjcf_file(self) -> Path:
        """The MJCF file this config names (`robot_file`)."""
        return robot_file(self.mjcf)


@dataclasses.dataclass(frozen=True)
class Robot:
    """A `RobotConfig` resolved against the compiled model, on the env's device."""

    base_body: int
    base_mass: float
    """The base body's nominal mass (kg)."""
    free_qpos: int | None
    """qpos address of the base's free joint; None: a fixed base (an arm on a table)."""
    free_dof: int | None
    """dof address of the base's free joint; None: a fixed base."""
    joint_qpos: Index
    joint_dof: Index
    home_qpos: torch.Tensor
    """(nq,) the home keyframe's qpos."""
    home_joint_pos: torch.Tensor
    """(joints,) the home keyframe's joint positions, in action order."""
    joint_lower: torch.Tensor
    joint_upper: torch.Tensor
    terrain_geom: int | None
    """The terrain's geom (composed into the scene); None: a scene without one."""
    foot_geoms: torch.Tensor
    foot_shape: int
    """The feet's mjtGeom type (all feet have one shape)."""
    foot_sizes: torch.Tensor
    """(feet, 3) each foot geom's size (MuJoCo's half-sizes and radii)."""
    fatal_geoms: torch.Tensor
    undesired_geoms: torch.Tensor
    joint_mirror: ColumnMirror | None = None
    """How joint vectors in action order mirror (None without usable `mirror_names`)."""
    foot_mirror: ColumnMirror | None = None
    """How per-foot vectors mirror."""
    mirror_error: str | None = None
    """Why `mirror_names` do not fit this robot, if they do not (told when symmetry is asked
    for; a run without it does not need them)."""
    action_scale: torch.Tensor | None = None
    """(joints,) per-joint action scales (`RobotConfig.action_scale_from_torque`); None: the task's."""

    @property
    def base_qpos(self) -> int:
        """qpos address of the free joint: position (3) then quaternion (4). A term that reads it
        on a fixed-base robot is refused in one line, when the env is built."""
        if self.free_qpos is None:
            raise UsageError("a term reads the base's position or orientation, and this robot's base is fixed")
        return self.free_qpos

    @property
    def base_dof(self) -> int:
        """dof address of the free joint: linear velocity (3, world frame) then angular (3, body frame)."""
        if self.free_dof is None:
            raise UsageError("a term reads the base's velocity, and this robot's base is fixed")
        return self.free_dof

    @property
    def ground_geom(self) -> int:
        """The terrain's geom; a term that reads ground contacts without one is refused."""
        if self.terrain_geom is None:
            raise UsageError("a term reads contacts with the ground, and this scene has no terrain")
        return self.terrain_geom

    @classmethod
    def resolve(cls, model: mujoco.MjModel, cfg: RobotConfig, device: torch.device) -> Robot:
        """Look every name up in `model`; a UsageError says which name is wrong and what exists."""
        if welded := [name for name in cfg.joints if name in cfg.locked_joints]:
            raise UsageError(f"robot config: joints lists {', '.join(welded)}, which locked_joints welds; drop it")
        base = _id(model, mujoco.mjtObj.mjOBJ_BODY, cfg.base_body, "base_body")
        free = int(model.body_jntadr[base])
        floating = free >= 0 and int(model.jnt_type[free]) == int(mujoco.mjtJoint.mjJNT_FREE)
        if not floating and model.body_dofnum[base] > 0:
            raise UsageError(
                f"robot config: base_body {cfg.base_body!r} moves without a free joint; name the floating base, "
                "or a body fixed to the world"
            )
        terrain = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, TERRAIN_GEOM)
        joints = [_id(model, mujoco.mjtObj.mjOBJ_JOINT, name, "joints") for name in cfg.joints] or _actuated(model)
        _check_actuators(model, joints)
        home = _id(model, mujoco.mjtObj.mjOBJ_KEY, cfg.home_keyframe, "home_keyframe")
        home_qpos = torch.tensor(model.key_qpos[home], dtype=torch.float32, device=device)
        qpos_index = [int(model.jnt_qposadr[j]) for j in joints]
        feet = [_id(model, mujoco.mjtObj.mjOBJ_GEOM, name, "foot_geoms") for name in cfg.foot_geoms]

        def geoms(names: tuple[str, ...], field: str) -> torch.Tensor:
            ids = [_id(model, mujoco.mjtObj.mjOBJ_GEOM, name, field) for name in names]
            return torch.tensor(ids, dtype=torch.long, device=device)

        return cls(
            base_body=base,
            base_mass=float(model.body_mass[base]),
            free_qpos=int(model.jnt_qposadr[free]) if floating else None,
            free_dof=int(model.jnt_dofadr[free]) if floating else None,
            joint_qpos=_index(qpos_index, device),
            joint_dof=_index([int(model.jnt_dofadr[j]) for j in joints], device),
            home_qpos=home_qpos,
            home_joint_pos=home_qpos[qpos_index],
            joint_lower=torch.tensor(model.jnt_range[joints, 0], dtype=torch.float32, device=device),
            joint_upper=torch.tensor(model.jnt_range[joints, 1], dtype=torch.float32, device=device),
            terrain_geom=terrain if terrain >= 0 else None,
            foot_geoms=torch.tensor(feet, dtype=torch.long, device=device),
            foot_shape=_foot_shape(model, feet),
            foot_sizes=torch.tensor(model.geom_size[feet], dtype=torch.float32, device=device).view(-1, 3),
            action_scale=(scale := _torque_action_scale(model, cfg.action_scale_from_torque, device)),
            fatal_geoms=geoms(cfg.fatal_contact_geoms, "fatal_contact_geoms"),
            undesired_geoms=geoms(cfg.undesired_contact_geoms, "undesired_contact_geoms"),
            **_mirrors(model, cfg, base, joints, home, device, scale),
        )


FOOT_SHAPES = (
    mujoco.mjtGeom.mjGEOM_SPHERE,
    mujoco.mjtGeom.mjGEOM_CAPSULE,
    mujoco.mjtGeom.mjGEOM_BOX,
    mujoco.mjtGeom.mjGEOM_CYLINDER,
    mujoco.mjtGeom.mjGEOM_ELLIPSOID,
)


def _foot_shape(model: mujoco.MjModel, feet: list[int]) -> int:
    shapes = {int(model.geom_type[g]) for g in feet} or {int(mujoco.mjtGeom.mjGEOM_SPHERE)}
    if len(shapes) > 1 or shapes.pop() not in FOOT_SHAPES:
        raise UsageError("robot config: foot_geoms must all be spheres, capsules, boxes, cylinders or ellipsoids")
    return int(model.geom_type[feet[0]]) if feet else int(mujoco.mjtGeom.mjGEOM_SPHERE)


def _torque_action_scale(model: mujoco.MjModel, share: float, device: torch.device) -> torch.Tensor | None:
    """share x torque limit / position gain, per actuator; None when `share` is 0."""
    if share == 0:
        return None
    kp = model.actuator_gainprm[:, 0]
    limit = np.minimum(-model.actuator_forcerange[:, 0], model.actuator_forcerange[:, 1])
    # A position servo: force = kp (ctrl - q) - kv qdot, i.e. a fixed gain kp and an affine bias -kp q.
    servo = (model.actuator_gaintype == mujoco.mjtGain.mjGAIN_FIXED) & (
        model.actuator_biastype == mujoco.mjtBias.mjBIAS_AFFINE
    )
    servo &= np.isclose(model.actuator_biasprm[:, 1], -kp)
    usable = servo & (kp > 0) & model.actuator_forcelimited.astype(bool) & (limit > 0)
    if model.nu == 0 or not usable.all():
        raise UsageError(
            "robot config: action_scale_from_torque needs position actuators with a gain (kp) and a "
            "forcerange on every joint; set them in the MJCF or use --env.robot.action-scale-from-torque 0"
        )
    return torch.tensor(share * limit / kp, dtype=torch.float32, device=device)


def _id(model: mujoco.MjModel, kind: mujoco.mjtObj, name: str, field: str) -> int:
    i = mujoco.mj_name2id(model, kind, name)
    if i < 0:
        what, count = {
            mujoco.mjtObj.mjOBJ_BODY: ("body", model.nbody),
            mujoco.mjtObj.mjOBJ_JOINT: ("joint", model.njnt),
            mujoco.mjtObj.mjOBJ_GEOM: ("geom", model.ngeom),
            mujoco.mjtObj.mjOBJ_KEY: ("keyframe", model.nkey),
        }[kind]
        names = [mujoco.mj_id2name(model, kind, k) for k in range(count)]
        known = ", ".join(n for n in names if n) or "none"
        raise UsageError(f"robot config: {field} names no {what} {name!r} in the MJCF; its {what} names: {known}")
    return i


def _actuated(model: mujoco.MjModel) -> list[int]:
    return [int(model.actuator_trnid[k, 0]) for k in range(model.nu)]


def _check_actuators(model: mujoco.MjModel, joints: list[int]) -> None:
    """Actions are written to ctrl in actuator order, so actuator k must drive joint k."""
    if _actuated(model) != joints:
        names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in _actuated(model)]
        raise UsageError(f"robot config: joints must list the actuated joints in actuator order: {', '.join(names)}")
    bad = [
        j
        for j in joints
        if int(model.jnt_type[j]) not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    ]
    if bad:
        raise UsageError("robot config: every actuated joint must be a hinge or a slide joint")


def mirror_name(name: str, pairs: tuple[tuple[str, str], ...]) -> str:
    """`name` with the first part of `pairs` it contains swapped for its partner."""
    for left, right in pairs:
        if left in name:
            return name.replace(left, right, 1)
        if right in name:
            return name.replace(right, left, 1)
    return name


def _mirror_sources(
    model: mujoco.MjModel, kind: mujoco.mjtObj, ids: list[int], cfg: RobotConfig, field: str
) -> list[int]:
    names = [mujoco.mj_id2name(model, kind, i) for i in ids]
    sources = []
    for name in names:
        image = mirror_name(name, cfg.mirror_names)
        if image not in names:
            raise UsageError(f"robot config: the mirror image of {name!r} is {image!r}, which {field} does not list")
        sources.append(names.index(image))
    return sources


def _joint_mirror(model: mujoco.MjModel, cfg: RobotConfig, base: int, joints: list[int], home: int) -> ColumnMirror:
    """Joint k of the image takes joint `source[k]`'s angle, negated where the mirrored axis of
    one points against the axis of the other. Reflecting a hinge in the x-z plane (M) turns it
    about M a by minus its angle, so the sign is -(M a_source . a_k); a slide moves along M a,
    so its sign is +(M a_source . a_k)."""
    sources = _mirror_sources(model, mujoco.mjtObj.mjOBJ_JOINT, joints, cfg, "joints")
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, home)
    mujoco.mj_kinematics(model, data)
    # Axes in the base's frame: the base may stand turned in the keyframe.
    to_base = data.xmat[base].reshape(3, 3).T
    axes = [to_base @ data.xaxis[j] for j in joints]
    signs, home_qpos = [], model.key_qpos[home]
    for k, (j, source) in enumerate(zip(joints, sources, strict=True)):
        dot = float(axes[source] @ (axes[k] * [1.0, -1.0, 1.0]))
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j)
        if abs(dot) < 0.99:
            image = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, joints[source])
            raise UsageError(
                f"robot config: joints {name!r} and {image!r} do not move about mirrored axes at home; fix mirror_names"
            )
        hinge = int(model.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_HINGE)
        sign = (-1.0 if hinge else 1.0) * (1.0 if dot > 0 else -1.0)
        home_k, home_source = home_qpos[model.jnt_qposadr[j]], home_qpos[model.jnt_qposadr[joints[source]]]
        if abs(home_k - sign * home_source) > 1e-4:
            raise UsageError(
                f"robot config: the home pose is not mirror-symmetric at joint {name!r}; "
                "fix the keyframe or mirror_names"
            )
        signs.append(sign)
    return ColumnMirror(torch.tensor(sources), torch.tensor(signs))


def _mirrors(
    model: mujoco.MjModel,
    cfg: RobotConfig,
    base: int,
    joints: list[int],
    home: int,
    device: torch.device,
    action_scale: torch.Tensor | None,
) -> dict:
    if not cfg.mirror_names:
        return {}
    try:
        joint_mirror, foot_mirror = _joint_mirror(model, cfg, base, joints, home), _foot_mirror(model, cfg)
    except UsageError as exc:
        return {"mirror_error": str(exc)}
    # A mirrored action must move the image joint as far as the action moves the joint.
    if action_scale is not None and not torch.allclose(action_scale.cpu()[joint_mirror.source], action_scale.cpu()):
        return {"mirror_error": "robot config: mirror-image joints have different action scales (their motors differ)"}
    return {"joint_mirror": joint_mirror.to(device), "foot_mirror": foot_mirror.to(device)}


def _foot_mirror(model: mujoco.MjModel, cfg: RobotConfig) -> ColumnMirror:
    feet = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, name) for name in cfg.foot_geoms]
    sources = _mirror_sources(model, mujoco.mjtObj.mjOBJ_GEOM, feet, cfg, "foot_geoms")
    return ColumnMirror(torch.tensor(sources), torch.ones(len(sources)))


def _index(columns: list[int], device: torch.device) -> Index:
    start = columns[0] if columns else 0
    if columns == list(range(start, start + len(columns))):
        return slice(start, start + len(columns))
    return torch.tensor(columns, dtype=torch.long, device=device)
