#!/usr/bin/env bash
# Creates .venv (once) and installs mjrl with its test tools into it. Safe to run again: it
# reinstalls only when pyproject.toml changed. Prints one line per step and one line when it is
# ready; pip's own output (and setuptools' warnings about editable installs, which say nothing
# about this project) goes to .venv/setup.log, shown only when a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1
log=.venv/setup.log

step() {  # step MESSAGE COMMAND...: run COMMAND with its output in the log; on failure show it
  local message=$1
  shift
  echo "setup: $message"
  if ! "$@" >>"$log" 2>&1; then
    echo "setup: failed: $message; the last lines of $log:" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
}

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $("$PYTHON" --version 2>&1)"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.mjrl-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  : >"$log"
  step "upgrading pip" .venv/bin/python -m pip install -q --upgrade pip
  # torch first and pinned: on a machine without a GPU this takes the CPU build; elsewhere
  # PyPI's default (CUDA) build. Every later requirement that torch 2.13.0 satisfies installs
  # nothing more.
  step "installing torch 2.13.0 (the largest download; a few minutes on a fresh machine)" \
    .venv/bin/python -m pip install -q "torch==2.13.0"
  step "installing mjrl (editable) with MuJoCo-Warp, ONNX, PyAV and the test tools" \
    .venv/bin/python -m pip install -q -e ".[test]"
  step "checking the imports" .venv/bin/python -c "import mjrl, torch, warp, mujoco_warp, tyro, onnx, av"
  echo "$want" >"$stamp"
fi
echo "setup: ready: .venv/bin/train, .venv/bin/play and .venv/bin/mjrl"
