"""Fault injection for tests of fault tolerance, with real processes: `--fault KIND@RANK:ITERATION`.

At the start of iteration ITERATION (0-based), rank RANK does KIND:
  raise    raise an exception              exit     os._exit(3) without cleanup
  kill     SIGKILL itself                  hang     SIGSTOP itself (a hung rank)
  perturb  change one parameter slightly (the replica check must notice)
  nan      give NaN actions to the first half of its envs for this iteration
  slow     sleep SLOW_S seconds (with ITERATION = max_iterations: a slow final save or upload)
Faults fire only on the first attempt of an elastic job, so a restart can succeed.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import time

import torch

from mjrl.errors import UsageError
from mjrl.rl import Algorithm
from mjrl.runner.hooks import LoopHook

KINDS = ("raise", "exit", "kill", "hang", "perturb", "nan", "slow")
SLOW_S = 8.0


@dataclasses.dataclass(frozen=True)
class Fault:
    kind: str
    rank: int
    iteration: int

    @classmethod
    def parse(cls, spec: str) -> Fault | None:
        if not spec:
            return None
        try:
            kind, where = spec.split("@")
            rank, iteration = (int(x) for x in where.split(":"))
        except ValueError:
            raise UsageError(f"--fault {spec!r}: expected KIND@RANK:ITERATION, e.g. raise@1:2") from None
        if kind not in KINDS:
            raise UsageError(f"--fault {spec!r}: KIND must be one of {', '.join(KINDS)}")
        return cls(kind, rank, iteration)

    def due(self, rank: int, iteration: int, restart_count: int) -> bool:
        return restart_count == 0 and rank == self.rank and iteration == self.iteration

    def trigger(self, parameters: list[torch.Tensor]) -> None:
        """Carry out the process-level faults; `perturb` changes `parameters` in place."""
        print(
            f"injecting fault {self.kind} on rank {self.rank} at iteration {self.iteration}",
            file=sys.stderr,
            flush=True,
        )
        if self.kind == "raise":
            raise RuntimeError(f"injected fault on rank {self.rank} at iteration {self.iteration}")
        if self.kind == "exit":
            os._exit(3)
        if self.kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.kind == "hang":
            os.kill(os.getpid(), signal.SIGSTOP)
        if self.kind == "slow":
            time.sleep(SLOW_S)
        if self.kind == "perturb":
            with torch.no_grad():
                parameters[0].view(-1)[0] += 1e-3


def nan_actions(actions: torch.Tensor) -> torch.Tensor:
    """`actions` with the first half of the envs' rows NaN: a corrupted controller. A copy, so
    the rollout stores the policy's own (finite) actions, as it does for any controller fault."""
    corrupted = actions.clone()
    corrupted[: actions.shape[0] // 2] = float("nan")
    return corrupted


class FaultHook(LoopHook):
    """`--fault` as a loop hook: at its iteration, on its rank, on a job's first attempt only,
    it ends or stops the process, perturbs a parameter, sleeps, or (`nan`) corrupts that
    iteration's actions."""

    def __init__(self, fault: Fault, rank: int, restart_count: int) -> None:
        self.fault, self.rank, self.restart_count = fault, rank, restart_count
        self.corrupt = False
        """This iteration's actions are corrupted (`nan`)."""

    def iteration_start(self, iteration: int, algorithm: Algorithm) -> bool:
        due = self.fault.due(self.rank, iteration, self.restart_count)
        self.corrupt = due and self.fault.kind == "nan"
        if due and not self.corrupt:
            self.fault.trigger(algorithm.parameters())
        return self.corrupt

    def actions(self, actions: torch.Tensor) -> torch.Tensor:
        return nan_actions(actions) if self.corrupt else actions


def fault_hooks(spec: str, rank: int, restart_count: int) -> list[LoopHook]:
    """The hooks for `--fault SPEC` (none without one); a malformed SPEC raises UsageError."""
    fault = Fault.parse(spec)
    return [] if fault is None else [FaultHook(fault, rank, restart_count)]
