"""Does a legged robot walk? Train it on its CPU preset, evaluate it, plot it, record it.

    python scripts/bench_locomotion.py --log-root /work/runs/loco            # train (over an hour), then report
    python scripts/bench_locomotion.py --log-root /work/runs/loco --resume   # continue a cut-off run, then report
    python scripts/bench_locomotion.py --run-dir RUN                         # report on a finished run
    python scripts/bench_locomotion.py --task Mjrl-Velocity-Flat-Mule ...    # another robot, its own section
    python scripts/bench_locomotion.py --task Mjrl-Velocity-Flat-Humanoid --ranks 2 ...
    python scripts/bench_locomotion.py --throughput [--iterations 8] [--rounds 2]
    python scripts/bench_locomotion.py --log-root /tmp/loco --no-write --episode-length-s 1 -- --runner.max-iterations 2

Training is `train TASK --device cpu --preset cpu-locomotion` (19.7 M env steps; the humanoid's
`cpu-humanoid`, 60 M) and the flags after `--`: run it in the background (`nohup ... &`). The
report runs `play` on clean observations twice, for the trained policy and for zero actions (the
robot standing in its home pose): forward commands (0.5-1.0 m/s for the quadrupeds, 0.3-0.8 for
the humanoid) without lateral or yaw command (the humanoid's also without pushes), the task's
full command distribution, and the zero command without pushes. It checks the robot's targets
(`PROFILES` in `common.py`), draws the learning curves against env steps and wall time
(`docs/img/locomotion_cpu_*.png`), and writes the figures into `docs/benchmarks.md` between the
markers of its section. `--no-write` prints the report only, its curves drawn into the run
directory: docs/ is left as it is. `--episode-length-s S` plays episodes of S seconds rather than
the task's own (a try-out's: the report names it; its targets are judged all the same).

`--throughput` times the training loop of each robot's CPU preset, one after another in one run
(median env steps/s of iterations 3 onwards, `--rounds` times in turn, the median of those): the
quadruped, the humanoid, and the humanoid without its angular-momentum sensor and term (a copy of
its MJCF without the `<sensor>` block), which prices the sensor; and the humanoid's scene build.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

import yaml
from common import (
    GO1,
    HUMANOID,
    NO_LIMIT,
    ROOT,
    cpu_run_line,
    cpu_training_rate,
    episode_length,
    first_eval_meeting_targets,
    full_set_targets,
    newest_run,
    parse_with_passthrough,
    play_each,
    profile,
    read_metrics,
    replace_section,
    scene_build_s,
    train_command,
)

from mjrl.tasks import load_task
from mjrl.tools.plots import plot_runs

WITHOUT_ANGMOM = "humanoid without angular momentum"
CURVES = [
    "mean_episode_return",
    "eval/mean_lin_vel_error",
    "eval/mean_yaw_rate_error",
    "eval/early_termination_rate",
    "eval/mean_foot_contact_fraction",
    "eval/mean_swing_time",
    "reward/track_lin_vel",
    "mean_learning_rate",
    "mean_kl",
    "action_std",
]


def markers(task: str) -> tuple[str, str]:
    """The section of docs/benchmarks.md this task's report replaces (the Go1's came first)."""
    key = "bench_locomotion" if task == GO1 else f"bench_locomotion:{task}"
    return f"<!-- {key}:begin -->", f"<!-- {key}:end -->"


def preset_config(task: str) -> dict:
    """The task's CPU preset, as its YAML file gives it."""
    return yaml.safe_load((ROOT / "configs" / f"{profile(task).preset}.yaml").read_text())


def train(task: str, log_root: Path, resume: bool, ranks: int, extra: list[str]) -> Path:
    command = train_command(task, "--device", "cpu", "--preset", profile(task).preset)
    if ranks > 1:  # the preset's envs shared out: the same batch, each rank's physics on a core
        per_rank = preset_config(task)["env"]["num_envs"] // ranks
        command += ["--nproc-per-node", str(ranks), "--env.num-envs", str(per_rank)]
    command += ["--log-root", str(log_root), *(["--resume", "True"] if resume else []), *extra]
    subprocess.run(command, check=True)
    return newest_run(log_root, task)


def throughput(iterations: int, rounds: int) -> dict:
    """Training env steps/s of each robot's CPU preset, and of the humanoid without the
    angular-momentum sensor, measured in turn so that a change in load hits all alike."""
    humanoid_xml = load_task(HUMANOID).env_cfg.robot.mjcf_file
    with tempfile.TemporaryDirectory() as logs:
        no_sensor = Path(logs) / "humanoid-without-angular-momentum.xml"
        no_sensor.write_text(re.sub(r"\s*<sensor>.*?</sensor>", "", humanoid_xml.read_text(), flags=re.S))
        setups = {
            GO1: [GO1, "--preset", profile(GO1).preset],
            HUMANOID: [HUMANOID, "--preset", profile(HUMANOID).preset],
            WITHOUT_ANGMOM: [
                *(HUMANOID, "--preset", profile(HUMANOID).preset, "--env.robot.mjcf", str(no_sensor)),
                *("--env.rewards.angular-momentum", "0"),
            ],
        }
        rates: dict[str, list[float]] = {name: [] for name in setups}
        for round_ in range(rounds):
            for name, args in setups.items():
                log_root = Path(logs) / f"{round_}-{name.replace(' ', '-')}"
                rates[name].append(cpu_training_rate(args, log_root, iterations))
    result = {name: round(statistics.median(values)) for name, values in rates.items()}
    result[f"{HUMANOID} scene build (s)"] = round(scene_build_s(HUMANOID), 2)
    result["humanoid / quadruped"] = round(result[HUMANOID] / result[GO1], 3)
    result["angular-momentum sensor cost"] = round(1 - result[HUMANOID] / result[WITHOUT_ANGMOM], 3)
    return result


