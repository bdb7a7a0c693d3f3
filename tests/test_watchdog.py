"""The watchdog: its load on the rendezvous store does not grow with the number of ranks, and a
rank whose launcher dies says so at once."""

from __future__ import annotations

import contextlib
import datetime
import os
import signal
import subprocess
import sys
import time

import pytest
import torch.distributed as dist
from conftest import free_port

from mjrl.distributed.watchdog import Watchdog, _ends_within
from mjrl.metrics_file import read_metrics


class CountingStore:
    """A real store, with every call counted."""

    def __init__(self, store: dist.Store):
        self.store, self.calls = store, 0

    def __getattr__(self, name: str):
        method = getattr(self.store, name)

        def counted(*args, **kwargs):
            self.calls += 1
            return method(*args, **kwargs)

        return counted


@pytest.mark.parametrize("world_size", [2, 32])
def test_store_calls_per_heartbeat_do_not_grow_with_the_rank_count(world_size):
    port = free_port()
    server = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                           timeout=datetime.timedelta(seconds=10))  # fmt: skip
    peers = dist.PrefixStore("job/watchdog", server)
    for rank in range(1, world_size):  # live peers: their heartbeats change at every tick below
        peers.set(f"tick/{rank}", "0")
    watchdog = Watchdog("127.0.0.1", port, "job", 0, world_size, hang_timeout_s=60, interval_s=0.02)
    counting = watchdog.store = CountingStore(watchdog.store)
    watchdog.start()
    try:
        ticks = 0
        deadline = time.monotonic() + 60
        while ticks < 30 and time.monotonic() < deadline:
            ticks = int(peers.get("tick/0"))
            for rank in range(1, world_size):
                peers.set(f"tick/{rank}", str(ticks))
    finally:
        watchdog.stop()
    calls_per_tick = (counting.calls - 1) / int(peers.get("tick/0"))  # - 1: start() publishes the pid
    assert calls_per_tick <= 3.2, calls_per_tick  # set own, check abort, one multi_get (+1 check, once)


def test_a_launcher_still_dying_is_waited_for_and_a_living_one_is_not_taken_for_dead():
    """A worker hears its launcher's death signal as each of the launcher's threads dies, so it
    may ask while the launcher is still exiting: `_ends_within` waits for the exit itself."""
    process = subprocess.Popen(["sleep", "60"])
    try:
        assert not _ends_within(process.pid, 0.0)
        assert not _ends_within(process.pid, 0.3)  # alive: waited for, not reported dead
        process.kill()  # not yet reaped: a zombie has exited all the same
        assert _ends_within(process.pid, 10.0)
    finally:
        process.kill()
        process.wait()
    assert _ends_within(process.pid, 0.5)  # gone altogether


# A rank as the launcher starts it, with a watchdog whose next tick is ten minutes away.
WORKER = """
import os, sys, time
from mjrl.distributed.watchdog import Watchdog
watchdog = Watchdog("127.0.0.1", int(sys.argv[1]), "job", 1, 2, hang_timeout_s=600, interval_s=600,
                    node="node2", launcher_pid=os.getppid())
watchdog.start()
time.sleep(600)
"""
LAUNCHER = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', *sys.argv[1:]]); time.sleep(600)"


def test_a_rank_whose_launcher_dies_says_so_at_once_not_at_its_next_tick(tmp_path):
    """Under srun --kill-on-bad-exit, a killed launcher's ranks have milliseconds before Slurm
    ends them: waiting for the next tick, they used to die without saying why."""
    port = free_port()
    server = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                           timeout=datetime.timedelta(seconds=60))  # fmt: skip
    peers = dist.PrefixStore("job/watchdog", server)
    with open(tmp_path / "stderr", "w") as stderr:
        launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, WORKER, str(port)], stderr=stderr)
    worker = int(peers.get("pid/1").decode().split("\t")[1])  # waits for the rank to start
    try:
        launcher.kill()
        launcher.wait()
        assert _ends_within(worker, 60), "the rank did not notice its launcher's death before its next tick"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker, signal.SIGKILL)
    reason = f"rank 1 (node node2) failed: its launcher (pid {launcher.pid}) died: killed, or its node went down"
    assert peers.get("abort").decode() == reason  # the other ranks are told
    assert f"mjrl watchdog (rank 1): {reason}" in (tmp_path / "stderr").read_text()


STORE = """
import datetime, sys, time
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=True, wait_for_workers=False)
print("serving", flush=True)
time.sleep(600)
"""
FINISHING_RANK = """
import sys
from mjrl.distributed.watchdog import Watchdog
watchdog = Watchdog("127.0.0.1", int(sys.argv[1]), "job", 0, 2, hang_timeout_s=600, interval_s=0.05)
watchdog.start()
watchdog.arm()
watchdog.disarm()  # the training loop has ended: rank 0 writes its last checkpoint
print("disarmed", flush=True)
watchdog._thread.join(timeout=60)  # the store is lost meanwhile
print("thread ended" if not watchdog._thread.is_alive() else "thread still running", flush=True)
"""


