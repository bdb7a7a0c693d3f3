"""Steps/s of 1 rank vs 2 ranks (weak scaling: the same envs per rank), and the share of an
iteration spent in collectives, for both gradient-sync modes.

    python scripts/bench_distributed.py [--task Mjrl-Cartpole-Balance] [--num-envs 128] [--iterations 12]
    python scripts/bench_distributed.py --syncs rollout    # 2 ranks in one sync mode only: half the time

The method: docs/benchmarks.md, "How the scripts measure".
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path
from statistics import median

from mjrl.metrics_file import read_metrics
from mjrl.tools.commands import last_json_line, train_command


def run(args: argparse.Namespace, ranks: int, sync: str, log_root: str) -> dict:
    command = train_command(args.task, "--device", "cpu", "--logger", "none", "--log-root", log_root)
    command += ["--env.num-envs", str(args.num_envs), "--runner.max-iterations", str(args.iterations)]
    command += ["--algorithm.sync", sync, "--runner.save-interval", "1000000", "--run-name", f"{ranks}r-{sync}"]
    command += ["--nproc-per-node", str(ranks)] if ranks > 1 else []
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    metrics = read_metrics(Path(last_json_line(out)["run_dir"]))[2:]
    share = median(m["collective_s"] / (m["collection_s"] + m["learning_s"]) for m in metrics)
    return {
        "ranks": ranks, "sync": sync, "steps_per_second": round(median(m["steps_per_second"] for m in metrics)),
        "collective_share": round(share, 4),
        "collection_s": round(median(m["collection_s"] for m in metrics), 3),
        "learning_s": round(median(m["learning_s"] for m in metrics), 3),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="Mjrl-Cartpole-Balance")
    parser.add_argument("--num-envs", type=int, default=128, help="envs per rank")
    parser.add_argument("--iterations", type=int, default=12)
    parser.add_argument("--syncs", nargs="+", choices=["gradients", "rollout"], default=["gradients", "rollout"],
                        help="the gradient-sync modes of the 2-rank runs")  # fmt: skip
    args = parser.parse_args()
    if args.iterations < 3:  # the figures are of the iterations after the warm-up's two
        parser.error("--iterations: at least 3")
    with tempfile.TemporaryDirectory() as log_root:
        one = run(args, 1, "gradients", log_root)
        print(json.dumps(one), flush=True)
        for sync in args.syncs:
            two = run(args, 2, sync, log_root)
            print(json.dumps({**two, "speedup_vs_1_rank": round(two["steps_per_second"] / one["steps_per_second"], 2)}))


if __name__ == "__main__":
    main()
