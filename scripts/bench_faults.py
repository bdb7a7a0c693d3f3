"""Failure detection and recovery times of mjrl's launcher (CPU, gloo, 2 ranks).

    python scripts/bench_faults.py [--repeats 2] [--scenarios kill raise stop two-node-kill restart]

For each scenario: start a 2-rank job, wait for its first iteration, inject the fault for real
(SIGKILL or SIGSTOP of rank 1's process, or an exception raised in rank 1), and time from the
fault to the launcher's exit. `restart` times a killed worker's job from the kill to the first
iteration line of the resumed attempt. `--scenarios` times only those named (default: all).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from common import TINY_CPU_RUN, newest_run, rank_pid, read_metrics, train_command, wait_for

TASK = "Mjrl-Cartpole-Balance"
SCENARIOS = ("kill", "raise", "stop", "two-node-kill", "restart")


def iterations_done(run_dir: Path) -> int:
    return len(read_metrics(run_dir))


def start(log_root: Path, *extra: str) -> subprocess.Popen:
    command = train_command(TASK, *TINY_CPU_RUN, "--runner.max-iterations", "400", "--log-root", str(log_root), *extra)
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def first_run_dir(log_root: Path) -> Path:
    return wait_for(lambda: newest_run(log_root, TASK))


def scenario(name: str, log_root: Path) -> float:
    if name == "raise":
        # The fault is raised inside rank 1; time from its first iteration line.
        job = start(log_root, "--nproc-per-node", "2", "--fault", "raise@1:1")
        run_dir = first_run_dir(log_root)
        wait_for(lambda: iterations_done(run_dir) >= 1)
        t0 = time.monotonic()
        job.wait()
        return time.monotonic() - t0
    if name == "two-node-kill":
        port = socket.socket()
        port.bind(("127.0.0.1", 0))
        endpoint = f"localhost:{port.getsockname()[1]}"
        port.close()
        args = [
            "--nproc-per-node",
            "1",
            "--nnodes",
            "2",
            "--rdzv-endpoint",
            endpoint,
            "--rdzv-id",
            "bench",
            "--hang-timeout-s",
            "5",
        ]
        jobs = [start(log_root, *args) for _ in range(2)]
    elif name == "stop":
        jobs = [start(log_root, "--nproc-per-node", "2", "--hang-timeout-s", "5")]
    else:
        extra = ["--max-restarts", "1", "--runner.save-interval", "1"] if name == "restart" else []
        jobs = [start(log_root, "--nproc-per-node", "2", *extra)]
    run_dir = first_run_dir(log_root)
    wait_for(lambda: iterations_done(run_dir) >= 2)
    pid = rank_pid(run_dir, 1)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGSTOP if name == "stop" else signal.SIGKILL)
    if name == "restart":
        done = iterations_done(run_dir)
        wait_for(lambda: iterations_done(run_dir) > done + 1)  # an iteration of the new attempt
        elapsed = time.monotonic() - t0
        jobs[0].send_signal(signal.SIGTERM)
        jobs[0].wait()
        return elapsed
    for job in jobs:
        job.wait()
    return time.monotonic() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    args = parser.parse_args()
    for name in args.scenarios:
        times = []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as tmp:
                times.append(round(scenario(name, Path(tmp)), 2))
        print(json.dumps({"scenario": name, "seconds": times}), flush=True)


if __name__ == "__main__":
    main()
