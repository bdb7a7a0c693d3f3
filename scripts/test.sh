#!/usr/bin/env bash
# The whole test suite: sets up .venv if needed, checks style, runs pytest in two workers
# (pytest-xdist; the suite is sized for a 2-core machine: 763 s against 1001 s in one process from
# cold caches, docs/benchmarks.md "The suite's time"). Arguments go to pytest: `-n 0` runs it
# in one process, `-n 8` in eight.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check src tasks configs tests tests_slurm scripts
.venv/bin/python -m pytest -q -n 2 "$@"
