"""The built-in launcher's options: a config of their own, nested once in the training config.

No torch import here: the CLI parses flags (and `--help`) with this class.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar


@dataclasses.dataclass(frozen=True)
class LaunchOptions:
    """mjrl's built-in elastic launcher (torch's agent): how many ranks, on which nodes."""

    nproc_per_node: int = 0
    """Start this many ranks on this node with mjrl's built-in elastic launcher (0: one process,
    no launcher)."""
    nnodes: int = 1
    """Nodes of the job (built-in launcher); start `train` on each node with the same flags."""
    node_rank: int = -1
    """This node's rank for a static rendezvous at --rdzv-endpoint (-1: c10d rendezvous assigns
    node ranks)."""
    rdzv_endpoint: str = ""
    """HOST:PORT where the nodes meet (needed with --nnodes > 1; default: a free local port)."""
    rdzv_id: str = ""
    """Job id shared by all nodes (needed with --nnodes > 1; default: a fresh id). Restarts of
    the same job id continue the same run directory."""
    rdzv_timeout_s: float = 60.0
    """How long the built-in launcher waits for all nodes to join the rendezvous."""
    max_restarts: int = 0
    """Restart the workers of this node up to this many times after a failure; each restart
    resumes from the newest checkpoint (torch counts restarts per node)."""

    bounds: ClassVar[dict] = {
        "nproc_per_node": ">= 0",
        "nnodes": ">= 1",
        "node_rank": ">= -1",
        "rdzv_timeout_s": "> 0",
        "max_restarts": ">= 0",
    }
    """Ranges of the numeric fields (see `mjrl.config.check_numbers`)."""
