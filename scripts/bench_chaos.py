"""A chaos soak: a 2-rank CPU training under repeated faults, for a set time.

    python scripts/bench_chaos.py --minutes 20 --log-root /tmp/chaos       # the benchmark
    python scripts/bench_chaos.py --sequence kill stop preempt --gap-s 2 4 --log-root /tmp/chaos  # short
    python scripts/bench_chaos.py --algo sac --minutes 20 --log-root /tmp/chaos-sac  # SAC, its ring saved too
    python scripts/bench_chaos.py --sequence preempt --gap-s 1 2 --no-twin --log-root /tmp/chaos  # no twin run

`train Mjrl-Cartpole-Balance --nproc-per-node 2 --max-restarts 1000` runs on the CPU (gloo) while
this script, at random intervals, SIGKILLs a random rank or SIGSTOPs one for longer than the
hang watchdog allows (the elastic agent then restarts the ranks from the newest checkpoint).
Every `--preempt-every` faults it stops the whole job with SIGTERM, as a preemption does, and
starts it again with `--resume True`. Before each fault it waits until the job trains again.

At the end it stops the job and checks: metrics.jsonl has every iteration exactly once, the last
checkpoint plays, the run directory holds only the files a run writes (no save's temporary left
behind), every checkpoint the save interval asks for is there, and no more checkpoints off that
schedule than faults (the stop a fault causes may save one). It prints per fault the seconds from
the fault to the next iteration and the iterations redone, with the run directory's disk use
against a fault-free 2-rank "twin" run of as many iterations, and their checkpoints (`--no-twin`:
no twin, half a minute less for a short soak). The last line is a JSON summary; the exit code is 1
if a check failed. With `--algo sac` the job trains SAC (tiny: 64 windows per gradient step, a ring
of 16 steps per env), whose checkpoints carry the replay ring beside them (`bulk_<iteration>.pt`,
counted in the disk use).
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
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import (
    TINY_CPU_RUN,
    TINY_SAC_RUN,
    newest_run,
    play_command,
    rank_pid,
    read_metrics,
    train_command,
    wait_for,
)

TASK = "Mjrl-Cartpole-Balance"
HANG_TIMEOUT_S = 10


def iterations(run_dir: Path) -> list[int]:
    """The iterations in metrics.jsonl, in its order (FileNotFoundError before the run wrote it)."""
    return [row["iteration"] for row in read_metrics(run_dir)]


def tiny_run(algo: str) -> tuple[str, ...]:
    return TINY_SAC_RUN if algo == "sac" else TINY_CPU_RUN


class Soak:
    def __init__(self, log_root: Path, save_interval: int, algo: str):
        self.log_root = log_root
        self.command = train_command(TASK, *tiny_run(algo), "--nproc-per-node", "2", "--max-restarts", "1000")
        self.command += ["--hang-timeout-s", str(HANG_TIMEOUT_S), "--runner.max-iterations", "1000000"]
        self.command += ["--runner.save-interval", str(save_interval), "--log-root", str(log_root)]
        self.job: subprocess.Popen | None = None
        self.run_dir: Path | None = None
        self.records: list[dict] = []

    def start(self, resume: bool) -> None:
        with (self.log_root / "soak.log").open("a") as log:  # the child keeps its own handle
            command = [*self.command, *(["--resume", "True"] if resume else [])]
            self.job = subprocess.Popen(command, stdout=log, stderr=log)
        if self.run_dir is None:
            self.run_dir = wait_for(lambda: newest_run(self.log_root, TASK), 300)

    def fault(self, kind: str, rng: random.Random) -> None:
        """Inject one fault and wait until the job trains again; records what it cost."""
        run_dir = self.run_dir
        started = len(starts(run_dir))
        t0 = time.monotonic()
        if kind == "preempt":
            self.job.send_signal(signal.SIGTERM)
            self.job.wait(timeout=120)
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


HEADER = rf"^mjrl {TASK} \|.*?(?:resuming at iteration (\d+))?$"


def starts(run_dir: Path) -> list[re.Match]:
    """Every start of the job's rank 0, by the header it prints (with the iteration it resumed at)."""
    return list(re.finditer(HEADER, (run_dir / "ranks" / "rank_0.log").read_text(), re.M))


def recovery(run_dir: Path, starts_before: int, timeout: float) -> tuple[int, int]:
    """(iterations completed before the job went down, the iteration it went on from), once it
    has trained again: a restart cuts metrics.jsonl back to its checkpoint, prints its header,
    then trains. Rank 0's console lines ("it N/...") count the iterations it completed."""
    begun = wait_for(lambda: starts(run_dir)[starts_before:], timeout)[0]
    restart_at = int(begun.group(1) or 0)
    wait_for(lambda: len(iterations(run_dir)) > restart_at, timeout)
    completed = re.findall(r"^it\s+(\d+)/", begun.string[: begun.start()], re.M)
    return int(completed[-1]) if completed else 0, restart_at


