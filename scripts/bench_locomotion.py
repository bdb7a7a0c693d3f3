"""Does a legged robot walk, climb, or learn to walk from a teacher? Train it, play it, check it.

    python scripts/bench_locomotion.py --log-root /work/runs/loco            # train (over an hour), then report
    python scripts/bench_locomotion.py --log-root /work/runs/loco --resume   # continue a cut-off run, then report
    python scripts/bench_locomotion.py --run-dir RUN                         # report on a finished run
    python scripts/bench_locomotion.py --task Mjrl-Velocity-Flat-Mule ...    # another robot, its own section
    python scripts/bench_locomotion.py --task Mjrl-Velocity-Flat-Humanoid --ranks 2 ...
    python scripts/bench_locomotion.py --task Mjrl-Velocity-Rough-Quadruped --ranks 2 ... [--flat-run-dir FLAT]
    python scripts/bench_locomotion.py --teacher TEACHER_RUN --log-root /work/runs/distill [--iterations 400]
    python scripts/bench_locomotion.py --log-root /tmp/loco --no-write --episode-length-s 1 -- --runner.max-iterations 2

The report (its section of docs/benchmarks.md): the policy beside zero actions under each command
setting of the robot's targets, checked; the rough quadruped's success per terrain type on the
hardest row; the student beside its teacher, with its ONNX inputs; the learning curves. The
method: docs/benchmarks.md, "How the scripts measure".
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import statistics
import subprocess
import tempfile
from pathlib import Path

from common import ROOT, on_hardest_row, parse_with_passthrough, play_args, table

from mjrl.cli.common import load_preset
from mjrl.metrics_file import read_metrics
from mjrl.sim import TERRAIN_TYPES
from mjrl.tools.commands import last_json_line, newest_run, run_commands, train_command
from mjrl.tools.export import read_sidecar
from mjrl.tools.plots import plot_runs
from mjrl.tools.targets import (
    GO1,
    ROUGH,
    ROUGH_SUCCESS,
    STUDENT,
    bounds,
    first_eval_meeting_targets,
    full_set_targets,
    profile,
)

CURVES = [
    "mean_episode_return",
    "behavior_loss",
    *[f"eval/{figure}" for figure in ("mean_lin_vel_error", "mean_yaw_rate_error", "early_termination_rate")],
    *["eval/mean_foot_contact_fraction", "eval/mean_swing_time", "terrain/mean_level"],
    *[f"terrain/mean_level/{t}" for t in TERRAIN_TYPES],
    *["terrain/promoted_off_top", "reward/track_lin_vel", "termination/bad_orientation"],
    *["termination/illegal_contact", "mean_learning_rate", "learning_rate", "mean_kl", "action_std"],
]
# Each report's section of docs/benchmarks.md, and its images' names (the Go1's came first).
SECTIONS = {GO1: "bench_locomotion", ROUGH: "bench_terrain", STUDENT: "bench_distillation"}
IMAGES = {GO1: "locomotion_cpu_", ROUGH: "terrain_cpu_", STUDENT: "distillation_cpu_"}
COLUMNS = {"planar error (m/s)": "mean_lin_vel_error", "yaw-rate error (rad/s)": "mean_yaw_rate_error",
           "early terminations": "early_termination_rate", "foot contact": "mean_foot_contact_fraction",
           "mean swing (s)": "mean_swing_time", "base displacement per episode (m)": "mean_displacement",
           "return": "mean_return"}  # fmt: skip


def train(task: str, args: argparse.Namespace, extra: list[str]) -> Path:
    """Train the task on its CPU preset (the student from `args.teacher`), or continue it."""
    flags = ["--device", "cpu", "--preset", profile(task).preset, "--log-root", str(args.log_root)]
    if args.ranks > 1:  # the preset's envs shared out: the same batch, each rank's physics on a core
        per_rank = load_preset(profile(task).preset)["env"]["num_envs"] // args.ranks
        flags += ["--nproc-per-node", str(args.ranks), "--env.num-envs", str(per_rank)]
    if args.teacher:
        flags += ["--algo", "distillation", "--algorithm.teacher", str(args.teacher)]
        flags += ["--runner.max-iterations", str(args.iterations)]
    name = "student" if args.teacher else ""
    flags += ["--resume-dir", str(newest_run(args.log_root, task, name))] if args.resume else []
    subprocess.run(train_command(task, *flags, *(["--run-name", name] if name else []), *extra), check=True)
    return newest_run(args.log_root, task, name)


def policies(task: str, run_dir: Path, teacher: Path | None) -> list[tuple[str, str, list[str]]]:
    """(name, task, `play` source): the trained policy and zero actions, or teacher and student."""
    if teacher:
        return [("teacher", GO1, ["--run-dir", str(teacher)]), ("student", task, ["--run-dir", str(run_dir)])]
    locked = load_preset(profile(task).preset).get("env", {}).get("robot", {}).get("locked_joints", [])
    zero = ["--zero-actions", "True", *(["--env.robot.locked-joints", *locked] if locked else [])]
    return [("trained", task, ["--run-dir", str(run_dir)]), ("zero actions", task, zero)]


def settings_report(task: str, run_dir: Path, args: argparse.Namespace, length: list[str]) -> tuple[list[str], bool]:
    """Each policy under each command setting, the targets checked, the student's inputs."""
    plays = {(name, cmds): play_args(t, args.episodes, src, [*flags, *length])
             for name, t, src in policies(task, run_dir, args.teacher)
             for cmds, flags in profile(task).settings().items()}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        onnx = Path(tmp) / "student.onnx"
        export = [["mjrl", "export", task, "--run-dir", str(run_dir), "--out", str(onnx)]] if args.teacher else []
        outputs = run_commands([*plays.values(), *export])
        inputs, ok = exported_inputs(onnx) if args.teacher else ([], True)
    results = {key: last_json_line(out) for key, out in zip(plays, outputs, strict=False)}
    rows = [
        [*key, *(cell(figure, r.get(figure, math.nan)) for figure in COLUMNS.values())] for key, r in results.items()
    ]
    judged, checks = "student" if args.teacher else "trained", []
    for cmds, figure, low, high in profile(task).targets:
        value = results[judged, cmds][figure]
        checks.append(f"- {cmds} commands, {figure} {bounds(low, high)}: {value:.3f} {verdict(low <= value <= high)}")
        ok &= low <= value <= high
    play_line = (
        f"`{' '.join(['play --episodes', str(args.episodes), *length])}`, deterministic policy, clean observations:"
    )
    teacher = [f"Teacher `{args.teacher}`.", ""] if args.teacher else []
    return [*teacher, play_line, "", *table(["policy", "commands", *COLUMNS], rows), "", *checks,
            *when_met(task, read_metrics(run_dir)), *inputs], ok  # fmt: skip


