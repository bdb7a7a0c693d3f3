"""How fast does a task learn, over seeds, with and without symmetry augmentation, by algorithm?

    python scripts/bench_seeds.py --log-root /work/runs/seeds --seeds 1 2 3                # plain PPO
    python scripts/bench_seeds.py --log-root /work/runs/seeds --seeds 1 2 3 --symmetry     # augmented
    python scripts/bench_seeds.py --log-root /work/runs/seeds --seeds 1 2 3 --report-only  # tables only
    python scripts/bench_seeds.py --log-root /tmp/s --seeds 1 --poll-s 1 -- --env.num-envs 16 --runner.max-iterations 2
    python scripts/bench_seeds.py --task Mjrl-Cartpole-Balance --algo sac --log-root /work/runs/cp --seeds 1 2 3 4 5

Each seed trains `train TASK --device DEVICE --preset cpu-locomotion --seed S` (the
README's CPU preset, evaluated every 50 iterations) until the periodic evaluation first meets
the full-distribution flat targets of `bench_locomotion.py`, then stops it with SIGTERM, as a
preemption would (a checkpoint is written). A seed that was cut off is continued with
`--resume-dir`; one that met its targets is not run again. The report gives the env steps each
seed needed and their median, and the gait of each final policy (`play`, forward commands):
per-foot contact fractions and mean swing times, and their left/right differences.

Any task with a profile in `common.py` (the cart-poles: an evaluation return) trains the same
way, with its own defaults where it has no preset, and `--algo` picks the learner (its runs are
named `seed-S[-symmetry]-ALGO`; PPO's keep their old names). Every stop is appended to
`LOG_ROOT/stops.jsonl` with the seconds from the command's start; the report gives each seed's
whole time (all its continuations) beside its env steps, and the evaluation return where it
stopped.
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
from common import (
    GO1,
    first_eval_meeting_targets,
    newest_run,
    parse_with_passthrough,
    play,
    profile,
    read_metrics,
    train_command,
)

from mjrl.envs.robot import mirror_name
from mjrl.tasks import load_task

SYMMETRY = ["--algorithm.symmetry.augment", "True"]


def run_name(seed: int, symmetry: bool, algo: str = "ppo") -> str:
    return f"seed-{seed}" + ("-symmetry" if symmetry else "") + ("" if algo == "ppo" else f"-{algo}")


def find_run(log_root: Path, task: str, name: str) -> Path | None:
    try:
        return newest_run(log_root, task, name)
    except FileNotFoundError:
        return None


def train_until_targets(
    task: str,
    log_root: Path,
    seed: int,
    symmetry: bool,
    poll_s: float,
    extra: list[str],
    device: str,
    time_limit_s: float | None = None,
    train_through: bool = False,
    algo: str = "ppo",
) -> Path:
    """Train (or continue) one seed until its periodic evaluation meets the targets (unless
    `train_through`), the preset's last iteration, or `time_limit_s` (stopped as by a
    preemption, so `--resume-dir` continues it). Prints the seconds from the command's start to
    the stop, or to the end."""
    name = run_name(seed, symmetry, algo)
    run_dir = find_run(log_root, task, name)
    targets = profile(task).targets
    if run_dir is not None and not train_through and first_eval_meeting_targets(read_metrics(run_dir), targets):
        return run_dir
    preset = profile(task).preset
    command = train_command(task, "--device", device, *(["--preset", preset] if preset else []))
    command += ["--algo", algo] if algo != "ppo" else []
    command += ["--seed", str(seed), "--log-root", str(log_root), *(SYMMETRY if symmetry else []), *extra]
    command += ["--resume-dir", str(run_dir)] if run_dir else ["--run-name", name]
    start = time.perf_counter()
    process = subprocess.Popen(command)
    stopped = False
    while process.poll() is None:
        time.sleep(poll_s)
        run_dir = run_dir or find_run(log_root, task, name)
        metrics = run_dir / "metrics.jsonl" if run_dir else None
        met = (
            not train_through
            and metrics
            and metrics.exists()
            and first_eval_meeting_targets(read_metrics(run_dir), targets)
        )
        out_of_time = time_limit_s is not None and time.perf_counter() - start > time_limit_s
        if met or out_of_time:
            elapsed = time.perf_counter() - start
            process.send_signal(signal.SIGTERM)  # writes a checkpoint and exits
            process.wait()
            stopped = True
            record = {"seed": seed, "targets_met": bool(met), "elapsed_s": round(elapsed, 1)}
    if not stopped:
        record = {"seed": seed, "finished": True, "elapsed_s": round(time.perf_counter() - start, 1)}
    print(json.dumps(record), flush=True)
    with (log_root / "stops.jsonl").open("a") as stops:
        stops.write(json.dumps({"run": name, **record}) + "\n")
    if process.returncode != 0 and not stopped:
        raise SystemExit(f"{name}: train exited with code {process.returncode}; see its output above")
    assert run_dir is not None, f"{name}: train exited with {process.returncode} before making its run directory"
    return run_dir


def gait(task: str, run_dir: Path, episodes: int, device: str) -> dict:
    """Forward-command figures of the run's last checkpoint, per foot included."""
    return play(task, episodes, ["--run-dir", str(run_dir)], profile(task).settings()["forward"], device)


def foot_pairs(task: str) -> list[tuple[str, str]]:
    """Left/right foot pairs, by the names the task's robot config mirrors."""
    robot = load_task(task).env_cfg.robot
    images = {foot: mirror_name(foot, robot.mirror_names) for foot in robot.foot_geoms}
    return [(foot, image) for foot, image in images.items() if foot < image]


