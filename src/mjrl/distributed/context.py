"""The distributed context: rank, local rank, world size and device of this process.

This module is the one place that reads the launcher's environment variables and owns the
process group (the device of a rank is chosen in `devices.py`, for it). Every piece of code
that does I/O, reduces a statistic or chooses a device asks the `DistContext` it is given.
With one process every reduction is the identity, so single-process code pays nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator

import torch
import torch.distributed as dist

from mjrl.distributed.devices import resolve_device
from mjrl.distributed.packing import split_like
from mjrl.distributed.watchdog import Watchdog
from mjrl.errors import UsageError

LAUNCHER_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
WATCH_STORE_VARIABLE = "MJRL_WATCH_STORE"
"""Set by mjrl's launcher for its workers: HOST:PORT of the store their watchdogs share."""


@dataclasses.dataclass(frozen=True)
class LauncherEnv:
    """What torchrun (or mjrl's own launcher, which uses torch's elastic agent) tells a worker."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    master_addr: str
    master_port: int
    job_id: str | None
    """TORCHELASTIC_RUN_ID: the rendezvous id, the same for every restart of one job."""
    restart_count: int
    error_file: str | None
    """TORCHELASTIC_ERROR_FILE: where torch's agent looks for a failed worker's error."""
    watch_store: str | None = None
    """MJRL_WATCH_STORE: the rendezvous endpoint of mjrl's launcher (HOST:PORT), served by
    node 0 for the whole job; None under torchrun, whose workers' watchdogs use MASTER_ADDR's
    store, on rank 0's node."""


def scheduler_node_name() -> str | None:
    """This node's name as Slurm knows it (SLURMD_NODENAME, which tells apart nodes that share
    a host), or None outside a Slurm job."""
    return os.environ.get("SLURMD_NODENAME") or None


def usable_cores() -> int:
    """The CPUs this process may run on: its affinity (what Slurm's `--cpus-per-task`, `taskset`
    or a container gave it), not the machine's count, which on a shared node is far more."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform (macOS)
        return os.cpu_count() or 1


def node_name() -> str:
    """This node's name: the scheduler's, else the host's."""
    return scheduler_node_name() or socket.gethostname()


def launcher_env() -> LauncherEnv | None:
    """The launcher's variables, or None when this process was not started by a launcher.
    A partial set is an error: something set some variables by hand."""
    present = [name for name in LAUNCHER_VARIABLES if name in os.environ]
    if not present:
        return None
    missing = [name for name in LAUNCHER_VARIABLES if name not in os.environ]
    if missing:
        raise UsageError(f"launcher variables {', '.join(present)} are set but {', '.join(missing)} are not")
    env = os.environ
    return LauncherEnv(
        rank=int(env["RANK"]),
        local_rank=int(env["LOCAL_RANK"]),
        world_size=int(env["WORLD_SIZE"]),
        local_world_size=int(env["LOCAL_WORLD_SIZE"]),
        master_addr=env["MASTER_ADDR"],
        master_port=int(env["MASTER_PORT"]),
        job_id=env.get("TORCHELASTIC_RUN_ID"),
        restart_count=int(env.get("TORCHELASTIC_RESTART_COUNT", "0")),
        error_file=env.get("TORCHELASTIC_ERROR_FILE"),
        watch_store=env.get(WATCH_STORE_VARIABLE) or None,
    )


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """`HOST:PORT` (or `[IPv6]:PORT`) -> (host, port); anything else is bad input, caught here
    before torch's parser turns it into a traceback."""
    host, _, port = endpoint.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--rdzv-endpoint {endpoint!r}: expected HOST:PORT with a port from 0 to 65535")
    return host, int(port)


@dataclasses.dataclass
class CommStats:
    """Wall time spent inside collectives (including waiting for slower ranks), and whether
    collectives are being recorded into a graph now."""

    seconds: float = 0.0
    calls: int = 0
    captured: int = 0
    """Collectives recorded into a graph (untimed: each replay runs them on the device)."""
    capturing: bool = False


