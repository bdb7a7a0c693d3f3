"""Do two versions of mjrl train bit for bit alike? Seeded CPU runs of every task, compared.

    python scripts/compare_seeded_runs.py HEAD~1                 # a commit against the working tree
    python scripts/compare_seeded_runs.py BASE OTHER --tasks Mjrl-Cartpole-Balance --iterations 5
    python scripts/compare_seeded_runs.py HEAD --tasks Mjrl-Velocity-Flat-Quadruped -- --algorithm.sync rollout
    python scripts/compare_seeded_runs.py worktree --tasks Mjrl-Cartpole-Balance --iterations 1   # run to run

A JSON line per task, `identical` or the first figure that differs; exit status 1 if any differs.
The method: docs/benchmarks.md, "How the scripts measure".
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ROOT, TINY_CPU_RUN, parse_with_passthrough

from mjrl.metrics_file import learned_figures
from mjrl.tools.commands import newest_run

TASKS = (
    "Mjrl-Cartpole-Balance",
    "Mjrl-Cartpole-Swingup",
    "Mjrl-Velocity-Flat-Quadruped",
    "Mjrl-Velocity-Rough-Quadruped",
    "Mjrl-Velocity-Flat-Humanoid",
    "Mjrl-Velocity-Flat-Mule",
    "Mjrl-Velocity-Rough-Mule",
    "Mjrl-Tracking-Flat-Humanoid",
    "Mjrl-Velocity-Flat-Quadruped-Student",
)
STUDENT_SUFFIX = "-Student"
SMALL = [*TINY_CPU_RUN, "--runner.eval-interval", "0", "--seed", "1"]
PACKAGE_FILES = ("pyproject.toml", "setup.py", "README.md", "src", "tasks", "configs")
"""What pip needs to build mjrl: the checkout's copy is built, never the checkout itself (a
build in place writes build/ and src/mjrl.egg-info, which another build running beside it, as
the suite's packaging test may, would share)."""


def install(ref: str, work: Path) -> Path:
    """A folder holding mjrl as of `ref` (installed without dependencies), for PYTHONPATH."""
    site, source = (work / f"{kind}-{ref.replace('/', '_')}" for kind in ("site", "src"))
    if ref == "worktree":
        source.mkdir(parents=True)
        for name in PACKAGE_FILES:
            if (ROOT / name).is_dir():
                shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
            else:
                shutil.copy2(ROOT / name, source / name)
    else:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(source), ref], check=True)
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(site)]
    subprocess.run([*pip, str(source)], check=True)
    if ref != "worktree":
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(source)], check=True)
    return site


def train(site: Path, task: str, log_root: Path, iterations: int, extra: list[str]) -> list[dict]:
    """The metrics of a small seeded run of `task` with the mjrl in `site`."""
    command = [sys.executable, "-c", "import sys; from mjrl.cli.train import main; sys.exit(main())", task]
    command += [*SMALL, "--runner.max-iterations", str(iterations), "--log-root", str(log_root), *extra]
    env = {"PYTHONPATH": str(site), "PATH": str(Path(sys.executable).parent)}
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise SystemExit(f"{task} with {site.name} failed:\n{result.stderr[-3000:]}")
    return learned_figures(newest_run(log_root, task))


def runs(site: Path, task: str, iterations: int, extra: list[str]) -> list[dict]:
    log_root = site.parent / "logs"
    if not task.endswith(STUDENT_SUFFIX):
        return train(site, task, log_root, iterations, extra)
    teacher = task.removesuffix(STUDENT_SUFFIX)
    train(site, teacher, log_root / "teacher", 2, [])
    teacher_run = newest_run(log_root / "teacher", teacher)
    # The former spelling, which every version reads as it meant (the newer ones with a note).
    return train(site, task, log_root, iterations, [*extra, "--distillation.teacher", str(teacher_run)])


def first_difference(a: list[dict], b: list[dict]) -> str | None:
    """The first figure, in iteration order then by name, that differs; None if none does."""
    if len(a) != len(b):
        return f"{len(a)} against {len(b)} iterations"
    for row_a, row_b in zip(a, b, strict=True):
        for key in sorted(set(row_a) | set(row_b)):
            if row_a.get(key) != row_b.get(key):
                return f"iteration {row_a.get('iteration')}: {key} {row_a.get(key)!r} against {row_b.get(key)!r}"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="a git ref, or `worktree`")
    parser.add_argument("other", nargs="?", default="worktree", help="a git ref, or `worktree` (the default)")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--iterations", type=int, default=3)
    args, extra = parse_with_passthrough(parser)
    differ = False
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sites = [install(ref, work / side) for side, ref in (("base", args.base), ("other", args.other))]
        for task in args.tasks:
            base, other = (runs(site, task, args.iterations, extra) for site in sites)
            difference = first_difference(base, other)
            differ |= difference is not None
            print(json.dumps({"task": task, "result": difference or "identical"}), flush=True)
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
