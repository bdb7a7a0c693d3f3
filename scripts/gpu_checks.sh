#!/bin/bash
# The checks of issue 26 on a lent GPU, in phases run in the order given, each cut to the time
# left before a deadline (GPU_BUDGET_S seconds from the start, default 560; `all` does not fit
# in it with a cold kernel cache: the phases at its end are skipped, so name what is left):
#
#   bash scripts/gpu_checks.sh all         # info throughput nccl learn tests
#   bash scripts/gpu_checks.sh info        # what torch, Warp and NCCL see
#   bash scripts/gpu_checks.sh mjlab       # mjlab's Go1 task beside mjrl on mjlab's Go1 and on its own, 4096 envs
#   bash scripts/gpu_checks.sh throughput  # bare physics, replayed substeps, training loop at 1024-8192 envs; a profile
#   bash scripts/gpu_checks.sh deterministic  # the cost of mujoco_warp's deterministic mode
#   bash scripts/gpu_checks.sh loop        # the training loop eager and as CUDA graphs, against its ceiling
#   bash scripts/gpu_checks.sh collectives # NCCL inside the loop's graphs on one GPU (--force-collectives)
#   bash scripts/gpu_checks.sh sac         # SAC on the flat quadruped and humanoid at 4096 envs, to their targets
#   bash scripts/gpu_checks.sh recurrent   # an LSTM policy's iteration against the MLP's, quadruped, 4096 envs, graphs
#   bash scripts/gpu_checks.sh kernels     # kernels launched per env step and per minibatch step (the profiler's count)
#   bash scripts/gpu_checks.sh update      # the PPO update alone: fp32, tf32, bf16, a CUDA graph
#   bash scripts/gpu_checks.sh nccl        # a NCCL process group through the loop (torchrun, 1 GPU), a fault, the launcher
#   bash scripts/gpu_checks.sh learn       # the flat quadruped at 4096 envs to its targets, wall time
#   bash scripts/gpu_checks.sh faults      # a rank killed under torchrun with NCCL
#   bash scripts/gpu_checks.sh tests       # the GPU-capable tests with MJRL_TEST_DEVICE=cuda
#   bash scripts/gpu_checks.sh scale       # the rough and humanoid tasks at 4096 envs
#   bash scripts/gpu_checks.sh humanoid    # the 23-DoF humanoid trained at 4096 envs (HUMANOID_S, default 420 s)
#   THROUGHPUT_TASKS=Mjrl-Velocity-Flat-Quadruped bash scripts/gpu_checks.sh throughput tests
#
# What worked on 2026-11-26 (docs/benchmarks.md, "On a GPU"), with the device tool:
#   1. Here: `bash ../shared/gpu/pack.sh` (two folders of 56 and 54 MB). The working tree travels
#      too and a call carries at most 64 MiB: move runs/*/ out of the checkout during the calls
#      (put them back after), or pack with a smaller PART_MB.
#   2. Call 1, carry [".gpu1"]: `cp -r .gpu1 /tmp/gpu1`. A later call removes what an earlier
#      one carried, so the folder must leave the checkout; /tmp stays while the machine is warm
#      (30 s after a call: make call 2 at once).
#   3. Call 2, carry [".gpu2"]: `cp -r /tmp/gpu1 .gpu1 && bash .gpu1/install.sh &&
#      export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH && bash scripts/gpu_checks.sh all`.
# With mjlab beside it (`mjlab`, issue 45): also `bash scripts/gpu_pack_mjlab.sh` here (.gpu_mjlab1
# and .gpu_mjlab2, 57 and 50 MB); then four calls, each at once after the last (2026-11-26: 44 s
# of device time for the first three): carry [".gpu1"] `cp -r .gpu1 /tmp/gpu1`; carry [".gpu2"]
# `cp -r .gpu2 /tmp/gpu2`; carry [".gpu_mjlab1"] `cp -r .gpu_mjlab1 /tmp/gpu_mjlab1`; carry
# [".gpu_mjlab2"] `cp -r /tmp/gpu1 .gpu1 && cp -r /tmp/gpu2 .gpu2 && cp -r /tmp/gpu_mjlab1
# .gpu_mjlab1 && bash .gpu1/install.sh && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH &&
# bash scripts/gpu_checks.sh info mjlab`.
# 2026-11-26, session 17 (H100, 900 s): call 1 carry [".gpu1"] `cp -r .gpu1 /tmp/gpu1` (31 s with
# the machine's start); call 2 carry [".gpu2"] `cp -r /tmp/gpu1 .gpu1 && bash .gpu1/install.sh
# >/tmp/install.log 2>&1; export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH && GPU_BUDGET_S=555
# GRAPH_TASKS=Mjrl-Velocity-Flat-Quadruped GRAPH_S=140 bash scripts/gpu_checks.sh info graph learn
# tests` (583 s; the tests phase ran out at 93 %); call 3, warm, the failed tests again (67 s).
# Next window (issues 43 and 45): pack with `bash ../shared/gpu/pack.sh --with-wandb` (the WandB
# test needs it; a third folder if it does not fit in two), then `info tests loop graph
# deterministic` (tests first: test_capture.py runs the real CUDA graphs of `--runner.cuda-graphs`;
# loop: the loop against its ceiling with them; graph: a replay of deterministic physics must
# equal its eager twin bit for bit), then `scale` or `humanoid` with what is left. (The `graph`
# phase, scripts/bench_graph_rollout.py, and the solver probe of `throughput` were removed on
# 2026-11-28 as finished probes: `loop` times the runner's own graphs; both are in git at 5148195.)
# Issue 44 (session 18) adds two short phases for that window, after `loop`: `kernels` (the
# profiler's launch counts per env step and minibatch step, about a minute with the quadruped's
# kernels compiled by `loop`) and `update` (the PPO update alone: fp32, tf32, bf16, a CUDA graph;
# about a minute).
# 2026-11-27, session 19 (H100, 900 s; docs/benchmarks.md, "The third window"): packed with
# --with-wandb (three folders: carry .gpu1, then .gpu2, then .gpu3 with the command); `GPU_BUDGET_S=545
# LOOP_S=130 TESTS_S=240 TESTS_FILES=tests/test_capture.py bash scripts/gpu_checks.sh info loop
# kernels update tests` took 373 s (the graphs failed at the update's capture: fixed since),
# then the other test files (269 s) and `deterministic` (35 s). Next: the same first call (the
# real graphs of test_capture first, then the loop's graphs in fp32, tf32 and bf16, the update's
# graph), then `learn` with `--runner.cuda-graphs on` if it holds. The wandb test needs wandb
# 0.31's opentelemetry-*, cwevals, xxhash and httpx, which pack.sh --with-wandb leaves out: pack
# without it and run `bash scripts/gpu_pack_extra.sh` (.gpu_wandb, 27 MB, carried with the call
# that runs the checks; the tests phase installs it).
# 2026-11-27, session 20 (H100, 900 s; docs/benchmarks.md, "The fourth window"): pack.sh without
# --with-wandb (two folders) and gpu_pack_extra.sh; call 1 carry [".gpu1"] `cp -r .gpu1 /tmp/gpu1`
# (34 s with the start); call 2 carry [".gpu2"] `cp -r /tmp/gpu1 .gpu1 && bash .gpu1/install.sh
# >/tmp/install.log 2>&1; export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH && GPU_BUDGET_S=470
# TESTS_S=130 TESTS_FILES=tests/test_capture.py LOOP_S=170 LEARN_S=75 LEARN_FLAGS="--runner.cuda-graphs
# on" bash scripts/gpu_checks.sh info tests loop learn update` (358 s); call 3 carry [".gpu_wandb"]
# `bash .gpu1/install.sh ...; GPU_BUDGET_S=420 TESTS_S=330 TESTS_FILES="the other ten" bash
# scripts/gpu_checks.sh tests scale` (377 s). Next: `humanoid` and the rough quadruped with
# HUMANOID_FLAGS="--runner.cuda-graphs on" (issue 45, item 4).
# Issue 44 (session 22) adds `--runner.compile` (torch.compile of the rollout step and the
# update; on the CPU the quadruped's kernels per rollout step 273 -> 113, per minibatch step 250
# -> 132): `kernels` counts it too, and `loop` trains the quadruped's graphs with it
# (LOOP_COMPILE, default "off all"). Whether the machine's torch has triton and a C compiler for
# inductor is unknown: the first compiled command says.
# Issue 59 (session 26) adds `collectives` (NCCL inside the loop's CUDA graphs on one GPU, with
# `--force-collectives`), LOOP_ENVS/LOOP_SETTINGS/LOOP_GRAPHS for `loop` (name the precision and
# compile pairs wanted: each compile mode compiles once per number of envs), one inductor and
# Triton cache for the window (/tmp/mjrl-inductor, /tmp/mjrl-triton), and raw.jsonl: every JSON
# line of every phase, tagged with its phase and the time. After the window, copy raw.jsonl to
# docs/gpu/<date>-<device>.jsonl (e.g. docs/gpu/2026-11-29-h100.jsonl) and cite it in
# docs/benchmarks.md beside the table made from it.
# 2026-11-28, session 31 (H200, 900 s; docs/benchmarks.md, "The fifth window"): call 1 carry
# [".gpu1"] `cp -r .gpu1 /tmp/gpu1` (35 s with the start); call 2 carry [".gpu2"] `cp -r /tmp/gpu1
# .gpu1 && bash .gpu1/install.sh >/tmp/install.log 2>&1; export PYTHONPATH=/tmp/site
# PATH=/tmp/site/bin:$PATH && GPU_BUDGET_S=540 SAC_KEEP=16 bash scripts/gpu_checks.sh info sac`
# (499 s: Warp's quadruped kernels 78 s cold, the humanoid's 48 s); call 3, warm, `bash
# .gpu1/install.sh ...; GPU_BUDGET_S=250 TESTS_S=120 TESTS_FILES="tests/test_sac.py
# tests/test_capture.py" COLLECTIVES_S=55 bash scripts/gpu_checks.sh tests collectives` (157 s).
# Next window: `sac` (the quadruped's new settings, a target entropy of 1 per joint: do they walk
# it at 4096 envs, and how soon; the humanoid's support widened: 12 % of its targets were
# clipped), `tests` with test_sac.py first (its real graph of the SAC update), then `loop` and
# `update` (not run since the fourth window: bf16 and `--runner.compile` on the GPU).
# $OUT (the device tool's, or ./gpu_out) receives gpu.log (every command and its output) and
# each phase's figures in a file of their own (and all of them in raw.jsonl): at most 8 files,
# as the device tool returns.
set -uo pipefail
OUT=${OUT:-gpu_out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)  # absolute: some phases run their commands from another folder
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
START=$(date +%s)
BUDGET=${GPU_BUDGET_S:-560}
log="$OUT/gpu.log"
GO1=Mjrl-Velocity-Flat-Quadruped

