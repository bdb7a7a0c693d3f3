"""How fast does a task learn, over seeds, with and without symmetry augmentation, by algorithm?

    python scripts/bench_seeds.py --log-root /work/runs/seeds --seeds 1 2 3                # plain PPO
    python scripts/bench_seeds.py --log-root /work/runs/seeds --seeds 1 2 3 --symmetry     # augmented
    python scripts/bench_seeds.py --log-root /work/runs/seeds --seeds 1 2 3 --report-only  # tables only
    python scripts/bench_seeds.py --log-root /tmp/s --seeds 1 --poll-s 1 -- --env.num-envs 16 --runner.max-iterations 2
    python scripts/bench_seeds.py --task Mjrl-Cartpole-Balance --algo sac --log-root /work/runs/cp --seeds 1 2 3 4 5

Each seed trains until its periodic evaluation first meets the task's targets; the report gives
the env steps each needed, and the gait (a legged robot) or the time and return (a cart-pole) of
each. The method: docs/benchmarks.md, "How the scripts measure".
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import time
from pathlib import Path

import yaml
from common import parse_with_passthrough, play, table

from mjrl.envs.robot import mirror_name
from mjrl.metrics_file import read_metrics
from mjrl.tasks import load_task
from mjrl.tools.commands import newest_run, train_command
from mjrl.tools.targets import GO1, first_eval_meeting_targets, profile


def run_name(seed: int, symmetry: bool, algo: str) -> str:
    return f"seed-{seed}" + ("-symmetry" if symmetry else "") + ("" if algo == "ppo" else f"-{algo}")


def find_run(log_root: Path, task: str, name: str) -> Path | None:
    try:
        return newest_run(log_root, task, name)
    except FileNotFoundError:
        return None


def met(task: str, run_dir: Path | None) -> dict | None:
    """The run's first evaluation that met the task's targets (None before its metrics exist)."""
    try:
        return first_eval_meeting_targets(read_metrics(run_dir), profile(task).targets) if run_dir else None
    except FileNotFoundError:
        return None


def train_until_targets(args: argparse.Namespace, seed: int, extra: list[str]) -> Path:
    """Train (or continue) one seed until its periodic evaluation meets the targets or the preset's
    last iteration; record the seconds from the command's start."""
    task, name = args.task, run_name(seed, args.symmetry, args.algo)
    run_dir = find_run(args.log_root, task, name)
    if run_dir is not None and met(task, run_dir):
        return run_dir
    preset = profile(task).preset
    command = train_command(task, "--device", args.device, *(["--preset", preset] if preset else []))
    command += (["--algo", args.algo] if args.algo != "ppo" else []) + ["--seed", str(seed)]
    command += ["--log-root", str(args.log_root), *(["--algorithm.symmetry.augment", "True"] * args.symmetry)]
    command += [*extra, *(["--resume-dir", str(run_dir)] if run_dir else ["--run-name", name])]
    start, process = time.perf_counter(), subprocess.Popen(command)
    record = None
    while record is None and process.poll() is None:
        time.sleep(args.poll_s)
        run_dir = run_dir or find_run(args.log_root, task, name)
        if met(task, run_dir):
            record = {"seed": seed, "targets_met": True, "elapsed_s": round(time.perf_counter() - start, 1)}
            process.send_signal(signal.SIGTERM)  # writes a checkpoint and exits
            process.wait()
    record = record or {"seed": seed, "finished": True, "elapsed_s": round(time.perf_counter() - start, 1)}
    print(json.dumps(record), flush=True)
    with (args.log_root / "stops.jsonl").open("a") as stops:
        stops.write(json.dumps({"run": name, **record}) + "\n")
    if process.returncode != 0 and "finished" in record:
        raise SystemExit(f"{name}: train exited with code {process.returncode}; see its output above")
    assert run_dir is not None, f"{name}: train exited with {process.returncode} before making its run directory"
    return run_dir


