"""Does mjrl's learner learn a task at least as well as rsl_rl's, over seeds?

    python scripts/bench_parity.py Mjrl-Cartpole-Balance --iterations 150 --seeds 42 1 2 3 4 \\
        --log-root /work/runs/parity --label now                       # mjrl as configured
    python scripts/bench_parity.py ... --label scalar-std -- --policy.noise-std-type scalar
    python scripts/bench_parity.py ... --label rsl_rl --reference /work/refvenv/bin/python
    python scripts/bench_parity.py ... --label rsl_rl-plain --reference /work/refvenv/bin/python -- --symmetry off

A table row: each seed's mean return of its last 10 iterations, their mean and the worst seed.
The method: docs/benchmarks.md, "How the scripts measure".
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
from pathlib import Path

from common import ROOT, parse_with_passthrough

from mjrl.metrics_file import read_metrics
from mjrl.tools.commands import newest_run, train_command


def run_seed(args: argparse.Namespace, seed: int) -> list[dict]:
    """The metrics of one seed, training it first if the label has none yet."""
    out = args.log_root / args.label / f"seed-{seed}"
    if (out / "metrics.jsonl").exists() and len(read_metrics(out)) >= args.iterations:
        return read_metrics(out)
    if args.reference:
        command = [args.reference, str(ROOT / "scripts/rsl_rl_reference.py"), args.task, "--seed", str(seed)]
        command += ["--iterations", str(args.iterations), "--out", str(out), *args.flags]
    else:
        command = train_command(args.task, "--device", "cpu", "--logger", "none", "--seed", str(seed))
        command += ["--runner.max-iterations", str(args.iterations), "--log-root", str(out / "logs"), *args.flags]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    if not args.reference:  # the run directory's metrics, copied beside the reference's
        (out / "metrics.jsonl").write_text((newest_run(out / "logs", args.task) / "metrics.jsonl").read_text())
    return read_metrics(out)


def final_return(rows: list[dict], last: int = 10) -> float:
    returns = [row["mean_episode_return"] for row in rows[-last:] if row.get("mean_episode_return") is not None]
    return sum(returns) / len(returns) if returns else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task")
    parser.add_argument("--iterations", type=int, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 1, 2, 3, 4])
    parser.add_argument("--log-root", type=Path, required=True)
    parser.add_argument("--label", required=True, help="the experiment's name: its runs go under LOG_ROOT/LABEL")
    parser.add_argument("--reference", help="a Python with rsl-rl-lib: run rsl_rl's PPO instead of mjrl's")
    args, args.flags = parse_with_passthrough(parser)  # the flags after `--`: to train, or to the reference
    returns = [final_return(run_seed(args, seed)) for seed in args.seeds]
    figures, seeds = ", ".join(f"{r:.0f}" for r in returns), ", ".join(map(str, args.seeds))
    print(f"| {args.task} | {args.label} | {seeds} | {figures} | {statistics.mean(returns):.0f} | {min(returns):.0f} |")


if __name__ == "__main__":
    main()