def disk_use(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


RUN_FILES = ("config.yaml", "config.resume-*.yaml", "metrics.jsonl", "ranks/rank_*.log", "checkpoints/model_*.pt",
             "checkpoints/bulk_*.pt")  # fmt: skip
"""What a run of the soak writes into its run directory (it logs to no tracker: no tensorboard/
or wandb/ folder). Anything else is a stray: a save's temporary (`.model_*.tmp`, `.bulk_*.tmp`)
that no restart cleared away, say."""


def strays(run_dir: Path) -> list[str]:
    files = (p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file())
    return sorted(f for f in files if not any(fnmatch.fnmatchcase(f, pattern) for pattern in RUN_FILES))


def scheduled_checkpoints(last: int, save_interval: int) -> set[str]:
    """The checkpoints a run whose last iteration is `last` saves (src/mjrl/runner/runner.py):
    one at each multiple of the save interval below it, and one at it (the soak saves by
    iterations only, not by seconds); named as `mjrl.checkpoint.checkpoint_path` names them
    (imported here, it would bring torch along)."""
    return {f"model_{i:06d}.pt" for i in [*range(save_interval, last, save_interval), last]}


def check(run_dir: Path, log_root: Path, save_interval: int, algo: str, twin: bool) -> dict:
    logged = iterations(run_dir)
    play = subprocess.run(play_command(TASK, "--run-dir", str(run_dir), "--device", "cpu", "--episodes", "2"),
                          capture_output=True, text=True)  # fmt: skip
    checkpoints = run_dir / "checkpoints"
    names = {p.name for p in checkpoints.glob("model_*.pt")}
    scheduled = scheduled_checkpoints(len(logged), save_interval)
    bulk = [p.stat().st_size for p in checkpoints.glob("bulk_*.pt")]
    return {
        "iterations": len(logged),
        "continuous": logged == list(range(len(logged))),
        "duplicates": len(logged) - len(set(logged)),
        "plays": play.returncode == 0,
        "stray_files": strays(run_dir),
        "disk_bytes": disk_use(run_dir),
        "checkpoints": len(names),
        # A checkpoint with what goes beside it (SAC's newest ring: one file, the newest kept)
        "checkpoint_bytes": max((checkpoints / name).stat().st_size for name in names) + max(bulk, default=0),
        "bulk_files": len(bulk),
        # Which they are (a stop a fault causes saves off the interval), and those missing.
        "checkpoint_names": sorted(names),
        "off_schedule_checkpoints": sorted(names - scheduled),
        "missing_checkpoints": sorted(scheduled - names),
        **(twin_run(log_root, save_interval, algo, len(logged)) if twin else {}),
    }


def twin_run(log_root: Path, save_interval: int, algo: str, iterations: int) -> dict:
    """A fault-free run of as many iterations: its disk use and checkpoints."""
    calm_root = log_root / "fault-free"
    calm_command = train_command(TASK, *tiny_run(algo), "--nproc-per-node", "2", "--log-root", str(calm_root))
    calm_command += ["--runner.max-iterations", str(iterations), "--runner.save-interval", str(save_interval)]
    calm = subprocess.run(calm_command, capture_output=True, text=True)
    calm_dir = newest_run(calm_root, TASK)
    names = sorted(p.name for p in (calm_dir / "checkpoints").glob("model_*.pt"))
    return {
        "fault_free_disk_bytes": disk_use(calm_dir) if calm.returncode == 0 else None,
        "fault_free_exit": calm.returncode,
        "fault_free_checkpoints": len(names),
        "fault_free_checkpoint_names": names,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log-root", type=Path, required=True)
    parser.add_argument("--minutes", type=float, default=20.0, help="how long to inject faults")
    parser.add_argument("--faults", type=int, default=0, help="stop after this many faults instead (0: no limit)")
    parser.add_argument("--gap-s", type=float, nargs=2, default=(20.0, 60.0), help="seconds between faults")
    parser.add_argument("--preempt-every", type=int, default=4, help="every Nth fault stops and resumes the job")
    parser.add_argument("--save-interval", type=int, default=50, help="iterations between checkpoints")
    parser.add_argument("--sequence", nargs="+", choices=["kill", "stop", "preempt"], help="these faults, in order")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--algo", choices=["ppo", "sac"], default="ppo", help="what the job trains")
    parser.add_argument("--no-twin", action="store_true", help="run no fault-free twin to compare the disk use with")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    if (args.log_root / TASK).exists():
        raise SystemExit(f"{args.log_root} holds runs already: give an empty --log-root")
    args.log_root.mkdir(parents=True, exist_ok=True)
    soak = Soak(args.log_root, args.save_interval, args.algo)
    soak.start(resume=False)
    wait_for(lambda: len(iterations(soak.run_dir)) > args.save_interval, 600)
    deadline = time.monotonic() + args.minutes * 60
    while time.monotonic() < deadline and (not args.faults or len(soak.records) < args.faults):
        time.sleep(rng.uniform(*args.gap_s))
        number = len(soak.records) + 1
        kind = "preempt" if number % args.preempt_every == 0 else rng.choice(["kill", "stop"])
        if args.sequence:
            if number > len(args.sequence):
                break
            kind = args.sequence[number - 1]
        soak.fault(kind, rng)
    soak.stop()
    summary = check(soak.run_dir, args.log_root, args.save_interval, args.algo, twin=not args.no_twin)
    for kind in ("kill", "stop", "preempt"):
        done = [r for r in soak.records if r["fault"] == kind]
        if done:
            summary[kind] = {
                "faults": len(done),
                "median_recovery_s": statistics.median(r["recovery_s"] for r in done),
                "max_recovery_s": max(r["recovery_s"] for r in done),
                "median_redone": statistics.median(r["redone"] for r in done),
            }
    summary["faults"] = len(soak.records)
    summary["run_dir"], summary["algo"] = str(soak.run_dir), args.algo
    print(json.dumps(summary), flush=True)
    ok = summary["continuous"] and not summary["duplicates"] and summary["plays"] and not summary["stray_files"]
    ok = ok and not summary["missing_checkpoints"] and len(summary["off_schedule_checkpoints"]) <= len(soak.records)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
