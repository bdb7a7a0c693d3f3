"""What older runs wrote, read as today's: one place for the checkpoint format's history.

`mjrl.checkpoint.load_checkpoint` passes every checkpoint through `upgrade_checkpoint`, so the
code that reads a checkpoint sees the current format (`mjrl.checkpoint.FORMAT`) only. What each
older format lacked or named otherwise:
- format 1 (no "format" key; before 2026-11-27): rank 0's env state alone under "env" (or,
  before issue 22, "curriculum") instead of every rank's under "env_ranks"; the algorithm's
  random stream under "rng.ppo"; random states as bare tensors before they were tagged with
  their device kind (before issue 11).

Robot files that moved: mjrl's robots lived in the velocity task's folder until 2026-11-27
(`mjrl:velocity/go1.xml`); they are `mjrl:robots/go1.xml` now, and the old names still resolve
(`MOVED_ROBOT_FILES`, read by `mjrl.envs.robot.robot_file`).

Older config files are read by the configs themselves (`mjrl.config.apply_dict`: each config
class declares the keys it renamed, retired or split), and older command lines by
`mjrl.cli.flags`.
"""

from __future__ import annotations

from typing import Any

import torch

MOVED_ROBOT_FILES = {f"velocity/{name}.xml": f"robots/{name}.xml" for name in ("go1", "mule", "humanoid")}
"""An own robot's old name (under `mjrl:`, or the end of an installation's absolute path) -> its
name now."""


def upgrade_checkpoint(state: dict[str, Any]) -> dict[str, Any]:
    """`state` in the current format (a new dict; tensors shared)."""
    state = dict(state)
    if state.get("format", 1) < 2:
        if "env_ranks" not in state:
            state["env_ranks"] = [state.pop("env", state.pop("curriculum", {}))]
        rng = dict(state.get("rng", {}))
        if "ppo" in rng and "algorithm" not in rng:
            rng["algorithm"] = rng.pop("ppo")
        for key in ("env", "algorithm"):  # the generators' (torch's and CUDA's global states stay bare)
            if isinstance(rng.get(key), torch.Tensor):
                rng[key] = tagged_generator_state(rng[key])
        state["rng"] = rng
        state["format"] = 2  # each upgrade step names the format it reaches
    return state


def tagged_generator_state(saved: torch.Tensor) -> dict[str, Any]:
    """A generator's bare state, as checkpoints kept it before states were tagged with their
    device kind: 16 bytes are CUDA's Philox state, anything else the CPU's Mersenne Twister."""
    return {"device": "cuda" if saved.numel() == 16 else "cpu", "state": saved}
