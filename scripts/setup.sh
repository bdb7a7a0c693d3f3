#!/usr/bin/env bash
# Creates .venv (once) and installs mjrl with its test tools into it. Safe to run again: it
# reinstalls only when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.mjrl-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
  # torch first and pinned: on a machine without a GPU this takes the CPU build; elsewhere
  # PyPI's default (CUDA) build.
  .venv/bin/python -m pip install -q "torch==2.13.0" 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -m pip install -q -e ".[test]" 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -c "import mjrl, torch, warp, mujoco_warp, tyro" >/dev/null
  echo "$want" > "$stamp"
fi
