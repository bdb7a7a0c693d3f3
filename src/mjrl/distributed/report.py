"""The built-in launcher as the user sees it: its exceptions mapped to one clear outcome, and the
last lines of a failed job (which rank failed, on which node, and why, the root cause first)."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable
from typing import Any

from torch.distributed import DistNetworkError, DistStoreError
from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure
from torch.distributed.elastic.rendezvous.api import RendezvousError

from mjrl.distributed.context import node_name, split_endpoint
from mjrl.distributed.launch import launch, nodes_met
from mjrl.distributed.options import LaunchOptions
from mjrl.distributed.watchdog import EXIT_CODE as WATCHDOG_EXIT
from mjrl.errors import UsageError

RESUME_HINT = "continue with --resume True (or the same --rdzv-id)"


class JobEnded(Exception):
    """The job ended without results (a rank failed, or a signal stopped it); what happened has
    been printed. `exit_code` is the launcher's exit code."""

    def __init__(self, exit_code: int):
        super().__init__(f"exit code {exit_code}")
        self.exit_code = exit_code


def launch_job(opts: LaunchOptions, worker: Callable[..., Any], *args: Any) -> dict[int, Any]:
    """`launch(opts, worker, *args)`: {global rank: return value} of this node's ranks. A failed
    or stopped job raises JobEnded after its report; a rendezvous that never happens is bad
    input (UsageError), one line."""
    # torch's agent logs a traceback of its own for every worker that exits non-zero and a
    # warning for each one it stops; the workers and `report_failure` say what failed, and bad
    # input must stay one line.
    for name in ("torch.distributed.elastic.multiprocessing.api", "torch.multiprocessing.spawn"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        return launch(opts, worker, *args)
    except ChildFailedError as exc:
        raise JobEnded(report_failure(exc.failures)) from None
    except SignalException as exc:
        # The agent has already passed the signal on: rank 0 checkpointed before exiting.
        print(f"train: stopped by {exc.sigval.name}; {RESUME_HINT}", file=sys.stderr, flush=True)
        raise JobEnded(128 + int(exc.sigval)) from None
    except (RendezvousError, DistNetworkError, DistStoreError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if nodes_met():
            # Not bad input: the job ran, then the node serving its store ended (or the network
            # failed); the other ranks have said what they know.
            # Node 0's launcher serves it at the endpoint, whose host a Slurm job names by the
            # node's name.
            host = split_endpoint(opts.rdzv_endpoint)[0] if opts.rdzv_endpoint else "localhost"
            print(
                f"train: node {host}, the rendezvous store's host, ended or the network failed: lost the store at "
                f"{opts.rdzv_endpoint} ({first}); {RESUME_HINT}",
                file=sys.stderr,
                flush=True,
            )
            raise JobEnded(1) from None
        raise UsageError(
            f"no rendezvous at {opts.rdzv_endpoint or 'localhost'} within {opts.rdzv_timeout_s:g} s ({first}); "
            "check --rdzv-endpoint and that every node was started"
        ) from None


def report_failure(failures: dict[int, ProcessFailure]) -> int:
    """The launcher's last lines: which rank failed, on which node, and why; the root cause
    first. Exit code 2 when the root cause is bad input (a worker's UsageError), else 1."""
    # Workers signalled directly (SLURM signals every process of a job step), not through this
    # launcher: they agreed to stop and rank 0 checkpointed, so this is a preemption.
    stop_codes = {128 + signal.SIGTERM, 128 + signal.SIGINT}
    if all(f.exitcode in stop_codes for f in failures.values()):
        code = max(f.exitcode for f in failures.values())
        print(f"train: stopped by {signal.Signals(code - 128).name}; {RESUME_HINT}", file=sys.stderr, flush=True)
        return code
    # A rank stopped by its watchdog only reacted to another rank's failure.
    roots = [r for r, f in failures.items() if f.exitcode != WATCHDOG_EXIT] or list(failures)
    root = min(roots, key=lambda r: (failures[r].timestamp, r))
    if failures[root].exitcode == 2:
        return 2  # bad input: the worker printed its one line already
    for rank in sorted(failures, key=lambda r: (r != root, r)):
        failure = failures[rank]
        label = " (first failure)" if rank == root and len(failures) > 1 else ""
        print(
            f"train: rank {rank}{label} (local rank {failure.local_rank}, node {node_name()}, "
            f"pid {failure.pid}) failed: {failure_cause(failure)}",
            file=sys.stderr,
        )
    return 1


def failure_cause(failure: ProcessFailure) -> str:
    """Why one rank failed: its signal, its watchdog's reason, or its exit code and last line."""
    if failure.exitcode < 0:
        return f"killed by signal {failure.signal_name()}"
    message = failure.message if isinstance(failure.message, str) else failure.message.get("message", "")
    message = "" if message.startswith("To enable traceback") else message.strip().splitlines()[-1:]
    message = message[0] if message else ""
    if failure.exitcode == WATCHDOG_EXIT:
        return f"stopped by its watchdog: {message}" if message else "stopped by its watchdog"
    return f"exit code {failure.exitcode}" + (f": {message}" if message else "")
