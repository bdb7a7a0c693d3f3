"""A watchdog thread in every worker: hangs and failures on any rank stop every rank in seconds.

Each rank's watchdog publishes a heartbeat (a tick counter) in the rendezvous store through a
connection of its own with a short timeout, and reads the others' in one request: three store
calls per tick whatever the number of ranks. A rank that has finished (trained to the end or
stopped on a signal) says so in place of its heartbeat, and is no longer watched: rank 0 may
still be writing its last checkpoint long after the others have exited. It ends its process when:

* a peer's heartbeat stops for `hang_timeout_s` (a stopped, frozen or vanished process; a peer
  on the same host is killed outright, so that its launcher does not wait for it);
* its own main thread made no progress for `hang_timeout_s` outside a collective, or sat in one
  collective that long (a peer stopped taking part);
* the launcher that started it died (noticed at once, not at the next tick): it says so, for
  the scheduler may end every other process of the job within milliseconds;
* any rank raised the abort flag: a worker that fails posts its error there before it exits,
  so ranks on other nodes, blocked in a collective with it, stop within about a second
  instead of waiting for the collective timeout;
* the store itself stopped answering (the node that hosts it is gone).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import select
import signal
import socket
import sys
import threading
import time

import torch.distributed as dist

EXIT_CODE = 75  # a watchdog abort, as opposed to a worker's own error (1) or bad input (2)
DONE = b"done"  # a finished rank's heartbeat


class Watchdog:
    def __init__(
        self,
        host: str,
        port: int,
        prefix: str,
        rank: int,
        world_size: int,
        hang_timeout_s: float,
        error_file: str | None = None,
        interval_s: float = 0.5,
        node: str = "",
        launcher_pid: int | None = None,
        store_on_rank0: bool = True,
    ):
        self.error_file = error_file
        self.launcher_pid = launcher_pid
        """The process that started this rank (its parent at birth): when it dies (killed, its
        node going down), this rank says so at once, before a scheduler ends the others."""
        self.store_on_rank0 = store_on_rank0
        """Whether rank 0's node serves the store (the workers' own), else the one at `host`."""
        self.node = node or socket.gethostname()
        self.nodes: dict[int, str] = {}
        """Each rank's node, read once every rank has started (for the reports)."""
        self.rank = rank
        self.world_size = world_size
        self.hang_timeout_s = hang_timeout_s
        self.interval_s = interval_s
        self.address = f"{host}:{port}"
        store = dist.TCPStore(
            host,
            port,
            is_master=False,
            wait_for_workers=False,
            # One TCPStore serves every rank: give it more time when there are many.
            timeout=datetime.timedelta(seconds=max(3.0, 4 * interval_s, 0.05 * world_size)),
        )
        self.store = dist.PrefixStore(f"{prefix}/watchdog", store)
        self._last_progress = time.monotonic()
        self._collective_since: float | None = None
        self._armed = False
        self._finishing = False
        self._failing = threading.Lock()
        self._stop = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        """stop() writes here: the thread's wait between ticks ends at once."""
        self._launcher_fd = _pidfd(launcher_pid)
        """Readable once the launcher has exited: its death ends the wait between ticks at once,
        for a scheduler that ends the job's other processes (srun's --kill-on-bad-exit) may
        leave this rank only milliseconds to say why."""
        self._thread = threading.Thread(target=self._run, name="mjrl-watchdog", daemon=True)

    # Called from the main thread -------------------------------------------------------

    def start(self) -> None:
        self.store.set(f"pid/{self.rank}", f"{socket.gethostname()}\t{os.getpid()}\t{self.node}")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        self._thread.join(timeout=5 * self.interval_s)

    def finish(self) -> None:
        """Stop, and tell the other ranks that this one is done rather than hung."""
        self.stop()
        with contextlib.suppress(Exception):  # the store may be gone already (its host finished)
            self.store.set(f"tick/{self.rank}", DONE)

    def arm(self) -> None:
        """Start checking this rank's own progress (not during start-up, where compiling the
        simulator's kernels may legitimately take a minute)."""
        self._last_progress = time.monotonic()
        self._armed = True

    def disarm(self) -> None:
        """Stop checking this rank's own progress: what is left involves no other rank. Nor does
        the store matter any more: node 0's launcher, which serves it, may exit before rank 0
        has written its last checkpoint (torch's exit barrier gives up after 300 s)."""
        self._armed = False
        self._finishing = True

    def progress(self) -> None:
        self._last_progress = time.monotonic()

    def enter_collective(self) -> None:
        self._collective_since = time.monotonic()

    def exit_collective(self) -> None:
        # Progress first: the watchdog thread, reading between the two, must never see "not in
        # a collective" together with the progress time from before a long collective.
        self._last_progress = time.monotonic()
        self._collective_since = None

    def launcher_death(self, wait_s: float = 0.0) -> str | None:
        """Why this rank fails when the launcher that started it died (killed, its node gone),
        else None. torch gives its workers SIGINT as parent-death signal, which would otherwise
        read as a KeyboardInterrupt. The signal comes as each of the launcher's threads dies,
        the last one included, so a worker may hear it while the launcher is still exiting:
        `wait_s` waits that long for it to finish dying."""
        if self.launcher_pid is None:
            return None
        if os.getppid() == self.launcher_pid and not _ends_within(self.launcher_pid, wait_s):
            return None
        # Node 0's launcher also served the store: the other nodes lose it with this node.
        host = ", the rendezvous store's host" if self._store_node() == self.node else ""
        return (
            f"rank {self.rank} (node {self.node}{host}) failed: its launcher (pid {self.launcher_pid}) died: "
            "killed, or its node went down"
        )

    def exit_if_launcher_died(self, wait_s: float = 0.5) -> None:
        """End this process as a failure, saying why, if its launcher died (or finishes dying
        within `wait_s`). Called on SIGINT, torch's parent-death signal: a SIGINT taken for a
        stop request let a dying launcher's rank stop cleanly with the others, or, the signal
        coming again, interrupted the failure's report half-way."""
        if (death := self.launcher_death(wait_s)) is not None:
            self._fail(death)

    def abort(self, reason: str, exit_code: int = EXIT_CODE) -> None:
        """Tell every rank to stop, giving `reason` (which names the rank at fault). They exit
        with `exit_code`: 2 when the job's input is bad, so that whichever rank's exit the
        launcher sees first, it knows that a restart would fail the same way."""
        try:
            if not self.store.check(["abort"]):
                self.store.set("abort_code", str(exit_code))  # before the flag that others poll
                self.store.set("abort", reason)
        except Exception:  # the store may be gone too; the launcher still sees this rank die
            pass

    def posted_abort(self) -> str | None:
        """The reason a rank posted with the abort flag, or None while none has."""
        try:
            return self.store.get("abort").decode() if self.store.check(["abort"]) else None
        except Exception:  # the store may be gone: nobody can have told us anything
            return None

    def exit_for_abort(self, reason: str) -> None:
        """End this process as the watchdog thread does when it sees an abort posted."""
        self._exit(reason, self._posted_exit_code())

    def _posted_exit_code(self) -> int:
        try:
            return int(self.store.get("abort_code")) if self.store.check(["abort_code"]) else EXIT_CODE
        except Exception:
            return EXIT_CODE

    # The thread --------------------------------------------------------------------------

    def _run(self) -> None:
        watched = [r for r in range(self.world_size) if r != self.rank]
        started = time.monotonic()
        last_seen = {r: (None, started) for r in watched}
        all_started = False
        tick = 0
        while True:
            launcher_exited = self._wait_a_tick()
            if self._stop.is_set():
                return
            tick += 1
            if (death := self.launcher_death(0.1 if launcher_exited else 0.0)) is not None:
                self._fail(death)  # first: the store may have been the dead launcher's to serve
            try:
                self.store.set(f"tick/{self.rank}", str(tick))
                if self.store.check(["abort"]):
                    self._exit(self.store.get("abort").decode(), self._posted_exit_code())
                keys = [f"tick/{r}" for r in watched]
                # `multi_get` waits for missing keys: read them all once every peer has started.
                if not all_started and self.store.check(keys):
                    all_started = True
                    self._read_nodes()
                values = self.store.multi_get(keys) if all_started and keys else [None] * len(keys)
                now = time.monotonic()
                for r, value in zip(list(watched), values, strict=True):
                    if value == DONE:
                        watched.remove(r)
                    elif value != last_seen[r][0]:
                        last_seen[r] = (value, now)
                    elif now - last_seen[r][1] > self.hang_timeout_s:
                        self._peer_hung(r, now - last_seen[r][1])
            except Exception as exc:
                if self._stop.is_set() or self._finishing:
                    return
                self._exit(self._store_lost(exc))
            self._check_self(time.monotonic())

    def _wait_a_tick(self) -> bool:
        """Wait one interval, less when stop() is called or the launcher exits; whether it has."""
        return self._launcher_fd in _wait_readable([self._wake_r, self._launcher_fd], self.interval_s)

    def rank_nodes(self) -> list[str]:
        """Every rank's node, in rank order, as each rank's watchdog posted it when it started
        (waits for any still missing, up to the store's timeout)."""
        values = self.store.multi_get([f"pid/{r}" for r in range(self.world_size)])
        return [value.decode().split("\t")[2] for value in values]

    def _read_nodes(self) -> None:
        """Each rank's node, once every rank has started (for the reports: after a failure the
        store may be gone). Ranks that published nothing (tests' stand-ins) leave it empty."""
        if self.store.check([f"pid/{r}" for r in range(self.world_size)]):
            self.nodes = dict(enumerate(self.rank_nodes()))

    def _store_lost(self, exc: Exception) -> str:
        lost = f"lost the rendezvous store at {self.address} ({type(exc).__name__})"
        node = self._store_node()
        if node is None:
            return f"{lost}: the node hosting it is gone or unreachable"
        ranks = ", ".join(f"rank {r}" for r, n in sorted(self.nodes.items()) if n == node)
        there = f" ({ranks} ran there)" if ranks else ""
        return f"node {node}, the rendezvous store's host{there}, is gone or unreachable: {lost}"

    def _store_node(self) -> str | None:
        """The node serving the store, when known: rank 0's when the workers serve it, else node
        0's launcher serves it at the rendezvous endpoint, whose host a Slurm job names by the
        node's name (the first of its allocation)."""
        if self.store_on_rank0:
            return self.nodes.get(0)
        host = self.address.rpartition(":")[0]
        return host if host in {self.node, *self.nodes.values()} else None

    def _check_self(self, now: float) -> None:
        if not self._armed:
            return
        since = self._collective_since
        if since is not None and now - since > self.hang_timeout_s:
            self._fail(
                f"a collective on rank {self.rank} has not completed for {now - since:.0f} s "
                "(a peer stopped taking part)"
            )
        if since is None and now - self._last_progress > self.hang_timeout_s:
            self._fail(f"rank {self.rank} made no progress for {now - self._last_progress:.0f} s")

    def _peer_hung(self, rank: int, silent_s: float) -> None:
        node = f" (node {self.nodes[rank]})" if rank in self.nodes else ""
        reason = f"rank {rank}{node} stopped responding (no heartbeat for {silent_s:.0f} s)"
        host, pid, _ = self.store.get(f"pid/{rank}").decode().split("\t")
        if host == socket.gethostname():
            # A stopped process ignores SIGTERM: kill it so that its launcher need not wait.
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)
        self._fail(reason)

    def _fail(self, reason: str) -> None:
        # Once: the main thread (on SIGINT) and this thread (on the pidfd) may both get here.
        self._failing.acquire()
        self._say(reason, EXIT_CODE)  # first: a scheduler may end this process any moment now
        self.abort(reason)
        os._exit(EXIT_CODE)

    def _exit(self, reason: str, code: int = EXIT_CODE) -> None:
        self._say(reason, code)
        os._exit(code)

    def _say(self, reason: str, code: int) -> None:
        # stderr may be a pipe whose reader died with the launcher: the abort and exit still come.
        with contextlib.suppress(Exception):
            if code != 2:  # bad input: the rank that found it has said so, in one line
                print(f"mjrl watchdog (rank {self.rank}): {reason}", file=sys.__stderr__, flush=True)
        if self.error_file:
            # torch's elastic agent reads this file and its launcher reports the message.
            record = {"message": {"message": reason, "extraInfo": {"timestamp": str(int(time.time()))}}}
            with contextlib.suppress(OSError), open(self.error_file, "w") as f:
                json.dump(record, f)


def _pidfd(pid: int | None) -> int | None:
    """A file descriptor that becomes readable when process `pid` exits (None: none to watch)."""
    if pid is None:
        return None
    try:
        return os.pidfd_open(pid)
    # Gone already (the first tick reports it), or no pidfd here (not Linux, a kernel before
    # 5.3, seccomp): the ticks' parent check is left.
    except (OSError, AttributeError):
        return None


def _wait_readable(fds: list[int | None], timeout_s: float) -> list[int]:
    """The fds among `fds` (None skipped) that become readable within `timeout_s`. poll, not
    select: a process with many files open may hold fds above select's limit of 1024."""
    poller = select.poll()
    for fd in fds:
        if fd is not None:
            poller.register(fd, select.POLLIN)
    return [fd for fd, _ in poller.poll(timeout_s * 1000)]


def _ends_within(pid: int, wait_s: float) -> bool:
    """Whether process `pid` (this one's parent) has exited or exits within `wait_s`."""
    if wait_s <= 0:
        return False
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except (OSError, AttributeError):  # no pidfd here: it cannot tell, so it claims nothing
        return False
    try:
        return bool(_wait_readable([fd], wait_s))  # readable once it has exited
    finally:
        os.close(fd)
