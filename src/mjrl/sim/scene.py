"""A scene composed from a robot's MJCF and a terrain with `mujoco.MjSpec`, so that any robot
walks on any terrain and no robot file holds a floor.

Terrain geoms collide with the robot's (contype 0, conaffinity 1, against the robot's contype 1,
conaffinity 0) and never with each other. They are added to the world body before the robot's
bodies, so the terrain is geom 0: with a flat terrain the compiled model is the same as the
robot files that held their own floor.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import mujoco
import numpy as np

from mjrl.errors import UsageError
from mjrl.sim.terrain import TerrainConfig, TerrainGrid, check_terrain, generate_terrain

TERRAIN_GEOM = "terrain"
"""Name of the terrain's geom in a composed scene."""


@dataclasses.dataclass(frozen=True)
class Scene:
    """What a task simulates: an MJCF file, with a terrain composed in when `terrain` is set."""

    mjcf: Path
    """A task's whole model (terrain None), or a robot without a floor."""
    terrain: TerrainConfig | None = None
    """The ground the robot stands on; None: the MJCF is the whole scene."""
    locked_joints: tuple[str, ...] = ()
    """Hinge joints welded at the angle that keyframe `lock_keyframe` gives them: removed from
    the model with their actuators, so a robot's unused joints cost nothing to simulate."""
    lock_keyframe: str = "home"

    def spec(self) -> tuple[mujoco.MjSpec, TerrainGrid | None]:
        """The scene as an editable spec, and the generated grid (None unless a grid)."""
        spec = _load_spec(self.mjcf)
        if self.locked_joints:
            _lock_joints(spec, self.locked_joints, self.lock_keyframe, self.mjcf)
        if self.terrain is None:
            return spec, None
        if problem := check_terrain(self.terrain):
            raise UsageError(problem)
        _check_no_floor(spec, self.mjcf)
        grid = generate_terrain(self.terrain) if self.terrain.kind == "grid" else None
        _add_terrain(spec, grid)
        return spec, grid

    def build(self) -> tuple[mujoco.MjModel, TerrainGrid | None]:
        """The compiled model and the generated grid (None unless a grid)."""
        spec, grid = self.spec()
        try:
            return spec.compile(), grid
        except ValueError as exc:
            message = " ".join(str(exc).split())
            raise UsageError(f"cannot compile the scene of {self.mjcf}: {message}") from None


def _load_spec(path: Path) -> mujoco.MjSpec:
    """Parse an MJCF; a file that does not parse is the user's to fix (a UsageError)."""
    try:
        return mujoco.MjSpec.from_file(str(path))
    except ValueError as exc:
        message = " ".join(str(exc).split())
        raise UsageError(f"cannot load the MJCF {path}: {message}") from None


def _lock_joints(spec: mujoco.MjSpec, names: tuple[str, ...], keyframe: str, path: Path) -> None:
    """Weld each hinge of `names` at its angle in `keyframe`: its child body turns by that angle
    about the joint's anchor and axis (its frame at the locked angle becomes its fixed frame),
    then the joint, its actuators and its keyframe entries go."""
    model = _compiled(spec, path)
    key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, keyframe)
    if key < 0:
        raise UsageError(f"cannot lock joints of {path}: it has no keyframe {keyframe!r}")
    locked = _lockable(model, spec, names, path)
    # A body's frame as compiled (whatever orientation its MJCF gave), then turned by each of
    # its locked joints in model order, the order in which they apply. A hinge turns by its
    # angle from its reference (qpos0).
    frames: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for j in sorted(locked):
        b, adr = int(model.jnt_bodyid[j]), model.jnt_qposadr[j]
        pos, quat = frames.get(b, (model.body_pos[b].copy(), model.body_quat[b].copy()))
        angle = float(model.key_qpos[key, adr] - model.qpos0[adr])
        frames[b] = _turned(pos, quat, model.jnt_pos[j], model.jnt_axis[j], angle)
    for j in locked:
        body = spec.joint(names[locked.index(j)]).parent
        body.alt.type = mujoco.mjtOrientation.mjORIENTATION_QUAT
        pos, quat = frames[int(model.jnt_bodyid[j])]
        body.pos, body.quat = pos.tolist(), quat.tolist()
    # Keyframe entries of the remaining joints and actuators, in model order.
    keep_qpos = np.ones(model.nq, dtype=bool)
    keep_qpos[[model.jnt_qposadr[j] for j in locked]] = False
    keep_dof = np.ones(model.nv, dtype=bool)
    keep_dof[[model.jnt_dofadr[j] for j in locked]] = False
    keep_ctrl = ~np.isin(model.actuator_trnid[:, 0], locked) | (model.actuator_trntype != mujoco.mjtTrn.mjTRN_JOINT)
    actuators = list(spec.actuators)  # in model order
    for a in np.flatnonzero(~keep_ctrl):
        spec.delete(actuators[a])
    for name in names:
        spec.delete(spec.joint(name))
    # Last: deleting a joint empties the keyframes.
    for k, saved in enumerate(spec.keys):
        saved.qpos = model.key_qpos[k][keep_qpos].tolist()
        saved.qvel = model.key_qvel[k][keep_dof].tolist()
        saved.ctrl = model.key_ctrl[k][keep_ctrl].tolist()


