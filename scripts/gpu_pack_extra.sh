#!/bin/bash
# What ../shared/gpu/pack.sh does not bring and the GPU checks need: pytest and its pure-Python
# dependencies, as Python 3.12 wheels in .gpu_extra/ (under 2 MB, ignored by git). Carry it with
# .gpu1; `scripts/gpu_checks.sh tests` installs it into /tmp/site when pytest is missing.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
mkdir -p "$(git rev-parse --git-dir)/info"
grep -qx "/.gpu_extra/" .git/info/exclude 2>/dev/null || echo "/.gpu_extra/" >> .git/info/exclude
rm -rf .gpu_extra && mkdir .gpu_extra
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  -d .gpu_extra pytest pluggy iniconfig packaging
du -sh .gpu_extra
