"""Preemption: SIGTERM or SIGINT asks the run to stop at the next safe point and checkpoint."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from types import FrameType


class Preempted(Exception):
    """The run stopped on a signal after writing a checkpoint (rank 0)."""

    def __init__(self, signum: int, iteration: int, checkpoint: Path | None, run_dir: Path):
        self.signum, self.iteration, self.checkpoint, self.run_dir = signum, iteration, checkpoint, run_dir
        super().__init__(f"stopped by {signal.Signals(signum).name} after iteration {iteration}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class StopFlag:
    """Records the first SIGTERM/SIGINT. The ranks agree to stop at the end of the iteration in
    which any of them saw it (the runner folds the flag into its per-iteration gather); rank 0
    checkpoints, every rank exits. A second SIGINT interrupts at once."""

    def __init__(self) -> None:
        self.requested = 0
        self.on_sigint: Callable[[], None] | None = None
        """Run on SIGINT before it counts: torch gives a worker SIGINT when its launcher dies
        (once per dying thread), which is no stop request; a rank's watchdog ends the process
        there if that is what it was (`run_rank` sets it)."""
        self._checking = False

    def install(self) -> StopFlag:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGINT and self.on_sigint is not None:
            if self._checking:  # the dying launcher's next SIGINT, heard while checking
                return
            self._checking = True
            try:
                self.on_sigint()
            finally:
                self._checking = False
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = signum