def _compiled(spec: mujoco.MjSpec, path: Path) -> mujoco.MjModel:
    try:
        return spec.compile()
    except ValueError as exc:
        message = " ".join(str(exc).split())
        raise UsageError(f"cannot compile the scene of {path}: {message}") from None


def _lockable(model: mujoco.MjModel, spec: mujoco.MjSpec, names: tuple[str, ...], path: Path) -> list[int]:
    """The ids of the joints `names` (in that order), each checked to be one that welding at
    its angle describes exactly: a hinge, in a body outside any <frame>, after no joint of its
    body that stays (the body's frame turns before the joints that stay)."""
    if len(set(names)) != len(names):
        raise UsageError(f"locked_joints names a joint twice: {', '.join(names)}")
    ids = []
    for name in names:
        j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
        if j < 0 or int(model.jnt_type[j]) != int(mujoco.mjtJoint.mjJNT_HINGE):
            raise UsageError(f"locked_joints: {path} has no hinge joint {name!r}; name hinge joints of the robot")
        if spec.joint(name).parent.frame is not None:
            raise UsageError(f"locked_joints: the body of {name!r} sits in a <frame> of {path}; move it out to lock it")
        ids.append(j)
    for j, name in zip(ids, names, strict=True):
        body = model.jnt_bodyid[j]
        earlier = range(model.body_jntadr[body], j)
        if any(k not in ids for k in earlier):
            raise UsageError(f"locked_joints: {name!r} follows a joint of its body that is not locked; lock that too")
    return ids


def _turned(
    pos: np.ndarray, quat: np.ndarray, anchor: np.ndarray, axis: np.ndarray, angle: float
) -> tuple[np.ndarray, np.ndarray]:
    """The frame (pos, quat, in the parent's frame) of a body whose hinge (`anchor`, `axis`, in
    the body's frame) stands at `angle`: the body turns by R about the anchor, so
    pos + quat (anchor - R anchor) and quat R."""
    turn, turned_anchor, shift, frame = np.zeros(4), np.zeros(3), np.zeros(3), np.zeros(4)
    mujoco.mju_axisAngle2Quat(turn, axis, angle)
    mujoco.mju_rotVecQuat(turned_anchor, anchor, turn)
    mujoco.mju_rotVecQuat(shift, anchor - turned_anchor, quat)
    mujoco.mju_mulQuat(frame, quat, turn)
    return pos + shift, frame


def _check_no_floor(spec: mujoco.MjSpec, path: Path) -> None:
    """A robot file with geoms of its own in the world body (its floor) would collide with the
    terrain as a second ground."""
    own = [geom.name or f"geom {geom.id}" for geom in spec.worldbody.geoms]
    if own:
        raise UsageError(
            f"the robot MJCF {path} has geoms in its worldbody ({', '.join(own)}): the ground comes from "
            "--env.terrain; remove them from the file"
        )


def _add_terrain(spec: mujoco.MjSpec, grid: TerrainGrid | None) -> None:
    spec.worldbody.add_light(pos=[0, 0, 3], dir=[0, 0, -1], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL)
    ground = {"contype": 0, "conaffinity": 1, "condim": 1, "rgba": [0.3, 0.4, 0.5, 1]}
    if grid is None:
        spec.worldbody.add_geom(name=TERRAIN_GEOM, type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05], **ground)
        return
    # MuJoCo keeps heightfield data in [0, 1] times an elevation range, above a base depth; rows
    # of its data run along y, columns along x.
    low, high = float(grid.heights.min()), float(grid.heights.max())
    span = max(high - low, 1e-3)
    size_x, size_y = (extent / 2 for extent in grid.extent)
    nx, ny = grid.heights.shape
    field = spec.add_hfield(name=TERRAIN_GEOM, nrow=ny, ncol=nx, size=[size_x, size_y, span, 0.5])
    field.userdata = ((grid.heights.T - low) / span).astype(np.float32).ravel().tolist()
    center = (grid.origin[0] + size_x, grid.origin[1] + size_y, low)
    spec.worldbody.add_geom(
        name=TERRAIN_GEOM, type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname=TERRAIN_GEOM, pos=list(center), **ground
    )
