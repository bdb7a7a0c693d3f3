#!/usr/bin/env bash
# The whole test suite: sets up .venv if needed, checks style, runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check src tasks configs tests tests_slurm scripts
.venv/bin/python -m pytest -q "$@"