# One inductor and Triton cache for the whole window: a phase after `loop` reuses what it compiled.
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/mjrl-inductor}
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/mjrl-triton}

left() { echo $((START + BUDGET - $(date +%s))); }
keep() {  # keep PHASE FILE: stdin's JSON lines into $OUT/FILE, and each tagged with its phase into $OUT/raw.jsonl
  grep '^{' | tee -a "$OUT/$2" | PHASE=$1 $PY -c 'import json, os, sys, time
for line in sys.stdin:
    print(json.dumps({"phase": os.environ["PHASE"], "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **json.loads(line)}))' \
    >>"$OUT/raw.jsonl"
}
cap() {  # cap SECONDS: the smaller of SECONDS and the time left, less a margin for what follows
  local l=$(($(left) - 5))
  echo $(($1 < l ? $1 : l))
}
run() {  # run CAP COMMAND...: run and record a command, killed (its process group too) after CAP s
  local limit
  limit=$(cap "$1")
  shift
  if ((limit < 10)); then
    echo "# skipped (no time left): $*" | tee -a "$log"
    return 124
  fi
  echo "\$ [${limit}s, $(date -u +%T)] $*" | tee -a "$log"
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  echo "# exit $rc after $((SECONDS - t0)) s" | tee -a "$log"
  return "$rc"
}

# The tests and scripts find `train` beside the Python that runs them; install.sh put it in /tmp/site/bin.
bin_dir=$($PY -c "import sys, os; print(os.path.dirname(sys.executable))")
for tool in train play mjrl; do
  [[ -x $bin_dir/$tool ]] || ln -sf "$(command -v $tool)" "$bin_dir/$tool" 2>/dev/null || true
done

info() {
  echo "# info $(date -u +%FT%TZ) $(git rev-parse --short HEAD 2>/dev/null)" | tee -a "$log"
  run 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  run 60 $PY -c "import torch, warp, mujoco, mujoco_warp; warp.init(); print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0), 'nccl', torch.cuda.nccl.version()); print('warp', warp.__version__, 'mujoco', mujoco.__version__, 'mujoco_warp', mujoco_warp.__version__, 'conditional graphs', warp.is_conditional_graph_supported(), 'mempool', warp.is_mempool_enabled('cuda:0'))"
  lscpu | grep -E 'Model name|^CPU\(s\)' | tee -a "$log"
}

throughput() {
  local task
  for task in ${THROUGHPUT_TASKS:-Mjrl-Cartpole-Balance $GO1}; do
    local profile=()
    [[ $task == "$GO1" ]] && profile=(--profile-envs 4096 --profile-out "$OUT/profile.txt")
    if ! run 200 $PY scripts/bench_train.py --device cuda --task $task --num-envs 1024 4096 8192 --iterations 10 \
      --physics-steps 300 "${profile[@]}" | keep throughput throughput.jsonl; then
      # The captured loop failed: measure with every kernel launched from Python instead.
      run 120 $PY scripts/bench_train.py --device cuda --task $task --num-envs 4096 --iterations 5 \
        --physics-steps 100 --no-graph | keep throughput throughput.jsonl
    fi
  done
}

learn() {
  # Issue 45, item 3: the CPU preset's PPO at 4096 envs, LEARN_SEEDS (default 1 2) one after the
  # other, kernels cached (the throughput, graph or mjlab phase compiled them), no evaluation on
  # the GPU (a 64-env evaluation is host-bound there, 5 s each, and would count in the wall
  # time): a checkpoint every 15 iterations comes back without its optimizer (1.6 MB), to be
  # played here on the full command distribution and on forward commands; each line of the
  # run's output is stamped with the seconds since the command's start (learn_seedN.log).
  # LEARN_FLAGS: more flags for `train` (e.g. `--runner.cuda-graphs on`).
  # LEARN_DEVICE=cpu LEARN_ENVS=16 LEARN_ITERATIONS=2 try the phase on a CPU machine.
  local seed run_dir device=${LEARN_DEVICE:-cuda} envs=${LEARN_ENVS:-4096} iterations=${LEARN_ITERATIONS:-150}
  for seed in ${LEARN_SEEDS:-1 2}; do
    run "${LEARN_S:-110}" bash -c "set -o pipefail; train $GO1 --device $device --preset cpu-locomotion \
      --seed $seed --env.num-envs $envs --runner.max-iterations $iterations --runner.eval-interval 0 \
      --runner.save-interval ${LEARN_SAVE:-15} --logger none --log-root /tmp/learn --run-name seed-$seed \
      ${LEARN_FLAGS:-} 2>&1 |
      stamp > $OUT/learn_seed$seed.log"
    tail -3 "$OUT/learn_seed$seed.log" | tee -a "$log"
    run_dir=$(ls -d /tmp/learn/$GO1/20*_seed-$seed 2>/dev/null | tail -1)
    [[ -n $run_dir ]] || continue
    slim_checkpoints 0 "$run_dir"/checkpoints/model_*.pt
    # One file per seed, a run directory `play --run-dir` reads (tar -xf learn_seedN.tar -C RUN).
    tar -C "$run_dir" -cf "$OUT/learn_seed$seed.tar" config.yaml metrics.jsonl checkpoints
  done
}

slim_checkpoints() {  # slim_checkpoints KEEP FILE...: what comes back of a GPU run's checkpoints
  # At most KEEP of them (0: all; else at least the first and the newest, the rest spread between),
  # each without its optimizer and SAC's critics (play reads the policy alone), with its file time
  # (the seconds since the command's start are read off it). None: a run killed before its first.
  KEEP=$1 $PY -c "import os, sys
from pathlib import Path
from mjrl.checkpoint import load_checkpoint, save_checkpoint
paths = sorted(p for p in map(Path, sys.argv[1:]) if p.exists())
keep = int(os.environ['KEEP']) and max(2, int(os.environ['KEEP']))
if keep and len(paths) > keep:
    kept = {paths[round(i * (len(paths) - 1) / (keep - 1))] for i in range(keep)}
    for path in set(paths) - kept:
        path.unlink()
    paths = sorted(kept)
for path in paths:
    checkpoint, mtime = load_checkpoint(path), path.stat().st_mtime
    checkpoint.pop('optimizer')
    if 'sac' in checkpoint:
        checkpoint['sac'] = {k: v for k, v in checkpoint['sac'].items() if k in ('log_alpha', 'atoms', 'support_set')}
    save_checkpoint(path, checkpoint)
    os.utime(path, (mtime, mtime))" "${@:2}"
}

stamp() {  # prefix each line of stdin with the seconds since this filter started (cold-start times)
  # It outlives a timeout's SIGTERM to drain what the stopping command still prints (its last
  # lines, after its final checkpoint): killed, it would break that command's pipe.
  $PY -u -c 'import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
t = time.time()
for line in sys.stdin:
    print(f"{time.time() - t:7.1f} {line}", end="")'
}

export -f stamp keep
export PY OUT

gpu_memory() {  # gpu_memory LABEL run CAP COMMAND...: run it, then append the peak GPU memory (MiB) to memory.txt
  local label=$1 sampler rc
  shift
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 >"/tmp/mem_$label.txt" 2>/dev/null &
  sampler=$!
  "$@"
  rc=$?
  kill "$sampler" 2>/dev/null
  echo "$label peak_gpu_memory_mib $(sort -n "/tmp/mem_$label.txt" | tail -1)" | tee -a "$OUT/memory.txt"
  return "$rc"
}

mjlab() {
  # Issue 45, item 1: mjlab's `Mjlab-Velocity-Flat-Unitree-Go1` beside mjrl on the same card, each
  # at 4096 envs with a cold kernel cache, one after the other (never two on the GPU at once):
  #   1. mjlab 1.6.0 as its users run it (rsl_rl's runner, tensorboard instead of wandb): its log,
  #      every line stamped with the seconds since the command's start, -> mjlab_go1.log;
  #   2. mjrl's flat velocity task on mjlab's own Go1 model (scripts/mjlab_go1.py writes it with
  #      mjlab's actuators, collisions, solver settings and standing pose) -> beside_mjlab_go1.jsonl;
  #   3. mjrl's own Go1 (bench_train: physics ceiling and training loop) -> throughput.jsonl.
  # The PPO shape is the same in both (24 steps per env, 5 epochs of 4 minibatches, 512-256-128
  # ELU actor and critic). mjlab's packages (scripts/gpu_pack_mjlab.sh) go into /tmp/mjlab-site,
  # first on mjlab's PYTHONPATH only: it pins mujoco and mujoco-warp 3.11, mjrl runs 4.0.
  # BESIDE_DEVICE=cpu BESIDE_ENVS=16 MJLAB_PY=... MJRL_SITE=... try the phase on a CPU machine.
  local site=/tmp/mjlab-site device=${BESIDE_DEVICE:-cuda} envs=${BESIDE_ENVS:-4096} mpy=${MJLAB_PY:-$PY}
  # mjlab's import asks imageio-ffmpeg for its binary (left out of the pack: no videos here) and
  # mujoco 3.11's for an EGL context (none on the GPU machine): neither is used in training.
  local mj="env PYTHONPATH=$site:${MJRL_SITE:-/tmp/site} IMAGEIO_FFMPEG_EXE=/bin/true MUJOCO_GL=disable" gpus=()
  [[ $device == cpu ]] && gpus=(--gpu-ids None)
  if [[ ! -f $site/.ready ]]; then
    run 120 bash -c "set -e; w=\$(mktemp -d); cat \$(ls .gpu_mjlab[0-9]*/bundle.part* | sort -V) | tar -C \$w -xf -;
      $mpy -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $site \$w/wheels/*.whl;
      touch $site/.ready" || return 1
  fi
  run 60 $mj $mpy scripts/mjlab_go1.py --out /tmp/go1_mjlab || return 1
  mkdir -p /tmp/mjlab_run
  gpu_memory mjlab run "${MJLAB_S:-210}" bash -c "set -o pipefail; cd /tmp/mjlab_run && $mj $mpy -u -m mjlab.scripts.train \
    Mjlab-Velocity-Flat-Unitree-Go1 --env.scene.num-envs $envs --agent.max-iterations 3000 --agent.seed 1 \
    --agent.logger tensorboard ${gpus[*]} 2>&1 | stamp > $OUT/mjlab_go1.log"
  tail -25 "$OUT/mjlab_go1.log" | tee -a "$log"
  gpu_memory mjrl_mjlab_go1 run "${BESIDE_S:-150}" bash -c "train Mjrl-Velocity-Flat-Quadruped \
    --config /tmp/go1_mjlab/robot.yaml --device $device --env.num-envs $envs --runner.max-iterations 3000 \
    --runner.eval-interval 50 --runner.eval-envs 64 --logger none --log-root /tmp/beside --seed 1 2>&1 | stamp"
  cp "$(ls -d /tmp/beside/Mjrl-Velocity-Flat-Quadruped/20* | tail -1)/metrics.jsonl" \
    "$OUT/beside_mjlab_go1.jsonl" 2>/dev/null
  gpu_memory mjrl_own_go1 run 120 bash -c "$PY scripts/bench_train.py --device $device --task $GO1 \
    --num-envs $envs --iterations 10 --physics-steps 300 | keep mjlab throughput.jsonl"
}

deterministic() {
  # Issue 43, item 4: what mujoco_warp's deterministic mode costs (`--env.sim.deterministic`),
  # the quadruped at 4096 envs, without and with it. DETERMINISTIC_DEVICE=cpu
  # DETERMINISTIC_ENVS=16 try the phase on a CPU machine.
  local flag device=${DETERMINISTIC_DEVICE:-cuda} envs=${DETERMINISTIC_ENVS:-4096}
  for flag in "" --deterministic; do
    run 150 $PY scripts/bench_train.py --device "$device" --task $GO1 --num-envs "$envs" --iterations 5 \
      --physics-steps 200 $flag | keep deterministic deterministic.jsonl
  done
}

loop() {
  # Issue 43 item 2 / issue 45 item 2: the training loop against its ceiling, eager and as CUDA
  # graphs (`--runner.cuda-graphs on`), the quadruped and the cart-pole, at LOOP_ENVS (default
  # 4096 8192). The quadruped's graphs in each PRECISION:COMPILE pair of LOOP_SETTINGS (default
  # fp32:off bf16:off bf16:all: TF32 and bf16 matrix products, issue 44 item 3; `--runner.compile`,
  # issue 44 item 2): each compile mode compiles once per number of envs, so name only the pairs
  # wanted. LOOP_GRAPHS (default off on), LOOP_ITERATIONS (10), LOOP_PHYSICS_STEPS (200);
  # LOOP_DEVICE=cpu LOOP_GRAPHS=off LOOP_ENVS=16 LOOP_ITERATIONS=2 try the phase on a CPU machine.
  local task graphs settings device=${LOOP_DEVICE:-cuda}
  for task in ${LOOP_TASKS:-$GO1 Mjrl-Cartpole-Balance}; do
    for graphs in ${LOOP_GRAPHS:-off on}; do
      settings=fp32:off
      [[ $task == "$GO1" && $graphs == on ]] && settings=${LOOP_SETTINGS:-fp32:off bf16:off bf16:all}
      run "${LOOP_S:-150}" $PY scripts/bench_train.py --device "$device" --task $task --num-envs ${LOOP_ENVS:-4096 8192} \
        --iterations ${LOOP_ITERATIONS:-10} --physics-steps ${LOOP_PHYSICS_STEPS:-200} --cuda-graphs $graphs \
        --settings $settings | keep loop loop.jsonl
    done
  done
}

collectives() {
  # Issue 59: NCCL inside the loop's CUDA graphs, on one GPU. `--force-collectives` makes the one
  # process issue every collective two ranks would (its gradient all-reduces inside the update's
  # graph); the cart-pole (no contacts: bit for bit on a GPU) with them and without, each eager
  # and as graphs, at COLLECTIVES_ENVS (4096): within each, the forced and the plain run's
  # `learned_sha256` must be one (`learned_alike`; eager and graphs compared apart, in
  # `graphs_learn_as_eager`: bench_train's eager and graphed runs differed on the H200 of
  # 2026-11-28, where the runner's replay equals its eager loop, test_capture.py), and the rates
  # say what the collectives cost. Then the same through torchrun (one rank, NCCL).
  # COLLECTIVES_DEVICE=cpu COLLECTIVES_GRAPHS=off COLLECTIVES_ENVS=16 COLLECTIVES_ITERATIONS=2
  # try the phase on a CPU machine (gloo).
  local graphs device=${COLLECTIVES_DEVICE:-cuda}
  for graphs in ${COLLECTIVES_GRAPHS:-off on}; do
    run "${COLLECTIVES_S:-80}" $PY scripts/bench_train.py --device "$device" --task Mjrl-Cartpole-Balance \
      --num-envs ${COLLECTIVES_ENVS:-4096} --iterations ${COLLECTIVES_ITERATIONS:-10} --physics-steps 50 \
      --cuda-graphs $graphs --collectives off forced | keep collectives collectives.jsonl
  done
  $PY -c "import json, sys
lines = [json.loads(line) for line in open(sys.argv[1]) if line.startswith('{')]
runs = [line for line in lines if 'learned_sha256' in line]
modes = {line['cuda_graphs']: [] for line in runs}
for line in runs:
    modes[line['cuda_graphs']].append(line['learned_sha256'])
# Each loop needs its plain and its forced run to compare; the loops are compared when both ran.
alike = bool(modes) and all(len(d) >= 2 and len(set(d)) == 1 for d in modes.values())
loops = len({d[0] for d in modes.values()}) == 1 if len(modes) >= 2 else None
print(json.dumps({'runs': len(runs), 'learned_alike': alike, 'graphs_learn_as_eager': loops}))" "$OUT/collectives.jsonl" |
    keep collectives collectives.jsonl
  [[ $device == cuda ]] || return 0
  run 90 torchrun --nproc_per_node 1 --no_python train Mjrl-Cartpole-Balance --distributed True --device cuda \
    --force-collectives True --runner.cuda-graphs on --env.num-envs 4096 --runner.max-iterations 10 --logger none \
    --log-root /tmp/collectives
}

sac() {
  # Issue 60, item 5: SAC (`--algo sac`) at SAC_ENVS (4096), one run after the other, each
  # SAC_RUNS entry (';' between them) a task and its flags, led by its seconds if not SAC_S
  # (default: the flat quadruped with its shipped settings, then with four times the batch and
  # two gradient steps per env step, then the flat humanoid with the 2026-11-28 window's
  # settings and a support wide enough for its returns), first as CUDA
  # graphs with bf16 products (SAC_GRAPH_FLAGS), again eagerly with what is left if those fail.
  # Each line of `train` is stamped with the seconds since the command's start (sac_N.log,
  # whose first line is that start's epoch). No evaluation on the GPU (a 64-env evaluation is
  # host-bound there, seconds each): a checkpoint every SAC_SAVE iterations and every minute of
  # training (`--runner.save-interval-s`; SAC_SAVE_S), without the ring, comes back without its
  # optimizer or critics (play reads the policy alone) and with its file time, at most
  # SAC_KEEP of them spread over the run (the newest kept), in sac_run_N.tar with the run's
  # config, metrics and log (a run directory `play TASK --run-dir` reads), to be played here:
  # the time to every target is that of the first checkpoint that meets them.
  # SAC_DEVICE=cpu SAC_ENVS=16 SAC_ITERATIONS=2 SAC_EVAL=1 SAC_GRAPH_FLAGS= try the phase on a CPU.
  local spec task flags seconds run_dir rc n=0 device=${SAC_DEVICE:-cuda} root=${SAC_ROOT:-/tmp/sac} runs=()
  local graphs=${SAC_GRAPH_FLAGS---runner.cuda-graphs on --policy.precision bf16}
  local larger="--algorithm.batch-size 16384 --algorithm.updates-per-step 2"
  local humanoid="--algorithm.action-bound 3 --algorithm.init-temperature 0.001 --algorithm.target-entropy 0.1 \
    --algorithm.v-max 30 $larger"
  IFS=';' read -ra runs <<<"${SAC_RUNS:-$GO1; $GO1 $larger; Mjrl-Velocity-Flat-Humanoid $humanoid}"
  for spec in "${runs[@]}"; do
    n=$((n + 1))
    read -r task flags <<<"$spec"
    seconds=${SAC_S:-150}
    [[ $task =~ ^[0-9]+$ ]] && { seconds=$task; read -r task flags <<<"$flags"; }
    local train_line="$bin_dir/train $task --algo sac --device $device --seed 1 --env.num-envs ${SAC_ENVS:-4096} \
      --runner.max-iterations ${SAC_ITERATIONS:-3000} --runner.eval-interval ${SAC_EVAL:-0} \
      --runner.save-interval ${SAC_SAVE:-10} --runner.save-interval-s ${SAC_SAVE_S:-60} --runner.save-bulk-state False \
      --logger none --log-root $root/$n $flags"
    # The shell waits out a timeout's SIGTERM for `train`, which saves a last checkpoint on it.
    local attempt="trap '' TERM; set -o pipefail; date +%s.%N > $OUT/sac_$n.log; $train_line"
    run "$seconds" bash -c "$attempt $graphs 2>&1 | stamp >> $OUT/sac_$n.log"
    rc=$?
    if ((rc != 0 && rc != 124)) && [[ -n $graphs ]] && ! grep -qs . $root/$n/$task/20*/metrics.jsonl; then
      # The graphs failed before a first iteration: eagerly, with what is left.
      mv "$OUT/sac_$n.log" "$OUT/sac_${n}_graphs.log"
      mv "$root/$n" "$root/$n-graphs"
      run "$seconds" bash -c "$attempt 2>&1 | stamp >> $OUT/sac_$n.log"
    fi
    tail -3 "$OUT/sac_$n.log" | tee -a "$log"
    run_dir=$(ls -d $root/$n/$task/20* 2>/dev/null | tail -1)
    if [[ -n $run_dir ]]; then
      keep "sac$n" sac.jsonl <"$run_dir/metrics.jsonl"
      slim_checkpoints "${SAC_KEEP:-12}" "$run_dir"/checkpoints/model_*.pt
      mv "$OUT"/sac_"$n"*.log "$run_dir/"
      tar -C "$(dirname "$run_dir")" -cf "$OUT/sac_run_$n.tar" "$(basename "$run_dir")"
    fi
  done
}

kernels() {
  # Issue 44, item 1: launches per env step (with and without `act`) and per minibatch step as the
  # profiler counts them (Warp's included), at 4096 envs. KERNELS_TASKS: the tasks (each compiles
  # its CUDA kernels once, about a minute cold). KERNELS_DEVICE=cpu tries the phase on a CPU.
  # Eager, then with `--runner.compile all` (the quadruped: issue 44's bar is half of eager's).
  local device=${KERNELS_DEVICE:-cuda} envs=${KERNELS_ENVS:-4096}
  run 240 $PY -m mjrl.cli.main kernels --device "$device" --num-envs "$envs" --top 20 \
    --tasks ${KERNELS_TASKS:-$GO1 Mjrl-Cartpole-Balance} | keep kernels kernels.jsonl
  run 180 $PY -m mjrl.cli.main kernels --device "$device" --num-envs "$envs" --top 20 --compile all \
    --tasks ${KERNELS_TASKS:-$GO1} | keep kernels kernels.jsonl
}

recurrent() {
  # Issue 63: an iteration of the flat quadruped at 4096 envs with an LSTM of 256 x 1 (windows of
  # 24) against the same with MLPs, the loop as CUDA graphs (bench_recurrent.py: the median over
  # iterations 3-20; the CPU preset's bar is 1.5). RECURRENT_DEVICE=cpu and RECURRENT_ARGS (the
  # script's arguments) for a try-out on a CPU machine.
  local args=${RECURRENT_ARGS:---preset benchmark -- --env.num-envs 4096 --runner.cuda-graphs on}
  run "${RECURRENT_S:-240}" $PY scripts/bench_recurrent.py --device "${RECURRENT_DEVICE:-cuda}" $args |
    keep recurrent recurrent.jsonl
}

update() {
  # Issue 44, item 4: the PPO update alone at 4096 envs (eager fp32, tf32, bf16, a CUDA graph of
  # each, and the losses through torch.compile, eager and as a graph): host and device time, and
  # the difference one update makes to fp32's parameters. The compile modes compile twice (about
  # a minute on the CPU; unknown on the GPU machine, whose image may lack triton: the mode then
  # reports its error). UPDATE_DEVICE=cpu tries the phase on a CPU machine (fp32 and bf16).
  local device=${UPDATE_DEVICE:-cuda}
  run "${UPDATE_S:-200}" $PY scripts/bench_update.py --device "$device" --num-envs 4096 --repeats 10 | keep update update.jsonl
  run 60 $PY scripts/bench_update.py --device "$device" --num-envs 4096 --repeats 10 \
    --task Mjrl-Velocity-Flat-Humanoid --modes fp32 graph graph-bf16 | keep update update.jsonl  # the humanoid's
}

nccl() {
  local root=/tmp/nccl
  run 90 torchrun --nproc_per_node 1 --no_python train Mjrl-Cartpole-Balance --distributed True --device cuda \
    --env.num-envs 4096 --runner.max-iterations 10 --logger none --log-root $root
  # A fault one GPU allows: the only rank raises; the job must end at once with its error.
  run 60 torchrun --nproc_per_node 1 --no_python train Mjrl-Cartpole-Balance --distributed True --device cuda \
    --env.num-envs 1024 --runner.max-iterations 30 --logger none --log-root $root/raise --fault raise@0:3
  # mjrl's own launcher, one rank on the GPU.
  run 60 train Mjrl-Cartpole-Balance --nproc-per-node 1 --device cuda --env.num-envs 4096 \
    --runner.max-iterations 5 --logger none --log-root $root/launcher
}

faults() {
  # The other faults one GPU allows: the only rank dies, or stops (a hang the watchdog must end).
  local root=/tmp/nccl
  run 60 torchrun --nproc_per_node 1 --no_python train Mjrl-Cartpole-Balance --distributed True --device cuda \
    --env.num-envs 1024 --runner.max-iterations 30 --logger none --log-root $root/kill --fault kill@0:3
}

tests() {
  # The in-process env tests and the runs through TINY_RUN use the GPU; the rest stay on the
  # CPU. Each result is printed as it comes (-v; `-rf` names the failures at the end), the
  # in-process files first: a phase cut short by the deadline still says which tests failed.
  # The first run of 2026-11-26 timed out with -q at 283 s: four failures, names lost; the
  # second (-v) at 306 s, 93 % done, names kept but not their reasons: now each failure's report
  # goes to test_failures.txt as it happens (MJRL_TEST_FAILURES, tests/conftest.py). The WandB
  # test needs wandb there: pack with `bash ../shared/gpu/pack.sh --with-wandb`.
  # pytest-xdist and pytest-timeout are in the GPU image; without them the run is serial.
  local parallel=()
  $PY -c "import xdist, pytest_timeout" 2>/dev/null && parallel=(-n 8 --timeout 240)
  if [[ -d .gpu_wandb ]] && ! $PY -c "import wandb" 2>/dev/null; then  # scripts/gpu_pack_extra.sh
    run 60 $PY -m pip install -q --no-index --find-links .gpu_wandb --target /tmp/site wandb
  fi
  MJRL_TEST_FAILURES=$OUT/test_failures.txt MJRL_TEST_DEVICE=cuda run "${TESTS_S:-400}" $PY -m pytest -v -rf --tb=short -p no:cacheprovider "${parallel[@]}" \
    ${TESTS_FILES:-tests/test_capture.py tests/test_host_sync.py tests/test_sim_env.py tests/test_algorithm.py \
    tests/test_quadruped.py tests/test_symmetry.py tests/test_training.py tests/test_evaluate.py \
    tests/test_distillation.py tests/test_terrain.py tests/test_humanoid.py} | grep -v PASSED
}

scale() {
  # How fast the rough and humanoid tasks train at 4096 envs (their first iterations).
  local task
  for task in Mjrl-Velocity-Rough-Quadruped Mjrl-Velocity-Flat-Humanoid; do
    run 150 train $task --device cuda --env.num-envs 4096 --runner.max-iterations 15 --runner.eval-interval 0 \
      --logger none --log-root /tmp/scale
    cp "$(ls -d /tmp/scale/$task/20* | tail -1)/metrics.jsonl" "$OUT/scale_$task.jsonl" 2>/dev/null
  done
}

humanoid() {
  # Issue 24 on a GPU: the full 23-DoF humanoid (the task's default robot) at 4096 envs, its
  # mean policy evaluated every 25 iterations; the run's curve and newest checkpoint come back,
  # to be played here with bench_locomotion (the wall time to the targets is in its metrics).
  # HUMANOID_TASK picks another task (the rough quadruped; Mjrl-Tracking-Flat-Humanoid for issue
  # 48's GPU figures, played here with bench_tracking.py), HUMANOID_FLAGS more flags for train.
  local task=${HUMANOID_TASK:-Mjrl-Velocity-Flat-Humanoid}
  run ${HUMANOID_S:-420} train $task --device cuda --env.num-envs 4096 --runner.max-iterations 3000 \
    --runner.eval-interval 25 --runner.save-interval 25 --logger none --log-root /tmp/humanoid ${HUMANOID_FLAGS:-}
  local run_dir last
  run_dir=$(ls -d /tmp/humanoid/$task/20* 2>/dev/null | tail -1)
  [[ -n $run_dir ]] || return 1
  last=$(ls "$run_dir"/checkpoints/model_*.pt 2>/dev/null | tail -1)
  # One file, a run directory `play --run-dir` reads (tar -xf humanoid_run.tar -C RUN).
  tar -C "$run_dir" -cf "$OUT/humanoid_run.tar" config.yaml metrics.jsonl ${last:+checkpoints/$(basename "$last")}
}

# Phases run in the order given: `bash scripts/gpu_checks.sh nccl learn tests`.
phases=("${@:-info}")
[[ ${phases[*]} == all ]] && phases=(info throughput nccl learn tests)
for phase in "${phases[@]}"; do
  case $phase in
  info | mjlab | throughput | deterministic | loop | collectives | sac | recurrent | kernels | update | learn | nccl | faults | tests | scale | humanoid) $phase ;;
  *)
    echo "unknown phase $phase: all, info, mjlab, throughput, deterministic, loop, collectives, sac, recurrent, kernels, update, nccl, learn," \
      "faults, tests, scale or humanoid" >&2
    exit 2
    ;;
  esac
  echo "# $phase done after $(($(date +%s) - START)) s" | tee -a "$log"
done
