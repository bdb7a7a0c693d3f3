#!/bin/bash
# Every check of issue 26 on a lent GPU, in phases that each fit one device call (10 minutes):
#
#   bash scripts/gpu_checks.sh info        # what torch, Warp and NCCL see
#   bash scripts/gpu_checks.sh tests       # the CLI tests with MJRL_TEST_DEVICE=cuda
#   bash scripts/gpu_checks.sh throughput  # bare physics, replayed substeps, training loop; 1024-8192 envs
#   bash scripts/gpu_checks.sh nccl        # a NCCL process group through the loop (torchrun, 1 GPU)
#   bash scripts/gpu_checks.sh learn       # the flat quadruped at 4096 envs to its targets, wall time
#
# Run from the checkout after `bash .gpu1/install.sh && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH`
# (../shared/gpu/README.md). Everything it measures goes to $OUT (default ./gpu_out), one file
# per phase, with the commands that made it.
set -uo pipefail
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
PY=${PYTHON:-python}
phase=${1:-info}
log="$OUT/$phase.txt"
run() {  # run and record a command and its output
  echo "\$ $*" | tee -a "$log"
  "$@" 2>&1 | tee -a "$log"
  echo "exit $?" | tee -a "$log"
}
echo "# $phase $(date -u +%FT%TZ) $(git rev-parse --short HEAD 2>/dev/null)" >> "$log"

case $phase in
info)
  run nvidia-smi
  run $PY -c "import torch, warp, mujoco, mujoco_warp; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0), torch.cuda.nccl.version()); warp.init(); print('warp', warp.__version__, 'mujoco', mujoco.__version__, 'mujoco_warp', mujoco_warp.__version__)"
  run lscpu
  ;;
tests)
  # The tests whose runs go through TINY_RUN train on the GPU; the rest stay on the CPU.
  $PY -c "import pytest" 2>/dev/null || $PY -m pip install -q --no-index --no-deps --target /tmp/site .gpu_extra/*.whl
  export MJRL_TEST_DEVICE=cuda
  run $PY -m pytest -x -q -p no:cacheprovider tests/test_training.py tests/test_sim_env.py tests/test_quadruped.py \
    tests/test_symmetry.py tests/test_distillation.py tests/test_algorithm.py tests/test_host_sync.py
  ;;
throughput)
  for task in Mjrl-Cartpole-Balance Mjrl-Velocity-Flat-Quadruped; do
    for n in 1024 4096 8192; do
      run $PY scripts/bench_train.py --device cuda --task $task --num-envs $n --iterations 10 --physics-steps 500
    done
  done
  run $PY scripts/bench_solver_loop.py --device cuda --num-worlds 4096 --steps 20
  ;;
nccl)
  run torchrun --nproc_per_node 1 --no_python train Mjrl-Cartpole-Balance --distributed True --device cuda \
    --env.num-envs 4096 --runner.max-iterations 30 --logger none --log-root "$OUT/nccl"
  # A fault one GPU allows: the only rank raises, the job must end at once with its error.
  run torchrun --nproc_per_node 1 --no_python train Mjrl-Cartpole-Balance --distributed True --device cuda \
    --env.num-envs 1024 --runner.max-iterations 30 --logger none --log-root "$OUT/nccl" --fault raise@0:3
  ;;
learn)
  # Stops at the first periodic evaluation that meets the flat targets (bench_seeds.py).
  timeout 560 $PY scripts/bench_seeds.py --log-root "$OUT/learn" --seeds 1 --poll-s 5 --episodes 32 -- \
    --device cuda --env.num-envs 4096 --runner.eval-interval 10 --runner.eval-envs 64 2>&1 | tee -a "$log"
  ;;
*)
  echo "unknown phase $phase: info, tests, throughput, nccl or learn" >&2
  exit 2
  ;;
esac
