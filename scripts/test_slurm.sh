#!/usr/bin/env bash
# The Slurm tests (tests_slurm/): a real two-node cluster on this machine (scripts/slurm_cluster.sh,
# root and Debian's Slurm packages), mjrl's batch scripts submitted to it. Skipped with the
# reason where no cluster can start, except with CI=true, where that fails. About 4 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m pytest -q -p no:cacheprovider tests_slurm "$@"
