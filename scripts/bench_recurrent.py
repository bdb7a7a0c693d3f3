"""What a recurrent policy costs per iteration: the same training with MLPs and with a memory.

    python scripts/bench_recurrent.py                       # the flat quadruped, cpu-locomotion (512 envs)
    python scripts/bench_recurrent.py --iterations 4 -- --env.num-envs 16 --runner.num-steps-per-env 16
    python scripts/bench_recurrent.py --device cuda --preset benchmark -- --env.num-envs 4096 --runner.cuda-graphs on
    python scripts/bench_recurrent.py --students LSTM_RUN MLP_RUN [--teacher runs/rough-e]

Trains the task's PPO twice in one run, back to back: its MLPs, then an LSTM of 256 x 1 ahead of
the actor and the critic with windows of 24 steps (`--rnn-*` change it). A JSON line per policy:
the median seconds of an iteration (collection and learning) over iterations 3 to the last; then
the ratio, memory over MLP (issue 63's bar: at most 1.5 on the quadruped's CPU preset).

`--students`: blind rough students (`Mjrl-Velocity-Rough-Quadruped-Blind-Student` runs) beside
their teacher, walking forward on the hardest row of each terrain type of a terrain none of
them trained on (`--terrain-seed`; they trained on seed 0): a JSON line per type with each
policy's success and early ends over `--episodes`, then a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

from common import on_hardest_row, parse_with_passthrough, table

from mjrl.metrics_file import read_metrics
from mjrl.sim import TERRAIN_TYPES
from mjrl.tools.commands import newest_run, train_command


def iteration_seconds(task: str, flags: list[str], log_root: Path) -> dict:
    """Train `task` with `flags`; the median seconds of its iterations from the fourth on."""
    subprocess.run(train_command(task, *flags, "--log-root", str(log_root)), check=True, capture_output=True)
    lines = read_metrics(newest_run(log_root, task))[3:]
    collection = statistics.median(line["collection_s"] for line in lines)
    learning = statistics.median(line["learning_s"] for line in lines)
    total = statistics.median(line["collection_s"] + line["learning_s"] for line in lines)
    return {"iteration_s": total, "collection_s": collection, "learning_s": learning, "iterations": len(lines)}


def check_runs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, tuple[str, Path]]:
    """The policies `--students` compares, by name: (task, run). Each run is checked to hold a
    readable checkpoint of its task before anything plays (a bad one is `parser.error`'s line)."""
    from mjrl.errors import UsageError
    from mjrl.tasks import load_task
    from mjrl.tools.trained import load_checkpoint_of

    policies = {"teacher": ("Mjrl-Velocity-Rough-Quadruped", args.teacher)}
    policies |= {run.name: ("Mjrl-Velocity-Rough-Quadruped-Blind-Student", run) for run in args.students}
    if len(policies) != len(args.students) + 1:
        parser.error(f"--students {' '.join(map(str, args.students))}: name runs whose folders differ, none 'teacher'")
    for name, (task, run) in policies.items():
        flag = "--teacher" if name == "teacher" else "--students"
        if not run.is_dir():
            parser.error(f"{flag} {run}: no such run directory (give a {task} run)")
        try:
            load_checkpoint_of(load_task(task), None, str(run))
        except UsageError as exc:
            parser.error(f"{flag} {run}: {exc}")
    return policies


def students_on_terrain(policies: dict[str, tuple[str, Path]], episodes: int, seed: int) -> None:
    """Each policy's success per terrain type (students and their teacher), its hardest row, terrain `seed`."""
    rows = []
    for kind in TERRAIN_TYPES:
        figures = {name: on_hardest_row(task, run, episodes, kind, "--env.terrain.seed", str(seed))
                   for name, (task, run) in policies.items()}  # fmt: skip
        line = {
            name: {"success": f["mean_success"], "early_ends": f["early_termination_rate"]}
            for name, f in figures.items()
        }
        print(json.dumps({"terrain": kind, "terrain_seed": seed, "episodes": episodes, **line}), flush=True)
        rows.append([kind, *(f"{line[name]['success']:.0%} ({line[name]['early_ends']:.0%})" for name in policies)])
    print("\n".join(table(["hardest row: success (early ends)", *policies], rows)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="Mjrl-Velocity-Flat-Quadruped")
    parser.add_argument("--preset", default="cpu-locomotion")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--iterations", type=int, default=21, help="iterations of each run (the first 3 not timed)")
    parser.add_argument("--rnn-type", default="lstm", choices=["lstm", "gru"])
    parser.add_argument("--rnn-hidden-size", type=int, default=256)
    parser.add_argument("--rnn-sequence-length", type=int, default=24)
    parser.add_argument("--students", type=Path, nargs="+", help="blind rough students' runs: their terrain report")
    parser.add_argument("--teacher", type=Path, default=Path("runs/rough-e"), help="the students' teacher run")
    parser.add_argument("--episodes", type=int, default=32, help="per terrain type and policy")
    parser.add_argument("--terrain-seed", type=int, default=1)
    args, passthrough = parse_with_passthrough(parser)
    if args.episodes < 1:
        parser.error(f"--episodes must be at least 1 (got {args.episodes})")
    if args.students:
        return students_on_terrain(check_runs(parser, args), args.episodes, args.terrain_seed)
    common = ["--preset", args.preset, "--device", args.device, "--logger", "none", "--runner.eval-interval", "0",
              "--runner.max-iterations", str(args.iterations), "--seed", "1", *passthrough]  # fmt: skip
    memory = ["--policy.rnn-type", args.rnn_type, "--policy.rnn-hidden-size", str(args.rnn_hidden_size),
              "--policy.rnn-sequence-length", str(args.rnn_sequence_length)]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for name, flags in (("mlp", common), ("memory", [*common, *memory])):
            results[name] = iteration_seconds(args.task, flags, Path(tmp) / name)
            print(json.dumps({"policy": name, "flags": " ".join(flags), **results[name]}))
    ratio = results["memory"]["iteration_s"] / results["mlp"]["iteration_s"]
    print(json.dumps({"task": args.task, "memory_over_mlp": round(ratio, 3), "bar": 1.5, "met": ratio <= 1.5}))


if __name__ == "__main__":
    main()