TORCHRUN_DEFAULT_JOB_ID = "none"
"""torchrun's rendezvous id when `--rdzv-id` names none (`--standalone` draws one): every such
launch has it."""


@dataclasses.dataclass(frozen=True)
class DistContext:
    """Where this process sits in the job. Created once by the CLI and passed down."""

    device: torch.device
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    job_id: str | None = None
    """The elastic job id (same across restarts), None outside an elastic job."""
    restart_count: int = 0
    comm: CommStats = dataclasses.field(default_factory=CommStats, compare=False)
    watchdog: Watchdog | None = dataclasses.field(default=None, compare=False)
    """Heartbeat and abort flag shared by the ranks (multi-rank jobs only)."""
    store: dist.Store | None = dataclasses.field(default=None, compare=False)
    """The rendezvous store of this job and restart round (multi-rank jobs only)."""
    forced_collectives: bool = False
    """A one-process run that issues its collectives anyway, in a process group of one
    (`--force-collectives`)."""

    @property
    def run_key(self) -> str | None:
        """What rank 0 records this job's run directory under: the job id, except torchrun's
        default id, which unrelated launches share. There the node's elastic agent, this
        process's parent and the same across its restarts, tells one launch from another."""
        if self.job_id == TORCHRUN_DEFAULT_JOB_ID:
            return f"{self.job_id}-{os.getppid()}"
        return self.job_id

    def progress(self) -> None:
        """Tell the watchdog that this rank's main thread is making progress."""
        if self.watchdog is not None:
            self.watchdog.progress()

    @contextlib.contextmanager
    def capturing(self) -> Iterator[None]:
        """Within this block the loop is being captured into a graph (`mjrl.runner.graphs`): a
        collective is recorded with the rest, on the capture's stream, with no host sync and no
        timer around it (neither can be in a graph); each replay runs it where it was recorded,
        ordered after the work before it. Its time, and a wait for a slower peer, is then the
        segment's (`learning_s`), not `collective_s`."""
        self.comm.capturing = True
        try:
            yield
        finally:
            self.comm.capturing = False

    @contextlib.contextmanager
    def _timed(self) -> Iterator[None]:
        if self.watchdog is not None:
            self.watchdog.enter_collective()
        start = time.perf_counter()
        try:
            yield
        finally:
            self.comm.seconds += time.perf_counter() - start
            self.comm.calls += 1
            if self.watchdog is not None:
                self.watchdog.exit_collective()

    @property
    def is_main(self) -> bool:
        """Rank 0 alone writes run directories, checkpoints and logs."""
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        """Several ranks."""
        return self.world_size > 1

    @property
    def issues_collectives(self) -> bool:
        """Whether this rank's reductions are collectives: with several ranks, or one forced to
        (`--force-collectives`); otherwise each is the identity and costs nothing."""
        return self.world_size > 1 or self.forced_collectives

    def _collective(self, tensor: torch.Tensor, launch: Callable[[bool], dist.Work | None]) -> None:
        """Run one collective (`launch(async_op)` starts it) and wait for it to complete inside
        the timed bracket. NCCL returns as soon as the collective is queued and `work.wait()`
        only orders the stream after it: without the stream sync, the wait for a slow peer
        would land in the next `.item()`, outside `collective_s`, and the watchdog would blame
        this rank for making no progress instead of the collective. Inside a capture
        (`capturing`), it is only recorded."""
        if self.comm.capturing:
            launch(False)
            self.comm.captured += 1
            return
        stream = torch.cuda.current_stream(tensor.device) if tensor.is_cuda else None
        if stream is not None:
            stream.synchronize()  # the work already queued (a backward pass) is not collective time
        with self._timed():
            work = launch(True)
            work.wait()
            if stream is not None:
                stream.synchronize()

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum `tensor` over all ranks, in place; returns it."""
        if self.issues_collectives:
            self._collective(tensor, lambda a: dist.all_reduce(tensor, op=dist.ReduceOp.SUM, async_op=a))
        return tensor

    def all_reduce_mean(self, tensor: torch.Tensor) -> torch.Tensor:
        """Average `tensor` over all ranks, in place; returns it."""
        if self.issues_collectives:
            self._collective(tensor, lambda a: dist.all_reduce(tensor, op=dist.ReduceOp.SUM, async_op=a))
            tensor /= self.world_size
        return tensor

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """(world_size, *tensor.shape): every rank's `tensor`."""
        if not self.issues_collectives:
            return tensor.unsqueeze(0)
        out = [torch.empty_like(tensor) for _ in range(self.world_size)]
        self._collective(tensor, lambda a: dist.all_gather(out, tensor, async_op=a))
        return torch.stack(out)

    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
        """Copy rank `src`'s `tensor` to every rank, in place; returns it."""
        if self.issues_collectives:
            self._collective(tensor, lambda a: dist.broadcast(tensor, src=src, async_op=a))
        return tensor

    def warm_up_collectives(self) -> None:
        """One small all-reduce on this rank's device, before a capture: NCCL sets up what a
        communicator needs at its first collective, which a capture must not contain. Every
        rank calls it at the same point (building its run)."""
        if self.issues_collectives:
            self.all_reduce_sum(torch.zeros(1, device=self.device))

    def broadcast_tensors(self, tensors: Iterable[torch.Tensor], src: int = 0) -> None:
        """Broadcast many tensors with one collective per dtype (flattened into one buffer)."""
        if not self.issues_collectives:
            return
        by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
        for t in tensors:
            by_dtype.setdefault(t.dtype, []).append(t)
        for group in by_dtype.values():
            flat = self.broadcast(torch.cat([t.detach().reshape(-1) for t in group]), src=src)
            for t, received in zip(group, split_like(flat, group), strict=True):
                t.data.copy_(received)

    def broadcast_text(self, text: str | None, src: int = 0) -> str:
        """Send a short string from rank `src` to every rank (as a uint8 tensor, not a pickle)."""
        if not self.issues_collectives:
            return text or ""
        data = (text or "").encode()
        size = torch.tensor([len(data)], dtype=torch.long, device=self._comm_device)
        self.broadcast(size, src=src)
        buf = torch.zeros(int(size.item()), dtype=torch.uint8, device=self._comm_device)
        if self.rank == src and data:  # frombuffer refuses an empty buffer
            buf.copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
        self.broadcast(buf, src=src)
        return bytes(buf.cpu().tolist()).decode()

    def rank_nodes(self) -> list[str]:
        """Every rank's node, in rank order (each rank's watchdog posts it when it starts)."""
        return [node_name()] if self.watchdog is None else self.watchdog.rank_nodes()

    def ranks_where(self, flag: bool) -> list[int]:
        """The ranks on which `flag` is true (every rank learns the same list)."""
        if not self.issues_collectives:
            return [0] if flag else []
        flags = self.all_gather(torch.tensor([int(flag)], device=self._comm_device))
        return [rank for rank, value in enumerate(flags.flatten().tolist()) if value]

    @property
    def _comm_device(self) -> torch.device:
        return self.device if dist.is_initialized() and dist.get_backend() == "nccl" else torch.device("cpu")

    def wait_for_all(self, name: str, timeout_s: float) -> None:
        """Meet every rank at a barrier kept in the rendezvous store, which waits up to
        `timeout_s` of its own, not the collective timeout. Ranks meet here after building
        their envs: one compiling Warp kernels on a cold cache must not make the others' first
        collective time out."""
        if not self.is_distributed or self.store is None:
            return
        key = f"meet/{name}"
        if self.store.add(key, 1) == self.world_size:
            self.store.set(f"{key}/all", "1")
        try:
            self.store.wait([f"{key}/all"], datetime.timedelta(seconds=timeout_s))
        except (dist.DistStoreError, RuntimeError) as exc:  # the store's timeout
            arrived = self.store.add(key, 0)
            raise TimeoutError(
                f"only {arrived} of {self.world_size} ranks reached '{name}' within {timeout_s:g} s"
            ) from exc

    def barrier(self) -> None:
        if self.issues_collectives:
            with self._timed():
                # Unlike NCCL's other collectives, its barrier's wait() blocks the host.
                dist.barrier(async_op=True).wait()


