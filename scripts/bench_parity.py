"""Does mjrl's learner learn a task at least as well as rsl_rl's, over seeds?

    python scripts/bench_parity.py Mjrl-Cartpole-Balance --iterations 150 --seeds 42 1 2 3 4 \\
        --log-root /work/runs/parity --label now                       # mjrl as configured
    python scripts/bench_parity.py Mjrl-Cartpole-Balance --iterations 150 --seeds 42 1 2 3 4 \\
        --log-root /work/runs/parity --label scalar-std -- --policy.noise-std-type scalar
    python scripts/bench_parity.py Mjrl-Cartpole-Balance --iterations 150 --seeds 42 1 2 3 4 \\
        --log-root /work/runs/parity --label rsl_rl --reference /work/refvenv/bin/python
    python scripts/bench_parity.py Mjrl-Cartpole-Balance --iterations 150 --seeds 42 1 2 3 4 \\
        --log-root /work/runs/parity --label rsl_rl-plain --reference /work/refvenv/bin/python -- --symmetry off

Each seed trains `train TASK --device cpu --logger none --seed S`, or with `--reference PYTHON`,
`scripts/rsl_rl_reference.py TASK --seed S` under that Python (a venv with rsl-rl-lib and
mjrl); the flags after `--` go to either. A seed already run under the label is read, not run
again. It prints, per seed, the mean return of the last 10 iterations, then the mean and the
worst seed: the figures `docs/benchmarks.md` compares.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def run_seed(args: argparse.Namespace, seed: int) -> Path:
    """The metrics file of one seed, training it first if the label has none yet."""
    out = args.log_root / args.label / f"seed-{seed}"
    metrics = out / "metrics.jsonl"
    if metrics.exists() and len(metrics.read_text().splitlines()) >= args.iterations:
        return metrics
    if args.reference:
        command = [args.reference, str(ROOT / "scripts/rsl_rl_reference.py"), args.task, "--seed", str(seed)]
        command += ["--iterations", str(args.iterations), "--out", str(out), *args.flags]
    else:
        command = [str(BIN / "train"), args.task, "--device", "cpu", "--logger", "none", "--seed", str(seed)]
        command += ["--runner.max-iterations", str(args.iterations), "--log-root", str(out / "logs"), *args.flags]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    if not args.reference:  # the run directory's metrics, copied beside the reference's
        run_dir = max((out / "logs" / args.task).glob("20*"))
        metrics.write_text((run_dir / "metrics.jsonl").read_text())
    return metrics


def final_return(metrics: Path, last: int = 10) -> float:
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
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
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)  # what follows `--` goes to train (or the reference)
    args = parser.parse_args(argv[:split])
    args.flags = argv[split + 1 :]
    returns = {seed: final_return(run_seed(args, seed)) for seed in args.seeds}
    figures = ", ".join(f"{returns[seed]:.0f}" for seed in args.seeds)
    mean, worst = statistics.mean(returns.values()), min(returns.values())
    seeds = ", ".join(map(str, args.seeds))
    print(f"| {args.task} | {args.label} | {seeds} | {figures} | {mean:.0f} | {worst:.0f} |")


if __name__ == "__main__":
    main()
