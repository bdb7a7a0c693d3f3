"""mjrl's own launcher: torch's elastic agent started from inside `train`.

`launch()` builds a `LaunchConfig` with every field set explicitly (its defaults are not
torchrun's: etcd rendezvous, three restarts) and runs a module-level worker function in
`nproc_per_node` processes. The workers' return values come back to the caller.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

import torch.distributed.launcher.api as launcher_api
from torch.distributed.elastic.agent.server.api import RunResult, WorkerGroup, WorkerState
from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

from mjrl.distributed.context import (
    TORCHRUN_DEFAULT_JOB_ID,
    WATCH_STORE_VARIABLE,
    scheduler_node_name,
    split_endpoint,
    usable_cores,
)
from mjrl.distributed.options import LaunchOptions
from mjrl.errors import UsageError

MONITOR_INTERVAL_S = 0.1
"""How often torch's agent checks its workers."""
MAX_PROCS_PER_CORE = 8
"""Each rank is a process with its own interpreter, torch and kernels (about 0.7 GB on the CPU):
more than this many per core only runs out of memory or file handles, with a traceback."""
NEWER_LAUNCH_FIELDS = {"shutdown_timeout", "duplicate_stdout_filters", "duplicate_stderr_filters", "virtual_local_rank"}
"""LaunchConfig fields that older torch releases (the GPU image's 2.11) may lack."""


def launch_config(opts: LaunchOptions) -> LaunchConfig:
    """The elastic agent's configuration; raises UsageError for inconsistent options."""
    if opts.rdzv_endpoint:
        split_endpoint(opts.rdzv_endpoint)
    if opts.nproc_per_node < 1:
        raise UsageError("--nproc-per-node must be at least 1")
    cores = usable_cores()
    if opts.nproc_per_node > MAX_PROCS_PER_CORE * cores:
        raise UsageError(
            f"--nproc-per-node {opts.nproc_per_node} is more than {MAX_PROCS_PER_CORE} processes for each of the "
            f"{cores} cores this launcher may use; give at most {MAX_PROCS_PER_CORE * cores}"
        )
    if opts.nnodes < 1:
        raise UsageError("--nnodes must be at least 1")
    if opts.nnodes > 1 and not opts.rdzv_endpoint:
        raise UsageError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (the same on every node)")
    if opts.nnodes > 1 and not opts.rdzv_id:
        raise UsageError("--nnodes > 1 needs --rdzv-id JOB (the same on every node)")
    if opts.rdzv_id == TORCHRUN_DEFAULT_JOB_ID:
        raise UsageError(f"--rdzv-id {TORCHRUN_DEFAULT_JOB_ID} is torchrun's id for jobs without one; choose another")
    if opts.max_restarts < 0:
        raise UsageError("--max-restarts must be at least 0")
    static = opts.node_rank >= 0
    if static and not opts.rdzv_endpoint:
        raise UsageError("--node-rank needs --rdzv-endpoint HOST:PORT of node 0")
    settings = dict(
        min_nodes=opts.nnodes,
        max_nodes=opts.nnodes,
        nproc_per_node=opts.nproc_per_node,
        logs_specs=DefaultLogsSpecs(log_dir=None, redirects=Std.NONE, tee=Std.NONE, local_ranks_filter=None),
        run_id=opts.rdzv_id or uuid.uuid4().hex,
        role="trainer",
        # c10d: the agents meet at a TCP store on the endpoint; "localhost:0" lets a single
        # node pick a free port, as `torchrun --standalone` does.
        rdzv_endpoint=opts.rdzv_endpoint or "localhost:0",
        rdzv_backend="static" if static else "c10d",
        rdzv_configs={"rank": opts.node_rank, "timeout": opts.rdzv_timeout_s}
        if static
        else {"timeout": opts.rdzv_timeout_s, "join_timeout": opts.rdzv_timeout_s},
        rdzv_timeout=opts.rdzv_timeout_s,
        max_restarts=opts.max_restarts,
        monitor_interval=MONITOR_INTERVAL_S,
        start_method="spawn",
        log_line_prefix_template=None,
        metrics_cfg={},
        local_addr=None,
        event_log_handler="null",
        numa_options=None,
        signals_to_handle="SIGTERM,SIGINT,SIGHUP,SIGQUIT",
        duplicate_stdout_filters=None,
        duplicate_stderr_filters=None,
        virtual_local_rank=False,
        # Seconds between SIGTERM and SIGKILL when workers are stopped: mjrl's workers finish
        # the iteration they are in, then rank 0 checkpoints (torch's default).
        shutdown_timeout=30,
    )
    # Older torch releases lack some fields (2.11 has no shutdown_timeout): their agents run
    # with the behaviour these settings name as default. Any other name must be known.
    known = {field.name for field in dataclasses.fields(LaunchConfig)}
    return LaunchConfig(**{k: v for k, v in settings.items() if k in known or k not in NEWER_LAUNCH_FIELDS})


