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

    def spec(self) -> tuple[mujoco.MjSpec, TerrainGrid | None]:
        """The scene as an editable spec, and the generated grid (None unless a grid)."""
        spec = _load_spec(self.mjcf)
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
