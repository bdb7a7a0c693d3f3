"""Simulation layer: MuJoCo-Warp model and data for a batch of worlds on one device."""

from mjrl.sim.simulation import SimConfig, Simulation

__all__ = ["SimConfig", "Simulation"]