class NoRetryOnBadInput(LocalElasticAgent):
    """torch's agent, except that a worker ending with exit code 2 (bad input, or an output it
    cannot write) is not restarted: it would fail the same way at every attempt, up to
    `--max-restarts` times."""

    met = False
    """Whether a rendezvous of this process's agent completed (the nodes met): after that, a
    lost store is a failure of the job, not an endpoint that was never there."""

    def _rendezvous(self, worker_group: WorkerGroup) -> None:
        super()._rendezvous(worker_group)
        NoRetryOnBadInput.met = True

    def _monitor_workers(self, worker_group: WorkerGroup) -> RunResult:
        result = super()._monitor_workers(worker_group)
        if result.state == WorkerState.FAILED and any(f.exitcode == 2 for f in result.failures.values()):
            self._remaining_restarts = 0
        return result


def launch(opts: LaunchOptions, worker: Callable[..., Any], *args: Any) -> dict[int, Any]:
    """Run `worker(*args)` on every local rank; returns {global rank: return value} of the
    ranks on this node. `worker` must be importable at module level (spawn start method)."""
    config = launch_config(opts)
    if not _hosts_the_store(opts):
        wait_for_endpoint(opts.rdzv_endpoint, opts.rdzv_timeout_s)
    # torch's `launch_agent` builds its agent by this module-level name; there is no parameter.
    standard, launcher_api.LocalElasticAgent = launcher_api.LocalElasticAgent, NoRetryOnBadInput
    if opts.rdzv_endpoint and split_endpoint(opts.rdzv_endpoint)[1] != 0:
        # The workers' watchdogs meet at the rendezvous store, which node 0's launcher serves
        # for the whole job, rather than at the c10d workers' store, which lives on whichever
        # node drew rank 0: losing any node but node 0 leaves the survivors a store at which
        # to learn why. (Port 0: torch picks the port, which only node 0's launcher knows.)
        os.environ[WATCH_STORE_VARIABLE] = opts.rdzv_endpoint
    try:
        return elastic_launch(config, worker)(*args)
    finally:
        launcher_api.LocalElasticAgent = standard
        os.environ.pop(WATCH_STORE_VARIABLE, None)


def nodes_met() -> bool:
    """Whether this process's launcher has completed a rendezvous with the other nodes."""
    return NoRetryOnBadInput.met


def _hosts_the_store(opts: LaunchOptions) -> bool:
    """Whether this node's agent may serve the rendezvous store itself (else it waits for the
    endpoint to open): its host is this node. Outside Slurm, several agents on one machine (two
    launchers on a workstation) each try to serve it, as in torch's c10d backend: the first to
    bind the port does, and the others join it."""
    if not opts.rdzv_endpoint:
        return True
    if opts.node_rank >= 0:
        return opts.node_rank == 0
    host, _ = split_endpoint(opts.rdzv_endpoint)
    scheduled = scheduler_node_name()
    if scheduled is not None and not _is_address(host):
        # Under Slurm the endpoint names the job's first node (`scontrol show hostnames`): that
        # node serves, even where several nodes share a host and its addresses.
        return host in (scheduled, socket.gethostname(), socket.getfqdn())
    return is_this_machine(host)


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def is_this_machine(host: str) -> bool:
    """Whether `host` names this machine: its name, or an address that is a loopback one or
    one of this machine's own (a node name that /etc/hosts maps to 127.0.0.1 included)."""
    if host in ("localhost", socket.gethostname(), socket.getfqdn()):
        return True
    addresses = _addresses(host)
    return any(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses) or bool(
        addresses & _addresses(socket.gethostname())
    )


def _addresses(host: str) -> set[str]:
    try:
        return {info[4][0] for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except (OSError, UnicodeError):
        return set()


def wait_for_endpoint(endpoint: str, timeout_s: float) -> None:
    """Wait until HOST:PORT accepts TCP connections. torch's own client retries for a fixed
    minute per attempt, whatever timeout it is given; this bounds the wait by `timeout_s`."""
    host, port = split_endpoint(endpoint)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection((host, port), timeout=1.0).close()
            return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise UsageError(
                    f"no rendezvous at {endpoint} within {timeout_s:g} s ({exc.strerror or exc}); "
                    "check --rdzv-endpoint and that node 0 was started"
                ) from None
            time.sleep(0.2)
