#!/bin/bash
# What ../shared/gpu/pack.sh does not bring and the GPU checks need, as Python 3.12 wheels in
# folders ignored by git:
#   .gpu_extra/  pytest and its pure-Python dependencies (under 2 MB): `gpu_checks.sh tests`
#                installs them into /tmp/site when pytest is missing;
#   .gpu_wandb/  wandb 0.31 with every dependency (27 MB): `pack.sh --with-wandb` leaves out
#                its opentelemetry-*, cwevals, xxhash and httpx (H100, 2026-11-27: the WandB test
#                failed on "No module named 'opentelemetry'"); `gpu_checks.sh tests` installs it
#                into /tmp/site when wandb does not import. Carry it with the call that runs
#                the checks (pack.sh without --with-wandb: two folders of 57 and 54 MB).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
mkdir -p "$(git rev-parse --git-dir)/info"
for folder in .gpu_extra .gpu_wandb; do
  grep -qx "/$folder/" .git/info/exclude 2>/dev/null || echo "/$folder/" >> .git/info/exclude
  rm -rf "$folder" && mkdir "$folder"
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  -d .gpu_extra pytest pluggy iniconfig packaging
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .gpu_wandb "wandb==$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("wandb"))')" 2>&1 |
  grep -v -i warning || true
du -sh .gpu_extra .gpu_wandb
