"""Jobs that run every few seconds of simulated time, each env on its own timer: commands that
are redrawn (a new velocity to follow) and interval events (a push).

Each job has a row of timers, one per env, drawn uniformly from the job's interval. At every
env step the timers count down; the envs whose timer is due run the job, and their timers are
drawn afresh. A reset draws every job's timer afresh for the envs it resets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

Job = Callable[[torch.Tensor], None]
"""`job(due)`: run for the envs under the (num_envs,) bool mask `due`."""


class IntervalTimers:
    """Timers for `jobs`, `(interval_s, job)` pairs run in their order (commands first, then
    events). Written in place, without a host sync, as the env step requires."""

    def __init__(
        self,
        jobs: Sequence[tuple[tuple[float, float], Job]],
        num_envs: int,
        step_dt: float,
        device: torch.device,
        generator: torch.Generator,
    ) -> None:
        self.jobs = [job for _, job in jobs]
        self.step_dt = step_dt
        self.generator = generator
        self.timers = torch.zeros(len(jobs), num_envs, device=device)
        """(jobs, num_envs): seconds until each env runs each job."""
        self._fresh = torch.zeros(len(jobs), num_envs, device=device)
        self._low = torch.tensor([[low] for (low, _), _ in jobs], device=device)
        self._width = torch.tensor([[high - low] for (low, high), _ in jobs], device=device)

    def run_due(self) -> None:
        """Count one env step down and run each job for the envs whose timer is due."""
        if not self.jobs:
            return
        self.timers -= self.step_dt
        due = self.timers <= 0
        # Each job's fresh timers are drawn right after the job's own draws, so the random stream
        # (and a seeded run) is the same as with one timer tensor per job.
        for row, job in enumerate(self.jobs):
            job(due[row])
            torch.rand(self._fresh.shape[1], device=self._fresh.device, generator=self.generator, out=self._fresh[row])
        self._restart(due)

    def redraw(self, mask: torch.Tensor) -> None:
        """A reset starts every job's timer afresh: a command drawn at the reset then holds for a
        whole interval, not for what the old episode had left of its timer."""
        if not self.jobs:
            return
        torch.rand(self._fresh.shape, device=self._fresh.device, generator=self.generator, out=self._fresh)
        self._restart(mask)

    def _restart(self, mask: torch.Tensor) -> None:
        """The timers under `mask` start over from the uniform draws in `_fresh`, scaled to each
        job's interval."""
        fresh = self._fresh.mul_(self._width).add_(self._low)
        torch.where(mask, fresh, self.timers, out=self.timers)
