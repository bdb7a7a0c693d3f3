"""Terrain for legged robots: flat ground, or a generated grid of patches of rising difficulty.

A grid has `rows` difficulty levels (along x) times columns of terrain types (along y), each an
`patch_size` square, inside a flat border. The whole grid is one heightfield: measured on the
CPU, one heightfield at 0.1 m costs the Go1 0.76x the physics rate of a plane, where 500 box
geoms (stairs as boxes, mjlab's way) cost 0.27x, because every box is one more broadphase pair
for every robot geom in every world (docs/benchmarks.md, "Terrain representation").

Every patch's edge is at height 0 and its centre holds a flat platform where robots spawn, so
patches join and a robot can walk from one into the next. Types are named by what a robot
spawned in the middle meets when it walks out: "stairs_up" is a pit it climbs out of,
"stairs_down" a pyramid it descends.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from functools import partial
from typing import ClassVar, Literal

import numpy as np

Samples = np.ndarray
"""Heights, or x or y coordinates, at a patch's (cells, cells) samples."""

TERRAIN_TYPES = ("rough", "slope_up", "slope_down", "stairs_up", "stairs_down")
"""mjrl's own types: the grid's default. More are added with `register_terrain_type`."""


@dataclasses.dataclass(frozen=True)
class TerrainConfig:
    """The ground the robots walk on, and where each env spawns on it."""

    kind: Literal["flat", "grid"] = "flat"
    """flat: one infinite plane; grid: generated patches of rising difficulty (`rows` x types)."""
    seed: int = 0
    """Seed of the generator: the same seed and settings give the same heights."""
    types: tuple[str, ...] = TERRAIN_TYPES
    """Terrain types, one group of `columns_per_type` columns each: rough, slope_up, slope_down,
    stairs_up, stairs_down, or any registered with `mjrl.sim.register_terrain_type`."""
    columns_per_type: int = 2
    """Columns of each type (each rough column draws its own noise)."""
    rows: int = 10
    """Difficulty levels; row r has difficulty r / (rows - 1)."""
    patch_size: float = 8.0
    """Side of one patch (m)."""
    border: float = 3.0
    """Flat border around the grid (m)."""
    resolution: float = 0.1
    """Horizontal spacing of the height samples (m)."""
    platform: float = 2.0
    """Side of the flat square in the middle of every patch, where robots spawn (m)."""
    rough_amplitude: tuple[float, float] = (0.01, 0.05)
    """Rough ground: heights uniform in +-amplitude, from the easiest row to the hardest (m)."""
    rough_wavelength: float = 0.2
    """Rough ground: spacing of the random heights, linearly interpolated between (m)."""
    slope: tuple[float, float] = (0.0, 0.4)
    """Pyramid slopes: rise over run, from the easiest row to the hardest."""
    step_height: tuple[float, float] = (0.02, 0.10)
    """Pyramid stairs: step height, from the easiest row to the hardest (m)."""
    step_width: float = 0.3
    """Pyramid stairs: tread depth (m)."""
    spawn_jitter: float = 0.5
    """Robots spawn uniformly within +-this of their patch's centre, in x and y (m)."""
    curriculum: bool = True
    """Move each env up or down a row after every episode by how far it walked (legged_gym's rule)."""
    max_initial_row: int = 4
    """Envs start on rows drawn uniformly from 0 to this (the last row when there are fewer)."""
    spawn_row: int = -1
    """Put every env on this row and keep it there (no curriculum); -1: the curriculum decides.
    For evaluation: `play ... --env.terrain.spawn-row 9 --env.terrain.spawn-type stairs_up`."""
    spawn_type: str = ""
    """Put every env on the columns of this type; empty: envs are spread over every column."""

    bounds: ClassVar[dict] = {
        "seed": ">= 0",
        "columns_per_type": ">= 1",
        "rows": ">= 1",
        "patch_size": "> 0",
        "border": ">= 0",
        "resolution": "> 0",
        "platform": ">= 0",
        "rough_amplitude": (">= 0", "ordered"),
        "rough_wavelength": "> 0",
        "slope": (">= 0", "ordered"),
        "step_height": (">= 0", "ordered"),
        "step_width": "> 0",
        "spawn_jitter": ">= 0",
        "max_initial_row": ">= 0",
        "spawn_row": ">= -1",
    }