def gait_row(task: str, run_dir: Path, args: argparse.Namespace) -> list[str]:
    """Forward commands: planar error, early ends, left-minus-right contact and swing per foot pair."""
    forward = play(task, args.episodes, ["--run-dir", str(run_dir)], profile(task).settings()["forward"], args.device)
    robot = load_task(task).env_cfg.robot
    pairs = [(foot, image) for foot in robot.foot_geoms if foot < (image := mirror_name(foot, robot.mirror_names))]
    differences = [" / ".join(f"{forward[f'{figure}/{left}'] - forward[f'{figure}/{right}']:+.3f}" for left, right
                              in pairs) for figure in ("mean_foot_contact_fraction", "mean_swing_time")]  # fmt: skip
    return [f"{forward['mean_lin_vel_error']:.3f}", f"{forward['early_termination_rate']:.1%}", *differences]


def whole_time(log_root: Path, name: str) -> str:
    """Seconds from each command's start to its stop, summed over the run's continuations."""
    path = log_root / "stops.jsonl"
    stops = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    mine = [stop["elapsed_s"] for stop in stops if stop["run"] == name]
    return f"{sum(mine):.0f}" if mine else "-"


def augments(run_dir: Path) -> bool:
    """Whether the run trained on mirror images: `--symmetry`, or the task's own default (Balance's PPO)."""
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    return bool(saved.get("algorithm", {}).get("symmetry", {}).get("augment", False))


LEGGED = ["env steps to the targets", "planar error, forward (m/s)", "early ends, forward", "contact, left - right",
          "swing (s), left - right"]  # fmt: skip
BY_RETURN = ["env steps to the target", "whole time (s)", "evaluation return where it stopped"]


def seed_row(args: argparse.Namespace, seed: int, name: str, run_dir: Path) -> tuple[list[str], float | None]:
    """The seed's row (env steps to the targets, then its gait or its time and return), those steps."""
    legged, history, first = "forward" in profile(args.task).settings(), read_metrics(run_dir), met(args.task, run_dir)
    steps = f"{first['env_steps'] / 1e6:.{1 if legged else 2}f} M (iteration {first['iteration']})" if first else ""
    steps = steps or (f"not met in {history[-1]['env_steps'] / 1e6:.1f} M" if legged else "not met")
    if legged:
        return [str(seed), steps, *gait_row(args.task, run_dir, args)], first and first["env_steps"]
    evaluations = [line["eval/mean_return"] for line in history if "eval/mean_return" in line]
    final = f"{evaluations[-1]:.0f}" if evaluations else "-"
    return [str(seed), steps, whole_time(args.log_root, name), final], first and first["env_steps"]


def report(args: argparse.Namespace) -> str:
    """A table per symmetry setting that has runs, a row per seed, and how many met the targets."""
    lines = []
    for symmetry in (False, True):
        names = {seed: run_name(seed, symmetry, args.algo) for seed in args.seeds}
        runs = {seed: run for seed, name in names.items() if (run := find_run(args.log_root, args.task, name))}
        if not runs:
            continue
        augmented = {augments(run_dir) for run_dir in runs.values()}
        kind = "with symmetry augmentation" if augmented == {True} else "plain" if augmented == {False} else "mixed"
        rows, reached = zip(*(seed_row(args, seed, names[seed], run) for seed, run in runs.items()), strict=True)
        reached = [steps for steps in reached if steps]
        median = f"; median {statistics.median(reached) / 1e6:.2f} M env steps" if reached else ""
        header = ["seed", *(LEGGED if "forward" in profile(args.task).settings() else BY_RETURN)]
        lines += [f"**{args.algo.upper()}, {kind}**", "", *table(header, list(rows)), ""]
        lines += [f"{len(reached)} of {len(runs)} seeds met the targets{median}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default=GO1)
    parser.add_argument("--log-root", type=Path, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--symmetry", action="store_true", help="train with symmetry augmentation")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--device", default="cpu", help="where the seeds train and play (cpu, cuda)")
    parser.add_argument("--poll-s", type=float, default=15.0, help="how often to read the runs' metrics")
    parser.add_argument("--algo", default="ppo", help="the learner (`train --algo`)")
    args, extra = parse_with_passthrough(parser)  # the flags after `--` go to `train`
    for seed in [] if args.report_only else args.seeds:
        run_dir = train_until_targets(args, seed, extra)
        print(json.dumps({"seed": seed, "run_dir": str(run_dir)}), flush=True)
    print(report(args))


if __name__ == "__main__":
    main()
