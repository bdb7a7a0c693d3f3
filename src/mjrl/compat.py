"""What older runs and older habits wrote, read as today's: every compatibility shim of mjrl.

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

Distillation was chosen by naming a teacher until 2026-11-28 (`--distillation.teacher RUN`,
`algo: auto`, its settings in a `distillation` section beside PPO's `algorithm`); it is an
ordinary algorithm now (`--algo distillation --algorithm.teacher RUN`). `upgrade_config` reads
an older config (a run's config.yaml, a `--config` file, a checkpoint's `config`) as today's,
and `mjrl.cli.flags.moved_distillation_flags` rewrites the old flags, with a note.

Older config files (a run's config.yaml, a `--config` file) are read through three tables,
keyed by the config class and the key (`RobotConfig.floor_geom`), which
`mjrl.config.apply_dict` consults wherever the class stands in the file; older command lines
and mjlab's spellings through `FLAG_SPELLINGS` and the same `SPLIT_SECTIONS` (`mjrl.cli.flags`:
the flag that holds the value now, with a note).
"""

from __future__ import annotations

from typing import Any

import torch

RENAMED_KEYS = {
    # Runs from before the robot became config (issue 12) named the base "trunk".
    "RandomizationConfig.trunk_mass_offset": "base_mass_offset",
}
"""A key of older files, as CLASS.KEY -> its name now."""

RETIRED_KEYS = frozenset({
    # The floor left the robots' files with issue 22; older runs' config.yaml still name it.
    "RobotConfig.floor_geom",
})  # fmt: skip
"""Keys of older files that mean nothing now, as CLASS.KEY: ignored when read."""

SPLIT_SECTIONS = {
    # Runs before issue 23 had one `agent` section; each key goes to the section with the field.
    "TrainConfig.agent": ("runner", "algorithm", "policy"),
}
"""An older section, as CLASS.SECTION -> the sections of CLASS that now hold its keys."""

FLAG_SPELLINGS = {"--env.scene.num-envs": "--env.num-envs", "--agent.seed": "--seed"}
"""mjlab's spellings of mjrl's flags (`--agent.max-iterations` and `--agent.save-interval`, also
mjrl's own former spellings, are found through `SPLIT_SECTIONS`)."""

MOVED_ROBOT_FILES = {f"velocity/{name}.xml": f"robots/{name}.xml" for name in ("go1", "mule", "humanoid")}
"""An own robot's old name (under `mjrl:`, or the end of an installation's absolute path) -> its
name now."""


def upgrade_config(config: dict[str, Any]) -> dict[str, Any]:
    """A run's config as written before distillation was an ordinary algorithm, read as today's:
    a `distillation` section that names a teacher (with `algo` auto or distillation) becomes
    `algo: distillation` with that section as `algorithm`; one that names none is dropped (the
    run trained PPO). Anything else is returned as it is."""
    if "distillation" not in config:
        return config
    config = dict(config)
    section = config.pop("distillation") or {}
    if section.get("teacher") and config.get("algo", "auto") in ("auto", "distillation"):
        config |= {"algo": "distillation", "algorithm": section}
    return config


def upgrade_checkpoint(state: dict[str, Any]) -> dict[str, Any]:
    """`state` in the current format (a new dict; tensors shared)."""
    state = dict(state)
    if isinstance(state.get("config"), dict):
        state["config"] = upgrade_config(state["config"])
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
