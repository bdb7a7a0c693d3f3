#!/bin/bash
# mjlab 1.6.0 for the offline GPU machine, beside mjrl: Python 3.12 wheels of mjlab and of every
# package its `train` imports that the GPU image lacks, in .gpu_mjlab1/, .gpu_mjlab2/ (each under
# PART_MB, ignored by git). `scripts/gpu_checks.sh mjlab` installs them into /tmp/mjlab-site,
# which goes first on mjlab's PYTHONPATH only: mjlab pins mujoco and mujoco-warp 3.11 and
# rsl-rl-lib 5.4.2, mjrl runs 4.0, and the two never share a process. Warp, tyro and glfw come
# from mjrl's own folders (../shared/gpu/pack.sh), which go second on that path.
#
# The list is what `train Mjlab-Velocity-Flat-Unitree-Go1` had in sys.modules at exit on the CPU
# (2026-11-26), less torch and its dependencies, numpy, matplotlib, tensorboard, onnx, PyYAML and
# absl, which the GPU image has. Two cuts keep it to two folders, neither touching training:
# imageio-ffmpeg's 65 MB ffmpeg binary is left out of its wheel (mjlab imports the module but
# runs the binary only to write videos, off here), and IPython's interactive parts (jedi,
# prompt-toolkit and others), which `mediapy`'s import of IPython.display does not load.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
grep -qx '/.gpu\*/' .git/info/exclude 2>/dev/null || echo '/.gpu*/' >> .git/info/exclude
part_mb=${PART_MB:-56}
pkgs=(
  mjlab==1.6.0 mujoco==3.11.0 mujoco-warp==3.11.0 rsl-rl-lib==5.4.2 tensordict==0.15.3 pyvers==0.2.3
  cloudpickle==3.1.3 xxhash==4.1.0 zstandard==0.25.0 scipy==1.17.1 trimesh==5.2.0 prettytable==3.18.0
  wcwidth==0.9.4 tqdm==4.70.1 mjviser==0.0.14 viser==1.1.1 msgspec==0.22.0 websockets==16.1.1 rich==14.3.4
  mediapy==1.2.7 ipython==9.18.1 ipython-pygments-lexers traitlets==5.16.1 pygments==2.21.0
  imageio-ffmpeg==0.8.1 wandb==0.31.0 protobuf==7.36.2 pydantic==2.14.4 pydantic-core==2.50.5
  annotated-types==0.8.0 typing-inspection==0.4.5 gitpython==3.2.1 gitdb==4.0.12 smmap==5.0.3 click==8.5.1
  platformdirs==4.14.8 charset-normalizer==3.5.3 cffi==2.1.1 pycparser==3.12 googleapis-common-protos==1.76.0
  opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-semantic-conventions==0.66b2
  opentelemetry-proto==1.45.2 opentelemetry-exporter-otlp-proto-common==1.45.2
  opentelemetry-exporter-otlp-proto-http==1.45.2 opentelemetry-exporter-http-transport==0.66b2
)
rm -rf .gpu_mjlab[0-9]* && work=$(mktemp -d) && trap 'rm -rf "$work"' EXIT
mkdir -p "$work/wheels"
echo "pack_mjlab: downloading ${#pkgs[@]} wheels for Python 3.12"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any \
  -d "$work/wheels" "${pkgs[@]}" 2>&1 | { grep -v -i warning || true; }

# imageio-ffmpeg without its ffmpeg binary (see above): the module imports, get_ffmpeg_exe fails.
wheel=$(ls "$work"/wheels/imageio_ffmpeg-*.whl)
python3 - "$wheel" <<'PY'
import sys, zipfile
src = sys.argv[1]
out = src + ".new"
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
    for item in zin.infolist():
        if "/binaries/ffmpeg" not in item.filename:
            zout.writestr(item, zin.read(item.filename))
PY
mv "$wheel.new" "$wheel"

tar -C "$work" -cf "$work/bundle.tar" wheels
split -b "${part_mb}m" -d -a 1 "$work/bundle.tar" "$work/part-"
n=0
for f in "$work"/part-*; do
  n=$((n + 1)); mkdir -p ".gpu_mjlab$n"; mv "$f" ".gpu_mjlab$n/bundle.part$n"
done
echo "pack_mjlab: $n folders: $(du -sm .gpu_mjlab[0-9]* | awk '{printf "%s %s MB  ", $2, $1}')"
