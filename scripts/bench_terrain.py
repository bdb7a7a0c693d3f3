"""Rough terrain: does the quadruped climb? And what does the terrain cost?

    python scripts/bench_terrain.py --throughput [--num-envs 512] [--iterations 8]
    python scripts/bench_terrain.py --log-root /work/runs/rough            # train (hours), then report
    python scripts/bench_terrain.py --log-root /work/runs/rough --resume   # continue a cut-off run, then report
    python scripts/bench_terrain.py --run-dir RUN [--flat-run-dir FLAT]    # report on a run

`--throughput` times the scene build (generating and compiling the terrain grid) and then runs
the flat and the rough task's training loop one after the other at the same number of envs,
printing the median env steps/s of each (iterations after the second) and their ratio; then the
rough task's loop with the flat task's plain PPO (no symmetry augmentation: the terrain's own
cost), and as two ranks of half the envs each. Run it with nothing else on the machine.

Training is `train Mjrl-Velocity-Rough-Quadruped --device cpu --config configs/cpu-rough.yaml
--nproc-per-node 2 --env.num-envs 256` (2 ranks of 256 envs, 49 M env steps); run it in the
background (`nohup ... &`). The report evaluates the
deterministic policy on clean observations, per terrain type, with `--episodes` envs spawned on
the hardest row and forward commands of 0.5-1.0 m/s (no lateral or yaw command) for one 20 s
episode: an episode succeeds when it ends at least half a patch (4 m) from where it started
without an early termination. `--flat-run-dir` puts a flat-trained policy (the flat task's run)
through the same test beside it. It also plays the rough policy on flat ground with forward
commands, draws the learning curves with `terrain/mean_level`, checks the targets, and writes
everything into `docs/benchmarks.md` between its markers.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

from common import (
    QUADRUPED_PROFILE,
    ROOT,
    cpu_run_line,
    cpu_training_rate,
    newest_run,
    play,
    read_metrics,
    replace_section,
    scene_build_s,
    train_command,
)

from mjrl.sim import TERRAIN_TYPES
from mjrl.tasks import load_task
from mjrl.tools.plots import plot_runs

ROUGH, FLAT = "Mjrl-Velocity-Rough-Quadruped", "Mjrl-Velocity-Flat-Quadruped"
STRAIGHT = [
    *QUADRUPED_PROFILE.settings()["forward"],
    *("--env.commands.heading", "False", "--env.commands.standing-fraction", "0"),
]
# Success rate on the hardest row, per type: the definition of "climbs".
SUCCESS_TARGETS = {"rough": 0.8, "slope_up": 0.8, "slope_down": 0.8, "stairs_down": 0.6, "stairs_up": 0.5}
CURVES = [
    "mean_episode_return",
    "terrain/mean_level",
    *[f"terrain/mean_level/{t}" for t in TERRAIN_TYPES],
    "terrain/promoted_off_top",
    "reward/track_lin_vel",
    "termination/bad_orientation",
    "termination/illegal_contact",
    "mean_learning_rate",
    "mean_kl",
    "action_std",
]
MARKERS = ("<!-- bench_terrain:begin -->", "<!-- bench_terrain:end -->")


def throughput(num_envs: int, iterations: int) -> dict:
    envs, half = ["--env.num-envs", str(num_envs)], ["--env.num-envs", str(num_envs // 2)]
    setups = {
        FLAT: [FLAT, *envs],
        ROUGH: [ROUGH, *envs],
        # The rough task trains with symmetry augmentation, which doubles the update's batch; the
        # terrain's own cost shows with the flat task's plain PPO.
        f"{ROUGH} with plain PPO": [ROUGH, *envs, "--algorithm.symmetry.augment", "False"],
        # The same envs as two ranks of half as many: Warp steps the physics on one thread, so a
        # second rank can use a second core during the rollout.
        f"{ROUGH} as 2 ranks": [ROUGH, *half, "--nproc-per-node", "2"],
    }
    result = {"scene_build_s": round(scene_build_s(ROUGH), 2), "num_envs": num_envs}
    with tempfile.TemporaryDirectory() as logs:
        for k, (name, args) in enumerate(setups.items()):
            result[name] = round(cpu_training_rate(args, Path(logs) / str(k), iterations))
    result["ratio"] = round(result[ROUGH] / result[FLAT], 3)
    result["ratio with plain PPO"] = round(result[f"{ROUGH} with plain PPO"] / result[FLAT], 3)
    result["2 ranks / 1 rank"] = round(result[f"{ROUGH} as 2 ranks"] / result[ROUGH], 3)
    return result


def train(log_root: Path, resume: bool) -> Path:
    command = train_command(ROUGH, "--device", "cpu", "--config", str(ROOT / "configs/cpu-rough.yaml"))
    command += ["--nproc-per-node", "2", "--env.num-envs", "256"]  # the README's command: 2 ranks, 512 envs
    command += ["--log-root", str(log_root), *(["--resume", "True"] if resume else [])]
    subprocess.run(command, check=True)
    return newest_run(log_root, ROUGH)


def on_hardest_row(task: str, run_dir: Path, episodes: int, kind: str) -> dict:
    """The policy of `run_dir` (a run of `task`) on the rough task's terrain, every env on the
    hardest row of one type."""
    rows = load_task(ROUGH).env_cfg.terrain.rows
    terrain = ["--env.terrain.kind", "grid", "--env.terrain.spawn-row", str(rows - 1), "--env.terrain.spawn-type", kind]
    return play(task, episodes, ["--run-dir", str(run_dir)], [*STRAIGHT, *terrain])


def report(run_dir: Path, flat_run_dir: Path | None, episodes: int) -> str:
    policies = [("rough-trained", ROUGH, run_dir)] + ([("flat-trained", FLAT, flat_run_dir)] if flat_run_dir else [])
    table = {(name, kind): on_hardest_row(task, source, episodes, kind) for name, task, source in policies
             for kind in TERRAIN_TYPES}  # fmt: skip
    flat = play(ROUGH, episodes, ["--run-dir", str(run_dir)], [*STRAIGHT, "--env.terrain.kind", "flat"])
    lines = read_metrics(run_dir)
    last = lines[-1]
    out = ROOT / "docs/img/terrain_cpu_env_steps.png"
    logged = set().union(*lines)
    plot_runs([run_dir], out, metrics=[m for m in CURVES if m in logged], x="env_steps")

    header = "| terrain (hardest row) | " + " | ".join(
        f"{name}: success, distance, early ends" for name, *_ in policies
    )
    rows = [header + " |", "| --- |" + " --- |" * len(policies)]
    for kind in TERRAIN_TYPES:
        cells = [
            f"{r['mean_success']:.0%}, {r['mean_travel_distance']:.1f} m, {r['early_termination_rate']:.0%}"
            for r in (table[name, kind] for name, *_ in policies)
        ]
        rows.append(f"| {kind} | " + " | ".join(cells) + " |")
    checks = [
        f"- {kind}: success {table['rough-trained', kind]['mean_success']:.0%} ≥ {target:.0%} "
        f"{'**met**' if table['rough-trained', kind]['mean_success'] >= target else '**not met**'}"
        for kind, target in SUCCESS_TARGETS.items()
    ]
    if flat_run_dir:
        margins = ", ".join(
            f"{kind} {table['rough-trained', kind]['mean_success'] - table['flat-trained', kind]['mean_success']:+.0%}"
            for kind in TERRAIN_TYPES
        )
        checks.append(f"- rough-trained minus flat-trained success, in points: {margins}")
    prefix = "mean_foot_contact_fraction/"
    per_foot = {k.removeprefix(prefix): v for k, v in flat.items() if k.startswith(prefix)}
    contacts = ", ".join(f"{foot} {share:.0%}" for foot, share in per_foot.items())
    # The level of one iteration moves with the few hundred episodes that ended in it: compare
    # the means of the first and the last 100 iterations.
    levels = [line["terrain/mean_level"] for line in lines]
    start, end = sum(levels[:100]) / len(levels[:100]), sum(levels[-100:]) / len(levels[-100:])
    rise = end - start
    off_top = sorted(
        {t for line in lines for t in TERRAIN_TYPES if (line.get(f"terrain/promoted_off_top/{t}") or 0) > 0}
    )
    checks += [
        f"- `terrain/mean_level` from {start:.2f} (the first 100 iterations) to {end:.2f} (the last 100) "
        f"(+{rise:.2f} rows; target +3): {'**met**' if rise >= 3 else '**not met**'}",
        f"- promoted off the top row in: {', '.join(off_top) or 'no type'} (target: two types): "
        f"{'**met**' if len(off_top) >= 2 else '**not met**'}",
        f"- flat ground, forward commands: planar error {flat['mean_lin_vel_error']:.3f} m/s (≤ 0.20), "
        f"early terminations {flat['early_termination_rate']:.0%} (none): "
        f"{'**met**' if flat['mean_lin_vel_error'] <= 0.2 and flat['early_termination_rate'] == 0 else '**not met**'}",
        f"- gait on flat ground, share of time each foot is down: {contacts}"
        f"{' (a limp: a foot down under 20 % of the time)' if min(per_foot.values()) < 0.2 else ''}",
    ]
    return "\n".join(
        [
            cpu_run_line(ROUGH, run_dir, last),
            "",
            f"`play --episodes {episodes}` per type, deterministic policy, clean observations, forward commands "
            "0.5-1.0 m/s, 20 s; success: at least 4 m from the start without an early termination:",
            "",
            *rows,
            "",
            *checks,
            "",
            f"![learning curves]({out.relative_to(ROOT / 'docs')})",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--throughput", action="store_true", help="time the scene build and flat vs rough training")
    parser.add_argument("--num-envs", type=int, default=512)
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--run-dir", type=Path, help="report on this run instead of training")
    parser.add_argument("--flat-run-dir", type=Path, help="a run of the flat task, for the same test beside it")
    parser.add_argument("--log-root", type=Path, default=ROOT / "logs")
    parser.add_argument("--resume", action="store_true", help="continue the newest run under --log-root")
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--no-write", action="store_true", help="print the report only")
    args = parser.parse_args()
    if args.throughput:
        print(json.dumps(throughput(args.num_envs, args.iterations)))
        return
    run_dir = args.run_dir or train(args.log_root, args.resume)
    text = report(run_dir, args.flat_run_dir, args.episodes)
    print(text)
    if not args.no_write:
        replace_section(MARKERS, "Rough terrain on the CPU: `scripts/bench_terrain.py`", text)


if __name__ == "__main__":
    main()
