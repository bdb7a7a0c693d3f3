"""One rank's life in a distributed job: join the process group, run, and leave the group on
every way out (success, preemption, bad input, failure), telling the other ranks when it fails."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import TypeVar

from mjrl.distributed.context import DistContext, init_distributed, launcher_env, shutdown_distributed
from mjrl.distributed.preemption import Preempted, StopFlag
from mjrl.errors import SharedUsageError, UsageError

T = TypeVar("T")


def run_rank(
    body: Callable[[DistContext, StopFlag], T],
    device: str,
    collective_timeout_s: float,
    hang_timeout_s: float,
    forced_collectives: bool = False,
) -> T:
    """One rank of a distributed job: join the process group, run `body(ctx, stop)`, leave the
    group."""
    stop = StopFlag().install()
    ctx = init_distributed(device, collective_timeout_s, hang_timeout_s, forced_collectives)
    stop.on_sigint = ctx.watchdog.exit_if_launcher_died
    ctx.watchdog.start()
    try:
        result = body(ctx, stop)
    except Preempted:
        ctx.watchdog.finish()
        shutdown_distributed()
        raise
    except UsageError as exc:
        # Stop this rank's watchdog first: an abort seen now would turn this exit 2 into 75.
        ctx.watchdog.stop()
        if not isinstance(exc, SharedUsageError):  # the others do not know yet
            ctx.watchdog.abort(f"rank {ctx.rank}: {exc}", exit_code=2)
        # Leave the process group before exiting: torch's threads still running at interpreter
        # exit abort the process (SIGABRT instead of exit code 2).
        shutdown_distributed()
        raise
    except BaseException as exc:
        leave_after_failure(ctx, exc)
        raise
    ctx.watchdog.finish()
    shutdown_distributed()
    return result


def leave_after_failure(ctx: DistContext, exc: BaseException) -> None:
    """Tell the other ranks (on every node) at once, instead of leaving them blocked in a
    collective with this one until it times out, then leave the process group, as the other
    exits do. A rank whose error only followed another rank's failure (a collective broken by
    that rank leaving) ends as its watchdog would have, with that rank's reason."""
    # This rank's watchdog first: seeing the abort posted below, it would end this process in
    # the middle of leaving the group.
    ctx.watchdog.stop()
    posted = ctx.watchdog.posted_abort()
    if posted is None:
        cause = f"rank {ctx.rank} (node {ctx.watchdog.node}) failed: {type(exc).__name__}: {exc}"
        # A worker's KeyboardInterrupt is a second SIGINT: its launcher dying, or a user's.
        wait_s = 1.0 if isinstance(exc, KeyboardInterrupt) else 0.0
        ctx.watchdog.abort(ctx.watchdog.launcher_death(wait_s) or cause)
    with contextlib.suppress(Exception):  # a failure to leave must not hide the error
        shutdown_distributed()
    if posted is not None:
        ctx.watchdog.exit_for_abort(posted)


def exit_as_a_command(prog: str, run: Callable[[], T]) -> T:
    """`run()` in a worker process of the built-in launcher, ending as the command would: bad
    input with exit code 2 and one line `prog: error: ...`, a preemption with its signal's code."""
    try:
        return run()
    except UsageError as exc:
        # Every rank knows a shared error: one line per node, from its local rank 0.
        launcher = launcher_env()
        if not isinstance(exc, SharedUsageError) or launcher is None or launcher.local_rank == 0:
            print(f"{prog}: error: {exc}", file=sys.stderr, flush=True)
        sys.exit(2)
    except Preempted as stop:
        sys.exit(stop.exit_code)