@dataclasses.dataclass(frozen=True)
class TerrainGrid:
    """A generated grid: heights on a regular lattice, and each patch's spawn point."""

    heights: np.ndarray
    """(nx, ny) float32 heights (m); sample (i, j) lies at `origin + resolution * (i, j)`."""
    origin: tuple[float, float]
    """World x, y of sample (0, 0)."""
    resolution: float
    patch_centers: np.ndarray
    """(rows, columns, 3): the centre of each patch's platform, z its highest point there."""
    column_types: tuple[str, ...]
    """The terrain type of each column."""

    @property
    def extent(self) -> tuple[float, float]:
        """Size of the sampled area in x and y (m)."""
        nx, ny = self.heights.shape
        return (nx - 1) * self.resolution, (ny - 1) * self.resolution

    def digest(self) -> str:
        """SHA-256 of the heights: equal for the same seed and settings."""
        return hashlib.sha256(np.ascontiguousarray(self.heights).tobytes()).hexdigest()


def check_terrain(cfg: TerrainConfig) -> str | None:
    """What is wrong with `cfg` beyond its numeric ranges, as one line, or None."""
    if cfg.kind == "flat":
        return _grid_settings_on_flat(cfg)
    unknown = [t for t in cfg.types if t not in _PATCHES]
    if unknown or not cfg.types:
        return f"--env.terrain.types must name some of {', '.join(_PATCHES)} (got {' '.join(cfg.types) or 'none'})"
    if cfg.spawn_type and cfg.spawn_type not in cfg.types:
        return f"--env.terrain.spawn-type {cfg.spawn_type} is not one of --env.terrain.types: {', '.join(cfg.types)}"
    if cfg.spawn_row >= cfg.rows:
        return f"--env.terrain.spawn-row {cfg.spawn_row} is past the last row ({cfg.rows - 1})"
    if cfg.platform + 2 * cfg.spawn_jitter > cfg.patch_size:
        return "--env.terrain.platform plus twice --env.terrain.spawn-jitter must fit in --env.terrain.patch-size"
    if cfg.patch_size < 4 * cfg.resolution:
        return "--env.terrain.patch-size must span at least 4 height samples (--env.terrain.resolution)"
    return None


def _grid_settings_on_flat(cfg: TerrainConfig) -> str | None:
    """Where to spawn on a grid means nothing on a flat plane, and would be ignored without a
    word (an evaluation on the hardest stairs that ran on flat ground), so it is refused. The
    grid's shape is left alone: a rough run played on flat ground carries its own."""
    asked = [name for name, unset in (("spawn_row", -1), ("spawn_type", "")) if getattr(cfg, name) != unset]
    if not asked:
        return None
    flags = " and ".join(f"--env.terrain.{name.replace('_', '-')}" for name in asked)
    return f"{flags} choose patches of a terrain grid, and this terrain is flat; add --env.terrain.kind grid"


def generate_terrain(cfg: TerrainConfig) -> TerrainGrid:
    """The grid of `cfg`: rows of rising difficulty times columns of types, in a flat border."""
    cells = round(cfg.patch_size / cfg.resolution)
    border = round(cfg.border / cfg.resolution)
    column_types = tuple(t for t in cfg.types for _ in range(cfg.columns_per_type))
    rng = np.random.default_rng(cfg.seed)
    heights = np.zeros((cfg.rows * cells + 2 * border, len(column_types) * cells + 2 * border), np.float32)
    centers = np.zeros((cfg.rows, len(column_types), 3))
    # Sample coordinates within a patch, from its centre: the sample spacing is the resolution.
    local = (np.arange(cells) + 0.5) * cfg.resolution - cfg.patch_size / 2
    x, y = np.meshgrid(local, local, indexing="ij")
    platform = np.maximum(np.abs(x), np.abs(y)) <= cfg.platform / 2
    for row in range(cfg.rows):
        difficulty = row / max(cfg.rows - 1, 1)
        for col, kind in enumerate(column_types):
            patch = _PATCHES[kind](cfg, difficulty, x, y, rng)
            i, j = border + row * cells, border + col * cells
            heights[i : i + cells, j : j + cells] = patch
            centers[row, col] = (
                (i + cells / 2 - 0.5) * cfg.resolution,
                (j + cells / 2 - 0.5) * cfg.resolution,
                patch[platform].max(),
            )
    # The grid's centre is the world's origin.
    origin = (-(heights.shape[0] - 1) * cfg.resolution / 2, -(heights.shape[1] - 1) * cfg.resolution / 2)
    centers[..., 0] += origin[0]
    centers[..., 1] += origin[1]
    return TerrainGrid(heights, origin, cfg.resolution, centers, column_types)


