"""Start-up time and memory: from running `train` to its first iteration line (warm Warp
kernel cache), and its peak RSS.

    python scripts/bench_startup.py [--repeats 3] [--task Mjrl-Cartpole-Balance] [--num-envs 256]
    python scripts/bench_startup.py --phases    # where the memory goes, phase by phase (mjrl.tools.memory)

The method: docs/benchmarks.md, "How the scripts measure".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from mjrl.tools.commands import train_command
from mjrl.tools.memory import memory_phases


def time_to_lines(task: str, num_envs: int) -> tuple[float, float, float]:
    """Seconds to the header line and to the first iteration line, and the run's peak RSS (MiB)."""
    with tempfile.TemporaryDirectory() as log_root:
        command = train_command(task, "--device", "cpu", "--log-root", log_root)
        command += ["--env.num-envs", str(num_envs), "--runner.max-iterations", "1"]
        start = time.monotonic()
        unbuffered = {"PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=unbuffered)
        header = first = float("nan")
        for line in proc.stdout:
            if line.startswith("mjrl "):
                header = time.monotonic() - start
            if line.startswith("it "):
                first = time.monotonic() - start
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        return header, first, usage.ru_maxrss / 1024


def import_floor() -> float:
    start = time.monotonic()
    subprocess.run([sys.executable, "-c", "import torch, warp, mujoco_warp"], check=True, capture_output=True)
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="Mjrl-Cartpole-Balance")
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--phases", action="store_true", help="the peak RSS phase by phase instead")
    args = parser.parse_args()
    if args.phases:
        for line in memory_phases(args.task, args.num_envs):
            print(json.dumps({"task": args.task, "num_envs": args.num_envs, **line}))
        return
    time_to_lines(args.task, args.num_envs)  # warm the kernel cache
    header, first, peak = zip(*(time_to_lines(args.task, args.num_envs) for _ in range(args.repeats)), strict=True)
    floor = min(import_floor() for _ in range(args.repeats))
    times = {"to_header_s": [round(h, 2) for h in header], "to_first_iteration_s": [round(f, 2) for f in first]}
    print(json.dumps({"task": args.task, "import_torch_warp_mujoco_warp_s": round(floor, 2), **times,
                      "peak_rss_mib": [round(m) for m in peak]}))  # fmt: skip


if __name__ == "__main__":
    main()
