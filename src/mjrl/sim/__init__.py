"""Simulation layer: MuJoCo-Warp model and data for a batch of worlds on one device, and the
scenes and terrains they are compiled from."""

from mjrl.sim.scene import TERRAIN_GEOM, Scene
from mjrl.sim.simulation import SimConfig, Simulation, gc_suspended
from mjrl.sim.terrain import (
    TERRAIN_TYPES,
    PatchFn,
    TerrainConfig,
    TerrainGrid,
    generate_terrain,
    register_terrain_type,
    terrain_types,
)

__all__ = [
    "TERRAIN_GEOM",
    "TERRAIN_TYPES",
    "PatchFn",
    "Scene",
    "SimConfig",
    "Simulation",
    "TerrainConfig",
    "TerrainGrid",
    "gc_suspended",
    "generate_terrain",
    "register_terrain_type",
    "terrain_types",
]
