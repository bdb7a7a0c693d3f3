"""Start-up time: from running `train` to its first iteration line (warm Warp kernel cache).

    python scripts/bench_startup.py [--repeats 3] [--task Mjrl-Cartpole-Balance] [--num-envs 256]

Also prints the time of the header line, and the cost of importing torch, warp and
mujoco_warp alone in a fresh interpreter (the floor no start-up can go below).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time

from common import train_command


def time_to_lines(task: str, num_envs: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as log_root:
        command = train_command(task, "--device", "cpu", "--logger", "none", "--log-root", log_root)
        command += ["--env.num-envs", str(num_envs), "--runner.max-iterations", "1"]
        start = time.monotonic()
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={"PYTHONUNBUFFERED": "1"}
        )
        header = first = float("nan")
        for line in proc.stdout:
            if line.startswith("mjrl "):
                header = time.monotonic() - start
            if line.startswith("it "):
                first = time.monotonic() - start
        proc.wait()
        return header, first


def import_floor() -> float:
    start = time.monotonic()
    subprocess.run([sys.executable, "-c", "import torch, warp, mujoco_warp"], check=True, capture_output=True)
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="Mjrl-Cartpole-Balance")
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    time_to_lines(args.task, args.num_envs)  # warm the kernel cache
    runs = [time_to_lines(args.task, args.num_envs) for _ in range(args.repeats)]
    print(
        json.dumps(
            {
                "task": args.task,
                "import_torch_warp_mujoco_warp_s": round(min(import_floor() for _ in range(args.repeats)), 2),
                "to_header_s": [round(h, 2) for h, _ in runs],
                "to_first_iteration_s": [round(f, 2) for _, f in runs],
            }
        )
    )


if __name__ == "__main__":
    main()