def report(task: str, run_dir: Path, episodes: int, length: list[str], image_dir: Path) -> str:
    """The report; `length`: the `play` flags of a shorter episode (`--env.episode-length-s S`), or none."""
    targets = profile(task).targets
    # The zero-action baseline runs the robot the preset trains (its locked joints).
    locked = preset_config(task).get("env", {}).get("robot", {}).get("locked_joints", [])
    zero = ["--zero-actions", "True", *(["--env.robot.locked-joints", *locked] if locked else [])]
    plays = {
        (policy, cmds): (task, source, [*flags, *length])
        for policy, source in (("trained", ["--run-dir", str(run_dir)]), ("zero actions", zero))
        for cmds, flags in profile(task).settings().items()
    }
    results = dict(zip(plays, play_each(list(plays.values()), episodes), strict=True))
    lines = read_metrics(run_dir)
    last, reached = lines[-1], first_eval_meeting_targets(lines, targets)
    images = []
    for x in ("env_steps", "wall_s"):
        name = "" if task == GO1 else task.rsplit("-", 1)[-1].lower() + "_"
        out = image_dir / f"locomotion_cpu_{name}{x}.png"
        logged = set().union(*lines)
        plot_runs([run_dir], out, metrics=[m for m in CURVES if m in logged], x=x)
        # docs/benchmarks.md links its images relative to docs/; elsewhere the path is whole.
        images.append(out.relative_to(ROOT / "docs") if out.is_relative_to(ROOT / "docs") else out)

    rows = ["| policy | commands | planar error (m/s) | yaw-rate error (rad/s) | early terminations "
            "| foot contact | mean swing (s) | base displacement per episode (m) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for (policy, cmds), r in results.items():
        rows.append(
            f"| {policy} | {cmds} | {r['mean_lin_vel_error']:.3f} | {r['mean_yaw_rate_error']:.3f} "
            f"| {r['early_termination_rate']:.1%} | {r['mean_foot_contact_fraction']:.2f} "
            f"| {r['mean_swing_time']:.2f} | {r.get('mean_displacement', math.nan):.2f} |"
        )
    checks = [
        f"- {cmds} commands, {figure} {bounds(low, high)}: {results['trained', cmds][figure]:.3f} "
        f"{'**met**' if low <= results['trained', cmds][figure] <= high else '**not met**'}"
        for cmds, figure, low, high in targets
    ]
    full_targets = ", ".join(f"{figure} {bounds(low, high)}" for _, figure, low, high in full_set_targets(targets))
    when = (
        f"The periodic evaluation (16 envs, full command distribution) first met the full-set targets "
        f"({full_targets}) at "
        f"iteration {reached['iteration']}: {reached['env_steps'] / 1e6:.1f} M env steps, "
        f"{reached['wall_s'] / 60:.0f} min of training."
        if reached
        else f"The periodic evaluation never met the full-set targets ({full_targets})."
    )
    return "\n".join(
        [
            cpu_run_line(task, run_dir, last),
            "",
            f"`{' '.join(['play --episodes', str(episodes), *length])}`, deterministic policy, clean observations:",
            "",
            *rows,
            "",
            *checks,
            "",
            when,
            "",
            *[f"![learning curves]({image})" for image in images],
        ]
    )


def bounds(low: float, high: float) -> str:
    if low == -NO_LIMIT:
        return f"≤ {high}"
    return f"≥ {low}" if high == NO_LIMIT else f"in [{low}, {high}]"


def write_section(task: str, text: str) -> None:
    replace_section(markers(task), f"Locomotion on the CPU, `{task}`: `scripts/bench_locomotion.py`", text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default=GO1, help="a velocity task (a robot)")
    parser.add_argument("--run-dir", type=Path, help="report on this run instead of training")
    parser.add_argument("--log-root", type=Path, default=ROOT / "logs")
    parser.add_argument("--resume", action="store_true", help="continue the newest run under --log-root")
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--episode-length-s", type=float, help="play episodes this long, not the task's")
    parser.add_argument("--ranks", type=int, default=1, help="train as this many ranks (2 on a 2-core machine)")
    parser.add_argument("--no-write", action="store_true", help="print the report only, the curves in the run")
    parser.add_argument("--throughput", action="store_true", help="time each robot's training loop instead")
    parser.add_argument("--iterations", type=int, default=8, help="iterations per --throughput measurement")
    parser.add_argument("--rounds", type=int, default=2, help="--throughput measurements per setup")
    args, extra = parse_with_passthrough(parser)  # the flags after `--` go to `train`
    if args.throughput:
        print(json.dumps(throughput(args.iterations, args.rounds), indent=1))
        return
    run_dir = args.run_dir or train(args.task, args.log_root, args.resume, args.ranks, extra)
    length = episode_length(args.episode_length_s)
    text = report(args.task, run_dir, args.episodes, length, run_dir if args.no_write else ROOT / "docs/img")
    print(text)
    if not args.no_write:
        write_section(args.task, text)


if __name__ == "__main__":
    main()