def single_process(device: str = "auto", collectives: bool = False) -> DistContext:
    """The context of a plain one-process run. With `collectives` (`--force-collectives`), it
    joins a process group of its own (NCCL on a GPU, gloo on the CPU) and issues every collective
    that several ranks would; leave it with `shutdown_distributed`."""
    device_ = resolve_device(device)
    if not collectives:
        return DistContext(device=device_)
    _join_group(device_, dist.HashStore(), rank=0, world_size=1)
    return DistContext(device=device_, forced_collectives=True)


def _join_group(
    device: torch.device, store: dist.Store, rank: int, world_size: int, timeout: datetime.timedelta | None = None
) -> None:
    """Join the default process group on `device`: NCCL on a CUDA device (made the current
    one, the communicator bound to it), gloo on the CPU."""
    if device.type == "cuda":
        torch.cuda.set_device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(
        backend=backend,
        store=store,
        rank=rank,
        world_size=world_size,
        timeout=timeout,
        device_id=device if backend == "nccl" else None,
    )


def init_distributed(
    device_spec: str, timeout_s: float, hang_timeout_s: float, forced_collectives: bool = False
) -> DistContext:
    """Join the process group described by the launcher's variables (torchrun or mjrl's own
    launcher): NCCL on CUDA devices, gloo on the CPU, an explicit collective timeout, and a
    watchdog started by the caller (`ctx.watchdog.start()`) once the rank is ready to train.
    `forced_collectives`: a world of one rank issues its collectives too (`--force-collectives`)."""
    env = launcher_env()
    if env is None:
        raise UsageError(
            "--distributed True needs a launcher: start it with `torchrun --nproc_per_node=N --no_python "
            "train TASK --distributed True ...`, or let mjrl launch itself with `--nproc-per-node N`"
        )
    device = resolve_device(device_spec, env.local_rank, env.local_world_size)
    timeout = datetime.timedelta(seconds=timeout_s)
    # Keys live under a prefix of their own per restart round: restarted workers that share the
    # elastic agent's store must not read the previous round's addresses (torch issues 135712,
    # 167288).
    prefix = f"mjrl/{env.job_id or 'job'}/{env.restart_count}"
    store = dist.PrefixStore(prefix, _rendezvous_store(env, timeout))
    _join_group(device, store, env.rank, env.world_size, timeout)
    host, port = split_endpoint(env.watch_store) if env.watch_store else (env.master_addr, env.master_port)
    watchdog = Watchdog(
        host,
        port,
        prefix,
        env.rank,
        env.world_size,
        hang_timeout_s,
        env.error_file,
        node=node_name(),
        launcher_pid=os.getppid(),
        store_on_rank0=env.watch_store is None,
    )
    return DistContext(
        device=device,
        rank=env.rank,
        local_rank=env.local_rank,
        world_size=env.world_size,
        local_world_size=env.local_world_size,
        job_id=env.job_id,
        restart_count=env.restart_count,
        watchdog=watchdog,
        store=store,
        forced_collectives=forced_collectives,
    )


def _rendezvous_store(env: LauncherEnv, timeout: datetime.timedelta) -> dist.TCPStore:
    """The TCP store at MASTER_ADDR:MASTER_PORT: hosted by torch's elastic agent when it shares
    its own (TORCHELASTIC_USE_AGENT_STORE=True), else by rank 0."""
    agent_hosts = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    return dist.TCPStore(
        env.master_addr,
        env.master_port,
        env.world_size,
        is_master=env.rank == 0 and not agent_hosts,
        timeout=timeout,
        wait_for_workers=False,
    )


def shutdown_distributed() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