HEADER = [
    "| seed | env steps to the targets | planar error, forward (m/s) | early ends, forward | contact, left - right "
    "| swing (s), left - right |",
    "| --- | --- | --- | --- | --- | --- |",
]


def seed_row(task: str, seed: int, run_dir: Path, episodes: int, device: str) -> tuple[str, float | None]:
    """The seed's table row and the env steps it took to meet the targets (None if it did not)."""
    history = read_metrics(run_dir)
    reached = first_eval_meeting_targets(history, profile(task).targets)
    figures = gait(task, run_dir, episodes, device)
    contact, swing = [], []
    for left, right in foot_pairs(task):
        contact.append(figures[f"mean_foot_contact_fraction/{left}"] - figures[f"mean_foot_contact_fraction/{right}"])
        swing.append(figures[f"mean_swing_time/{left}"] - figures[f"mean_swing_time/{right}"])
    if reached:
        steps = f"{reached['env_steps'] / 1e6:.1f} M (iteration {reached['iteration']})"
    else:
        steps = f"not met in {history[-1]['env_steps'] / 1e6:.1f} M"
    pairs = " / ".join(f"{c:+.3f}" for c in contact), " / ".join(f"{d:+.3f}" for d in swing)
    early = f"{figures['early_termination_rate']:.1%}"
    row = f"| {seed} | {steps} | {figures['mean_lin_vel_error']:.3f} | {early} | {pairs[0]} | {pairs[1]} |"
    return row, reached["env_steps"] if reached else None


RETURN_HEADER = [
    "| seed | env steps to the target | whole time (s) | evaluation return where it stopped |",
    "| --- | --- | --- | --- |",
]


def whole_time(log_root: Path, name: str) -> float | None:
    """Seconds from each command's start to its stop, summed over the run's continuations."""
    path = log_root / "stops.jsonl"
    if not path.exists():
        return None
    stops = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    mine = [stop["elapsed_s"] for stop in stops if stop["run"] == name]
    return sum(mine) if mine else None


def return_row(task: str, seed: int, run_dir: Path, elapsed: float | None) -> tuple[str, float | None]:
    """A task judged by its evaluation return (the cart-poles): no gait to play."""
    history = read_metrics(run_dir)
    reached = first_eval_meeting_targets(history, profile(task).targets)
    evaluations = [line for line in history if "eval/mean_return" in line]
    steps = f"{reached['env_steps'] / 1e6:.2f} M (iteration {reached['iteration']})" if reached else "not met"
    final = f"{evaluations[-1]['eval/mean_return']:.0f}" if evaluations else "-"
    whole = f"{elapsed:.0f}" if elapsed is not None else "-"
    return f"| {seed} | {steps} | {whole} | {final} |", reached["env_steps"] if reached else None


def augments(run_dir: Path) -> bool:
    """Whether the run trained on mirror images: `--symmetry`, or the task's own default (Balance's PPO)."""
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    return bool(saved.get("algorithm", {}).get("symmetry", {}).get("augment", False))


def report(task: str, log_root: Path, seeds: list[int], episodes: int, device: str, algo: str = "ppo") -> str:
    legged = "forward" in profile(task).settings()
    lines = []
    for symmetry in (False, True):
        names = {seed: run_name(seed, symmetry, algo) for seed in seeds}
        runs = {seed: find_run(log_root, task, name) for seed, name in names.items()}
        runs = {seed: run for seed, run in runs.items() if run is not None}
        if not runs:
            continue
        augmented = {augments(run_dir) for run_dir in runs.values()}
        kind = "with symmetry augmentation" if augmented == {True} else "plain" if augmented == {False} else "mixed"
        title = f"{algo.upper()}, {kind}"
        lines += [f"**{title}**", "", *(HEADER if legged else RETURN_HEADER)]
        reached_steps = []
        for seed, run_dir in runs.items():
            if legged:
                row, steps = seed_row(task, seed, run_dir, episodes, device)
            else:
                row, steps = return_row(task, seed, run_dir, whole_time(log_root, names[seed]))
            lines.append(row)
            reached_steps += [steps] if steps is not None else []
        met = f"{len(reached_steps)} of {len(runs)} seeds met the targets"
        median = f"; median {statistics.median(reached_steps) / 1e6:.2f} M env steps" if reached_steps else ""
        lines += ["", met + median + ".", ""]
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
    parser.add_argument("--time-limit-s", type=float, help="stop each seed's training after this long")
    parser.add_argument(
        "--train-through", action="store_true", help="train on past the first evaluation that meets the targets"
    )
    parser.add_argument("--poll-s", type=float, default=15.0, help="how often to read the runs' metrics")
    parser.add_argument("--algo", default="ppo", help="the learner (`train --algo`)")
    args, train_args = parse_with_passthrough(parser)
    if not args.report_only:
        for seed in args.seeds:
            run_dir = train_until_targets(
                args.task,
                args.log_root,
                seed,
                args.symmetry,
                args.poll_s,
                train_args,
                args.device,
                args.time_limit_s,
                args.train_through,
                args.algo,
            )
            print(json.dumps({"seed": seed, "run_dir": str(run_dir)}), flush=True)
    print(report(args.task, args.log_root, args.seeds, args.episodes, args.device, args.algo))


if __name__ == "__main__":
    main()