def test_a_store_lost_after_the_loop_does_not_end_rank_0_writing_its_last_checkpoint():
    """Node 0's launcher serves the watchdogs' store and may exit first (torch's exit barrier
    gives up after 300 s) while rank 0, on another node, still writes its last checkpoint."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", STORE, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "serving"
        rank = subprocess.Popen(
            [sys.executable, "-c", FINISHING_RANK, str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert rank.stdout.readline().strip() == "disarmed"
        server.kill()
        out, err = rank.communicate(timeout=120)
    finally:
        server.kill()
        server.wait()
    assert rank.returncode == 0 and out.strip() == "thread ended", (rank.returncode, out, err)
    assert "lost the rendezvous store" not in err


# A rank in its training loop, started as torch's agent starts one: SIGINT when its parent dies.
TRAINING_RANK = """
import ctypes, os, signal, sys
ctypes.CDLL(None).prctl(1, signal.SIGINT)  # PR_SET_PDEATHSIG
from mjrl.distributed.preemption import StopFlag
from mjrl.distributed.watchdog import Watchdog
stop = StopFlag().install()
watchdog = Watchdog("127.0.0.1", int(sys.argv[1]), "job", 1, 2, hang_timeout_s=600, interval_s=600,
                    node="node2", launcher_pid=os.getppid())
stop.on_sigint = watchdog.exit_if_launcher_died
watchdog.start()
while not stop.requested:  # the loop stops at its next check once a stop is asked
    pass
print("stopped as asked", flush=True)
"""


def test_a_dying_launchers_sigint_is_a_failure_not_a_stop_request(tmp_path):
    """torch's agent gives its workers SIGINT when it dies. Taken for a stop request, the rank
    left the job as if asked to stop (or, the signal coming again, was interrupted reporting
    the failure), and the other nodes learnt nothing: 3 of 22 kills on the Slurm cluster."""
    port = free_port()
    server = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                           timeout=datetime.timedelta(seconds=60))  # fmt: skip
    peers = dist.PrefixStore("job/watchdog", server)
    with open(tmp_path / "stdout", "w") as stdout, open(tmp_path / "stderr", "w") as stderr:
        command = [sys.executable, "-c", LAUNCHER, TRAINING_RANK, str(port)]
        launcher = subprocess.Popen(command, stdout=stdout, stderr=stderr)
    worker = int(peers.get("pid/1").decode().split("\t")[1])
    try:
        launcher.kill()
        launcher.wait()
        assert _ends_within(worker, 60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker, signal.SIGKILL)
    reason = f"rank 1 (node node2) failed: its launcher (pid {launcher.pid}) died: killed, or its node went down"
    assert "stopped as asked" not in (tmp_path / "stdout").read_text()
    assert peers.get("abort").decode() == reason
    assert f"mjrl watchdog (rank 1): {reason}" in (tmp_path / "stderr").read_text()


REPLAYED_RUN = ("Mjrl-Cartpole-Balance", "--device", "cpu", "--plugins", "emulated_graphs",
                "--runner.cuda-graphs", "on", "--logger", "none",
                "--env.num-envs", "16", "--runner.num-steps-per-env", "64", "--algorithm.num-mini-batches", "2",
                "--runner.eval-interval", "0", "--nproc-per-node", "1", "--hang-timeout-s", "2",
                "--max-restarts", "0")  # fmt: skip


@pytest.mark.heavy
def test_replayed_iterations_feed_the_watchdog_and_a_stall_among_them_is_still_caught(tmp_path):
    """Under the launcher, with the loop replayed as graphs (emulated: `emulated_graphs.py`)
    and no evaluation, no Python of the rollout runs in a replayed iteration, its heartbeats
    included: the runner beats once per segment. A run whose replayed iterations outlast the
    hang timeout is not killed; a rank that stops among them (8 s, `--fault slow`) is."""
    from pathlib import Path

    from conftest import last_json, run_cli

    env = {"PYTHONPATH": str(Path(__file__).parent)}
    calm = run_cli("train", *REPLAYED_RUN, "--runner.max-iterations", "50", "--log-root", str(tmp_path / "calm"),
                   env=env)  # fmt: skip
    assert calm.returncode == 0, calm.stderr[-3000:]
    metrics = read_metrics(Path(last_json(calm.stdout)["run_dir"]) / "metrics.jsonl")
    replayed_s = sum(m["collection_s"] + m["learning_s"] for m in metrics[2:])  # iteration 1 is captured
    assert replayed_s > 2.0 * 1.5, f"the replayed iterations took only {replayed_s:.1f} s: make them longer"
    stalled = run_cli("train", *REPLAYED_RUN, "--runner.max-iterations", "1000", "--fault", "slow@0:4",
                      "--log-root", str(tmp_path / "stalled"), env=env)  # fmt: skip
    assert stalled.returncode != 0 and "made no progress" in stalled.stderr, stalled.stderr[-3000:]
