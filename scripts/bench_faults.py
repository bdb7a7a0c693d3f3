"""Faults in a 2-rank CPU training (gloo): how fast mjrl's launcher sees them, and a chaos soak.

    python scripts/bench_faults.py [--repeats 2] [--scenarios kill raise stop two-node-kill restart]
    python scripts/bench_faults.py --soak --minutes 20 --log-root /tmp/chaos                    # the soak
    python scripts/bench_faults.py --soak --sequence kill stop preempt --gap-s 2 4 --log-root /tmp/chaos  # short
    python scripts/bench_faults.py --soak --algo sac --minutes 20 --log-root /tmp/chaos-sac     # SAC, its ring too
    python scripts/bench_faults.py --soak --sequence preempt --gap-s 1 2 --no-twin --log-root /tmp/chaos

A scenario: seconds from a real fault in rank 1 to the launcher's exit (`restart`: to the resumed
attempt's first iteration). `--soak`: kills, stops and preemptions at random until the time is up,
the recovery of each, then the run checked (exit code 1 if a check failed). The method:
docs/benchmarks.md, "How the scripts measure".
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from common import TINY_CPU_RUN, TINY_SAC_RUN

from mjrl.metrics_file import read_metrics
from mjrl.tools.commands import newest_run, play_command, train_command

T = TypeVar("T")
TASK = "Mjrl-Cartpole-Balance"
SCENARIOS = ("kill", "raise", "stop", "two-node-kill", "restart")
HANG_TIMEOUT_S = 10
RUN_FILES = ("config.yaml", "config.resume-*.yaml", "metrics.jsonl", "ranks/rank_*.log", "checkpoints/model_*.pt",
             "checkpoints/bulk_*.pt")  # fmt: skip
"""What a run of the soak writes into its run directory (it logs to no tracker). Anything else is
a stray: a save's temporary (`.model_*.tmp`, `.bulk_*.tmp`) that no restart cleared away, say."""


def wait_for(condition: Callable[[], T | None], timeout: float = 300.0) -> T:
    """The first true value of `condition()`, polled until `timeout` s. A file not written yet, or
    cut short while being written, counts as not yet."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if value := condition():
                return value
        except (FileNotFoundError, StopIteration, ValueError):
            pass
        time.sleep(0.05)
    raise TimeoutError


def rank_pid(run_dir: Path, rank: int) -> int:
    """The newest process of `rank` (its log gains a line per attempt and per resume)."""
    text = (run_dir / "ranks" / f"rank_{rank}.log").read_text()
    return int(re.findall(rf"^rank {rank} pid (\d+) ", text, re.M)[-1])


def job(log_root: Path, *flags: str, algo: str = "ppo", **popen) -> subprocess.Popen:
    """A tiny Balance training of `algo` under `log_root`, started: 2 ranks unless `flags` say."""
    tiny = TINY_SAC_RUN if algo == "sac" else TINY_CPU_RUN
    ranks = [] if "--nproc-per-node" in flags else ["--nproc-per-node", "2"]
    return subprocess.Popen(train_command(TASK, *tiny, *ranks, "--log-root", str(log_root), *flags), **popen)


def iterations(run_dir: Path) -> list[int]:
    """The iterations in metrics.jsonl, in its order (FileNotFoundError before the run wrote it)."""
    return [row["iteration"] for row in read_metrics(run_dir)]


def scenario(name: str, log_root: Path) -> float:
    """Seconds from the fault `name` to the launcher's exit (`restart`: to the new attempt's)."""
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    flags = {"raise": ["--fault", "raise@1:1"], "stop": ["--hang-timeout-s", "5"],
             "restart": ["--max-restarts", "1", "--runner.save-interval", "1"]}.get(name, [])  # fmt: skip
    if name == "two-node-kill":
        with socket.socket() as port:
            port.bind(("127.0.0.1", 0))
            endpoint = f"localhost:{port.getsockname()[1]}"
        flags = ["--nproc-per-node", "1", "--nnodes", "2", "--rdzv-endpoint", endpoint, "--rdzv-id", "bench"]
        flags += ["--hang-timeout-s", "5"]
    jobs = [
        job(log_root, "--runner.max-iterations", "400", *flags, **quiet) for _ in range(1 + (name == "two-node-kill"))
    ]
    run_dir = wait_for(lambda: newest_run(log_root, TASK))
    wait_for(lambda: len(iterations(run_dir)) >= (1 if name == "raise" else 2))
    t0 = time.monotonic()
    if name != "raise":  # raised inside rank 1 itself; timed from its first iteration
        os.kill(rank_pid(run_dir, 1), signal.SIGSTOP if name == "stop" else signal.SIGKILL)
    if name == "restart":
        done = len(iterations(run_dir))
        wait_for(lambda: len(iterations(run_dir)) > done + 1)  # an iteration of the new attempt
        elapsed = time.monotonic() - t0
        jobs[0].send_signal(signal.SIGTERM)
        jobs[0].wait()
        return elapsed
    for each in jobs:
        each.wait()
    return time.monotonic() - t0


class Soak:
    """The soak's job: started, faulted, resumed; a record per fault."""

    def __init__(self, log_root: Path, save_interval: int, algo: str):
        self.log_root, self.algo, self.records = log_root, algo, []
        self.flags = ["--max-restarts", "1000", "--hang-timeout-s", str(HANG_TIMEOUT_S), "--runner.max-iterations",
                      "1000000", "--runner.save-interval", str(save_interval)]  # fmt: skip
        self.job: subprocess.Popen | None = None
        self.run_dir: Path | None = None

    def start(self, resume: bool) -> None:
        with (self.log_root / "soak.log").open("a") as log:  # the child keeps its own handle
            resumed = ["--resume", "True"] if resume else []
            self.job = job(self.log_root, *self.flags, *resumed, algo=self.algo, stdout=log, stderr=log)
        self.run_dir = self.run_dir or wait_for(lambda: newest_run(self.log_root, TASK), 300)

    def fault(self, kind: str, rng: random.Random) -> None:
        """Inject one fault and wait until the job trains again; records what it cost."""
        run_dir, started, t0 = self.run_dir, len(starts(self.run_dir)), time.monotonic()
        if kind == "preempt":
            self.stop()
            self.start(resume=True)
        else:
            rank = rng.randrange(2)
            pid = rank_pid(run_dir, rank)
            os.kill(pid, signal.SIGKILL if kind == "kill" else signal.SIGSTOP)
            if kind == "stop":  # the watchdog must notice; the agent then replaces the process
                wait_for(lambda: rank_pid(run_dir, rank) != pid, 120)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)  # the agent's SIGTERM may still be pending in it
        completed, restart_at = recovery(run_dir, started, 300)
        record = {"fault": kind, "recovery_s": round(time.monotonic() - t0, 1), "redone": completed - restart_at}
        self.records.append(record)
        print(json.dumps(record), flush=True)

    def stop(self) -> None:
        self.job.send_signal(signal.SIGTERM)
        self.job.wait(timeout=120)