def when_met(task: str, lines: list[dict]) -> list[str]:
    """When the periodic evaluation first met the targets it sees (the full command set's)."""
    full = full_set_targets(profile(task).targets)
    if not full:
        return []
    targets = ", ".join(f"{figure} {bounds(low, high)}" for _, figure, low, high in full)
    if not (reached := first_eval_meeting_targets(lines, profile(task).targets)):
        return ["", f"The periodic evaluation never met the full-set targets ({targets})."]
    return ["", f"The periodic evaluation (16 envs, full command distribution) first met the full-set targets "
            f"({targets}) at iteration {reached['iteration']}: {reached['env_steps'] / 1e6:.1f} M env steps, "
            f"{reached['wall_s'] / 60:.0f} min of training."]  # fmt: skip


def cell(figure: str, value: float) -> str:
    if figure == "early_termination_rate":
        return f"{value:.1%}"
    return f"{value:.1f}" if figure == "mean_return" else f"{value:.3f}"


def exported_inputs(onnx: Path) -> tuple[list[str], bool]:
    """The observation terms the student's ONNX model reads (its sidecar's, which `mjrl export`
    checks against the model's width), and whether none is the base's linear velocity."""
    terms = read_sidecar(onnx).observation_terms
    none, names = "base_lin_vel" not in [t.name for t in terms], ", ".join(t.name for t in terms)
    reads = f"Its ONNX model reads {sum(t.size for t in terms)} numbers: {names}; {'no' if none else 'STILL a'}"
    return ["", f"{reads} base linear velocity."], none


