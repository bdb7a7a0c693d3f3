"""Imported by a run (`--plugins emulated_graphs`, with this folder on the Python path): in every
process of the run, the loop's graphs are the CPU emulation of capture and replay
(`capture.py`), which the CPU otherwise refuses (`--runner.cuda-graphs` needs a GPU). For tests
of what replayed iterations mean for the rest of a job under the launcher: a replay runs none
of the rollout's Python, its heartbeats included."""

from __future__ import annotations

from typing import Any

import torch
from capture import EmulatedGraph

import mjrl.runner.start
from mjrl.runner.graphs import LoopGraphs


def emulated_loop_graphs(setting: str, ctx: Any, env: Any, generators: list[torch.Generator]) -> LoopGraphs | None:
    """`--runner.cuda-graphs on` or auto: the emulated graphs, collectives warmed up as on a GPU."""
    if setting == "off":
        return None
    ctx.warm_up_collectives()
    return LoopGraphs(lambda: EmulatedGraph([env.sim]), ctx)


mjrl.runner.start.loop_graphs = emulated_loop_graphs
