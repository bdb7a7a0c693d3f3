"""Offscreen frames of recorded states with MuJoCo's own renderer, and the choice of its
headless OpenGL backend.

MuJoCo fixes its GL backend (`MUJOCO_GL`) when it is first imported, so frames are drawn in a
process that sets it first (see mjrl.tools.video); `pick_gl_backend` tries each backend in a
throw-away interpreter, because one that fails cannot be swapped for another in-process.
"""

from __future__ import annotations

import os
import subprocess
import sys

import mujoco
import numpy as np

from mjrl.errors import UsageError
from mjrl.sim.scene import Scene

HEADLESS_BACKENDS = ("egl", "osmesa")
_PROBE = (
    "import mujoco; r = mujoco.Renderer(mujoco.MjModel.from_xml_string('<mujoco/>'), 16, 16); "
    "d = mujoco.MjData(r.model); r.update_scene(d); r.render()"
)


def pick_gl_backend() -> str:
    """The first headless backend that renders a frame here: MUJOCO_GL if the user set it,
    else EGL (GPU drivers or Mesa's software EGL), then OSMesa. A UsageError in one line when
    none works."""
    wanted = os.environ.get("MUJOCO_GL")
    candidates = (wanted,) if wanted else HEADLESS_BACKENDS
    failures = []
    for backend in candidates:
        env = {**os.environ, "MUJOCO_GL": backend}
        env.pop("PYOPENGL_PLATFORM", None)  # each backend sets the one it needs
        probe = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120)
        if probe.returncode == 0:
            return backend
        lines = probe.stderr.strip().splitlines()
        failures.append(f"{backend}: {lines[-1] if lines else f'exit code {probe.returncode}'}")
    raise UsageError(
        f"no OpenGL backend for MuJoCo's offscreen renderer works here ({'; '.join(failures)}); "
        "install EGL (libegl1) or OSMesa (libosmesa6), or set MUJOCO_GL"
    )


GHOST_RGBA = (0.3, 0.65, 1.0, 0.35)
"""A ghost's colour: translucent blue over the grey robot."""


def visual_model(scene: Scene, width: int = 640, height: int = 480, ghost: bool = False) -> mujoco.MjModel:
    """The task's scene with a checkered ground, a sky and a brighter headlight: a plain floor
    hides how fast a followed robot moves; and an offscreen buffer of at least `width` x
    `height`. With `ghost`, a translucent copy of the robot that touches nothing, whose
    position coordinates follow the robot's (`TaskSpec.video_ghost`). Only the picture changes;
    physics is not run here."""
    spec, _ = scene.spec()
    if ghost:
        _add_ghost(spec, scene)
    spec.visual.global_.offwidth = max(width, spec.visual.global_.offwidth)
    spec.visual.global_.offheight = max(height, spec.visual.global_.offheight)
    spec.add_texture(
        name="mjrl_sky", type=mujoco.mjtTexture.mjTEXTURE_SKYBOX, builtin=mujoco.mjtBuiltin.mjBUILTIN_GRADIENT,
        rgb1=[0.55, 0.7, 0.85], rgb2=[0.1, 0.15, 0.2], width=256, height=256,
    )  # fmt: skip
    spec.add_texture(
        name="mjrl_grid", type=mujoco.mjtTexture.mjTEXTURE_2D, builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
        rgb1=[0.22, 0.27, 0.32], rgb2=[0.38, 0.43, 0.48], width=256, height=256,
    )  # fmt: skip
    grid = spec.add_material(name="mjrl_grid", texrepeat=[2, 2], texuniform=True)
    grid.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = "mjrl_grid"
    for geom in spec.geoms:
        if geom.type == mujoco.mjtGeom.mjGEOM_PLANE:
            geom.material, geom.rgba = "mjrl_grid", [1, 1, 1, 1]
        elif geom.type == mujoco.mjtGeom.mjGEOM_HFIELD:  # plain: its shading shows steps and slopes
            geom.rgba = [0.45, 0.5, 0.55, 1]
    spec.visual.headlight.ambient = [0.35, 0.35, 0.35]
    spec.visual.headlight.diffuse = [0.6, 0.6, 0.6]
    return spec.compile()


def _add_ghost(spec: mujoco.MjSpec, scene: Scene) -> None:
    """The scene's robot again (its joints locked alike), attached last: its qpos follows the
    robot's. Without keyframes, actuators and sensors; seen, never touched."""
    from mjrl.sim.scene import Scene

    robot, _ = Scene(scene.mjcf, None, scene.locked_joints, scene.lock_keyframe).spec()
    for element in [*robot.keys, *robot.actuators, *robot.sensors]:
        robot.delete(element)
    for geom in robot.geoms:
        geom.contype, geom.conaffinity, geom.rgba = 0, 0, list(GHOST_RGBA)
    spec.worldbody.add_frame().attach_body(robot.worldbody.first_body(), "ghost_", "")


def make_camera(m: mujoco.MjModel, data: mujoco.MjData) -> mujoco.MjvCamera:
    """A model whose first joint is free (a legged robot) gets a camera that follows that body;
    any other one a fixed view of its bodies at their rest pose."""
    cam = mujoco.MjvCamera()
    mujoco.mj_forward(m, data)
    bodies = data.xpos[1:]
    if m.njnt and m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE:
        cam.type = mujoco.mjtCamera.mjCAMERA_TRACKING
        cam.trackbodyid = int(m.jnt_bodyid[0])
        # Far enough back for the whole robot: a humanoid's feet are about as far below the
        # tracked pelvis as it is tall.
        size = float(np.ptp(bodies, axis=0).max())
        cam.distance = max(4.0 * float(m.stat.meansize) + 1.2, 2.2 * size)
        cam.elevation, cam.azimuth = -20.0, 135.0
        return cam
    cam.type = mujoco.mjtCamera.mjCAMERA_FREE
    cam.lookat[:] = bodies.mean(axis=0)
    # The model's extent includes the floor: for the cart-pole, its whole rail.
    cam.distance = max(3.0 * float(np.ptp(bodies, axis=0).max()), 0.75 * float(m.stat.extent), 2.0)
    cam.elevation, cam.azimuth = -10.0, 90.0
    return cam


class FrameRenderer:
    """Draws a model at given joint positions, seen by `make_camera`'s camera."""

    def __init__(self, scene: Scene, width: int, height: int, ghost: bool = False):
        self.model = visual_model(scene, width, height, ghost)
        self.data = mujoco.MjData(self.model)
        self.renderer = mujoco.Renderer(self.model, height, width)
        self.camera = make_camera(self.model, self.data)

    def render(self, qpos: np.ndarray) -> np.ndarray:
        """An (height, width, 3) uint8 frame of the model at `qpos`."""
        self.data.qpos[:] = qpos
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_comPos(self.model, self.data)  # the tracking camera follows the subtree's centre of mass
        self.renderer.update_scene(self.data, camera=self.camera)
        return self.renderer.render()

    def close(self) -> None:
        self.renderer.close()