def terrain_report(run_dir: Path, flat_run_dir: Path | None, episodes: int) -> tuple[list[str], bool]:
    """Success per terrain type on its hardest row, the levels' climb, the walk on flat ground."""
    policies = [("rough-trained", ROUGH, run_dir)] + ([("flat-trained", GO1, flat_run_dir)] if flat_run_dir else [])
    results = {(name, kind): on_hardest_row(task, run, episodes, kind) for name, task, run in policies
               for kind in TERRAIN_TYPES}  # fmt: skip
    success = {key: r["mean_success"] for key, r in results.items()}
    rows = [[kind, *(f"{success[name, kind]:.0%}, {results[name, kind]['mean_travel_distance']:.1f} m, "
                     f"{results[name, kind]['early_termination_rate']:.0%}" for name, *_ in policies)]
            for kind in TERRAIN_TYPES]  # fmt: skip
    header = ["terrain (hardest row)", *(f"{name}: success, distance, early ends" for name, *_ in policies)]
    rough = {kind: success["rough-trained", kind] for kind in TERRAIN_TYPES}
    checks = [f"- {kind}: success {rough[kind]:.0%} ≥ {target:.0%} {verdict(rough[kind] >= target)}"
              for kind, target in ROUGH_SUCCESS.items()]  # fmt: skip
    if flat_run_dir:
        margins = ", ".join(
            f"{k} {success['rough-trained', k] - success['flat-trained', k]:+.0%}" for k in TERRAIN_TYPES
        )
        checks.append(f"- rough-trained minus flat-trained success, in points: {margins}")
    flat, lines = on_hardest_row(ROUGH, run_dir, episodes, None), read_metrics(run_dir)
    per_foot = {k.split("/", 1)[1]: v for k, v in flat.items() if k.startswith("mean_foot_contact_fraction/")}
    levels = [line["terrain/mean_level"] for line in lines]
    start, end = statistics.mean(levels[:100]), statistics.mean(levels[-100:])
    off_top = sorted({t for line in lines for t in TERRAIN_TYPES if (line.get(f"terrain/promoted_off_top/{t}") or 0)})
    walks = flat["mean_lin_vel_error"] <= 0.2 and flat["early_termination_rate"] == 0
    checks += [
        f"- `terrain/mean_level` from {start:.2f} (the first 100 iterations) to {end:.2f} (the last 100) "
        f"(+{end - start:.2f} rows; target +3): {verdict(end - start >= 3)}",
        f"- promoted off the top row in: {', '.join(off_top) or 'no type'} (target: two types): "
        f"{verdict(len(off_top) >= 2)}",
        f"- flat ground, forward commands: planar error {flat['mean_lin_vel_error']:.3f} m/s (≤ 0.20), "
        f"early terminations {flat['early_termination_rate']:.0%} (none): {verdict(walks)}",
        f"- gait on flat ground, share of time each foot is down: "
        f"{', '.join(f'{foot} {share:.0%}' for foot, share in per_foot.items())}"
        f"{' (a limp: a foot down under 20 % of the time)' if min(per_foot.values()) < 0.2 else ''}",
    ]
    play_line = (f"`play --episodes {episodes}` per type, deterministic policy, clean observations, forward commands "
                 "0.5-1.0 m/s, 20 s; success: at least 4 m from the start without an early termination:")  # fmt: skip
    met = all(success["rough-trained", k] >= t for k, t in ROUGH_SUCCESS.items()) and end - start >= 3 and walks
    return [play_line, "", *table(header, rows), "", *checks], met


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def cpu_run_line(task: str, run_dir: Path, last: dict) -> str:
    """A report's first line: the machine, the date, torch, and the run up to its `last` iteration."""
    import torch

    return (
        f"Device: CPU ({platform.processor() or platform.machine()}), {torch.get_num_threads()} threads; "
        f"{datetime.date.today()}; torch {torch.__version__}. `{task}`, run `{run_dir.name}`, "
        f"{last['iteration'] + 1} iterations, {last['env_steps'] / 1e6:.1f} M env steps, "
        f"{last['wall_s'] / 60:.0f} min of training ({last['env_steps'] / last['wall_s']:.0f} env steps/s)."
    )