def starts(run_dir: Path) -> list[re.Match]:
    """Every start of the job's rank 0, by the header it prints (with the iteration it resumed at)."""
    header = rf"^mjrl {TASK} \|.*?(?:resuming at iteration (\d+))?$"
    return list(re.finditer(header, (run_dir / "ranks" / "rank_0.log").read_text(), re.M))


def recovery(run_dir: Path, starts_before: int, timeout: float) -> tuple[int, int]:
    """(iterations completed before the job went down, by rank 0's lines "it N/...", the iteration
    it went on from), once it has trained again."""
    begun = wait_for(lambda: starts(run_dir)[starts_before:], timeout)[0]
    restart_at = int(begun.group(1) or 0)
    wait_for(lambda: len(iterations(run_dir)) > restart_at, timeout)
    completed = re.findall(r"^it\s+(\d+)/", begun.string[: begun.start()], re.M)
    return int(completed[-1]) if completed else 0, restart_at


def disk_use(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def strays(run_dir: Path) -> list[str]:
    files = (p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file())
    return sorted(f for f in files if not any(fnmatch.fnmatchcase(f, pattern) for pattern in RUN_FILES))


def scheduled_checkpoints(last: int, save_interval: int) -> set[str]:
    """The checkpoints a run whose last iteration is `last` saves (as `mjrl.checkpoint` names them,
    which would bring torch along): at each multiple of the save interval below it, and at it."""
    return {f"model_{i:06d}.pt" for i in [*range(save_interval, last, save_interval), last]}


def check(run_dir: Path, args: argparse.Namespace) -> dict:
    """The run after the soak: its iterations, whether it plays, strays, disk use, checkpoints."""
    logged = iterations(run_dir)
    play = subprocess.run(play_command(TASK, "--run-dir", str(run_dir), "--device", "cpu", "--episodes", "2"),
                          capture_output=True, text=True)  # fmt: skip
    checkpoints = run_dir / "checkpoints"
    names = {p.name for p in checkpoints.glob("model_*.pt")}
    bulk = [p.stat().st_size for p in checkpoints.glob("bulk_*.pt")]
    scheduled = scheduled_checkpoints(len(logged), args.save_interval)
    return {
        "iterations": len(logged), "continuous": logged == list(range(len(logged))),
        "duplicates": len(logged) - len(set(logged)), "plays": play.returncode == 0,
        "stray_files": strays(run_dir),
        "disk_bytes": disk_use(run_dir), "checkpoints": len(names),
        "checkpoint_bytes": max((checkpoints / name).stat().st_size for name in names) + max(bulk, default=0),
        "bulk_files": len(bulk), "checkpoint_names": sorted(names),
        "off_schedule_checkpoints": sorted(names - scheduled), "missing_checkpoints": sorted(scheduled - names),
        **({} if args.no_twin else twin(args.log_root, args.save_interval, args.algo, len(logged))),
    }  # fmt: skip


def twin(log_root: Path, save_interval: int, algo: str, count: int) -> dict:
    """A fault-free run of as many iterations: its disk use and checkpoints."""
    calm_root = log_root / "fault-free"
    flags = ["--runner.max-iterations", str(count), "--runner.save-interval", str(save_interval)]
    calm = job(calm_root, *flags, algo=algo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).wait()
    calm_dir = newest_run(calm_root, TASK)
    names = sorted(p.name for p in (calm_dir / "checkpoints").glob("model_*.pt"))
    return {"fault_free_disk_bytes": disk_use(calm_dir) if calm == 0 else None, "fault_free_exit": calm,
            "fault_free_checkpoints": len(names), "fault_free_checkpoint_names": names}  # fmt: skip


def soak(args: argparse.Namespace) -> int:
    """Fault the job until `--minutes` pass (or `--sequence` is done), check it."""
    if args.log_root is None or (args.log_root / TASK).exists():
        raise SystemExit("--soak: give an empty --log-root")
    rng = random.Random(0)
    args.log_root.mkdir(parents=True, exist_ok=True)
    job = Soak(args.log_root, args.save_interval, args.algo)
    job.start(resume=False)
    wait_for(lambda: len(iterations(job.run_dir)) > args.save_interval, 600)
    deadline = time.monotonic() + args.minutes * 60
    while time.monotonic() < deadline:
        time.sleep(rng.uniform(*args.gap_s))
        number = len(job.records) + 1
        if args.sequence and number > len(args.sequence):
            break
        kind = "preempt" if number % args.preempt_every == 0 else rng.choice(["kill", "stop"])
        job.fault(args.sequence[number - 1] if args.sequence else kind, rng)
    job.stop()
    summary = check(job.run_dir, args)
    for kind in ("kill", "stop", "preempt"):
        if done := [r for r in job.records if r["fault"] == kind]:
            summary[kind] = {"faults": len(done), "median_recovery_s": statistics.median(r["recovery_s"] for r in done),
                             "max_recovery_s": max(r["recovery_s"] for r in done),
                             "median_redone": statistics.median(r["redone"] for r in done)}  # fmt: skip
    summary |= {"faults": len(job.records), "run_dir": str(job.run_dir), "algo": args.algo}
    print(json.dumps(summary), flush=True)
    ok = summary["continuous"] and not summary["duplicates"] and summary["plays"] and not summary["stray_files"]
    ok = ok and not summary["missing_checkpoints"] and len(summary["off_schedule_checkpoints"]) <= len(job.records)
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--soak", action="store_true", help="the chaos soak instead")
    parser.add_argument("--log-root", type=Path, help="the soak's (empty)")
    parser.add_argument("--minutes", type=float, default=20.0, help="how long to inject faults")
    parser.add_argument("--gap-s", type=float, nargs=2, default=(20.0, 60.0), help="seconds between faults")
    parser.add_argument("--preempt-every", type=int, default=4, help="every Nth fault stops and resumes the job")
    parser.add_argument("--save-interval", type=int, default=50, help="iterations between checkpoints")
    parser.add_argument("--sequence", nargs="+", choices=["kill", "stop", "preempt"], help="these faults, in order")
    parser.add_argument("--algo", choices=["ppo", "sac"], default="ppo", help="what the soak's job trains")
    parser.add_argument("--no-twin", action="store_true", help="run no fault-free twin to compare the disk use with")
    args = parser.parse_args()
    if args.soak:
        return soak(args)
    for name in args.scenarios:
        times = []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as tmp:
                times.append(round(scenario(name, Path(tmp)), 2))
        print(json.dumps({"scenario": name, "seconds": times}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