def _lerp(bounds: tuple[float, float], t: float) -> float:
    return bounds[0] + (bounds[1] - bounds[0]) * t


def _distance_from_edge(cfg: TerrainConfig, x: Samples, y: Samples) -> Samples:
    """How far each sample is from the patch's edge towards its centre, capped at the platform:
    pyramids and pits rise or fall with it and are flat on the platform."""
    half = cfg.patch_size / 2
    return np.minimum(half - np.maximum(np.abs(x), np.abs(y)), half - cfg.platform / 2)


def _rough(cfg: TerrainConfig, difficulty: float, x: Samples, y: Samples, rng: np.random.Generator) -> Samples:
    """Uniform random heights every `rough_wavelength`, interpolated bilinearly between; the
    platform is flat."""
    amplitude = _lerp(cfg.rough_amplitude, difficulty)
    coarse = np.arange(x[0, 0], x[-1, 0] + cfg.rough_wavelength, cfg.rough_wavelength)
    knots = rng.uniform(-amplitude, amplitude, (coarse.size, coarse.size))
    along_x = np.stack([np.interp(x[:, 0], coarse, knots[:, k]) for k in range(coarse.size)], axis=1)
    patch = np.stack([np.interp(y[0, :], coarse, along_x[i]) for i in range(x.shape[0])])
    patch[np.maximum(np.abs(x), np.abs(y)) <= cfg.platform / 2] = 0.0
    return patch


def _slope(
    sign: float, cfg: TerrainConfig, difficulty: float, x: Samples, y: Samples, rng: np.random.Generator
) -> Samples:
    """A pyramid (sign +1: the robot walks down from its top) or a pit (-1: it walks up out)."""
    return sign * _lerp(cfg.slope, difficulty) * _distance_from_edge(cfg, x, y)


def _stairs(
    sign: float, cfg: TerrainConfig, difficulty: float, x: Samples, y: Samples, rng: np.random.Generator
) -> Samples:
    """Pyramid stairs (sign +1: down from the top) or a stepped pit (-1: up out of it)."""
    steps = np.floor(_distance_from_edge(cfg, x, y) / cfg.step_width)
    return sign * _lerp(cfg.step_height, difficulty) * steps


PatchFn = Callable[[TerrainConfig, float, Samples, Samples, np.random.Generator], Samples]
"""(config, difficulty in [0, 1], x, y, generator) -> the patch's heights at its samples (x, y
from the patch's centre). A patch's edge must be at height 0, so that patches join, and its
platform (`TerrainConfig.platform`, in the middle) flat, so that robots spawn level; difficulty
0 is the first row, 1 the last."""

_PATCHES: dict[str, PatchFn] = {
    "rough": _rough,
    "slope_up": partial(_slope, -1.0),
    "slope_down": partial(_slope, 1.0),
    "stairs_up": partial(_stairs, -1.0),
    "stairs_down": partial(_stairs, 1.0),
}


def register_terrain_type(name: str, patch: PatchFn) -> None:
    """Make `name` a terrain type (`--env.terrain.types ... NAME`), its patches drawn by `patch`;
    the curriculum serves its columns like any other type's. A name is registered once."""
    if _PATCHES.get(name, patch) is not patch:
        raise ValueError(f"terrain type {name!r} is already registered")
    _PATCHES[name] = patch


def terrain_types() -> tuple[str, ...]:
    """Every registered terrain type, mjrl's own first."""
    return tuple(_PATCHES)