def replace_section(key: str, heading: str, text: str) -> None:
    """Put `text` between the markers of `key` in docs/benchmarks.md, or append it under a new heading."""
    path = ROOT / "docs/benchmarks.md"
    doc = path.read_text()
    begin, end = f"<!-- {key}:begin -->", f"<!-- {key}:end -->"
    section = f"{begin}\n{text}\n{end}"
    if begin in doc:
        head, rest = doc.split(begin, 1)
        doc = head + section + rest.split(end, 1)[1]
    else:
        doc += f"\n## {heading}\n\n{section}\n"
    path.write_text(doc)


def report(task: str, run_dir: Path, args: argparse.Namespace) -> tuple[str, bool]:
    """The report, and whether every target was met."""
    length = [] if args.episode_length_s is None else ["--env.episode-length-s", f"{args.episode_length_s:g}"]
    if task == ROUGH:
        body, ok = terrain_report(run_dir, args.flat_run_dir, args.episodes)
    else:
        body, ok = settings_report(task, run_dir, args, length)
    lines, images = read_metrics(run_dir), []
    logged = set().union(*lines)
    curves = [m for m in CURVES if m in logged and not (m == "learning_rate" and "mean_learning_rate" in logged)]
    prefix = IMAGES.get(task, f"locomotion_cpu_{task.rsplit('-', 1)[-1].lower()}_")
    folder = run_dir if args.no_write else ROOT / "docs/img"
    for x in ("env_steps", "wall_s"):
        out = plot_runs([run_dir], folder / f"{prefix}{x}.png", curves, x=x)
        images.append(f"![learning curves]({out if args.no_write else out.relative_to(ROOT / 'docs')})")
    return "\n".join([cpu_run_line(task, run_dir, lines[-1]), "", *body, "", *images]), ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default=GO1, help="a velocity task (a robot)")
    parser.add_argument("--run-dir", type=Path, help="report on this run instead of training")
    parser.add_argument("--log-root", type=Path, default=ROOT / "logs")
    parser.add_argument("--resume", action="store_true", help="continue the newest run under --log-root")
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--episode-length-s", type=float, help="play episodes this long, not the task's")
    parser.add_argument("--ranks", type=int, default=1, help="train as this many ranks (2 on a 2-core machine)")
    parser.add_argument("--flat-run-dir", type=Path, help="rough terrain: a flat-trained run beside the rough one")
    parser.add_argument("--teacher", type=Path, help="a flat quadruped's run: train and report on its student")
    parser.add_argument("--no-write", action="store_true", help="print the report only, the curves in the run")
    parser.add_argument("--iterations", type=int, default=400, help="the student's")
    args, extra = parse_with_passthrough(parser)  # the flags after `--` go to `train`
    task = STUDENT if args.teacher else args.task
    run_dir = args.run_dir or train(task, args, extra)
    text, ok = report(task, run_dir, args)
    print(text)
    if not args.no_write:
        key = SECTIONS.get(task, f"bench_locomotion:{task}")
        replace_section(key, f"Locomotion on the CPU, `{task}`: `scripts/bench_locomotion.py`", text)
    print(json.dumps({"targets_met": ok}))


if __name__ == "__main__":
    main()
