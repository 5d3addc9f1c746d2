#!/bin/bash
# bench/gpu-run.sh — every check that needs a GPU, in one call on a lent device machine.
#
# The binaries are built here (a machine without a GPU, nvcc for sm_90) and carried in .gpu/:
#   .gpu/bins.tar.xz   the build's GPU test, example, tool and benchmark executables (strip -g),
#                      paths as under build/
#   .gpu/debs/*.deb    the host libraries the device image may lack (OpenBLAS, OpenMPI and its
#                      runtime); unpacked beside the system's files, never over one (cp -n)
# `bash bench/gpu-run.sh --bundle` makes .gpu/ here from a built build/ (CUDA enabled, set up
# with -Dnccl_suite=enabled, as a machine without a GPU leaves that suite out; the benchmarks
# built first: meson compile -C build redistribute_cuda redistribute_nccl step_kernels fill_cuda
# train_cuda_vs_torch; add
# `/.gpu/` to .git/info/exclude and name .gpu in the device call's carry: about 28 MB).
# On the device, from the repository root: bash bench/gpu-run.sh [seconds]; GPU_RUN_ONLY="step ..."
# runs only the steps named (in this script's order), GPU_RUN_SKIP="step ..." all but those. Each step has its own timeout,
# clipped to a common deadline (default 520 s) so that the call ends inside its limit. Logs go to
# /tmp/gpu-run/<step>.log, stdout line-buffered so that a step stopped by its timeout keeps what
# it printed; the device tool brings back at most 8 files, so $OUT gets one archive of them all
# (logs.tgz) and the table of steps, exit codes and seconds (summary.txt, printed last).
set -u
bins="tests/cuda/cuda_backend tests/cuda/cuda_layout_kernel tests/cuda/cuda_step_kernel tests/backends/backends_cuda
  tests/backends/backends_nccl tests/nccl/nccl_backend tests/training/training_train_cuda
  tests/pipeline/pipeline_cuda tests/pipeline/pipeline_nccl
  examples/spmd-demo examples/spmd-grad-demo tools/spmd-plan bench/redistribute_cuda
  bench/redistribute_nccl bench/step_kernels bench/fill_cuda bench/train_cuda_vs_torch"
if [ "${1:-}" = --bundle ]; then
  set -e
  rm -rf .gpu /tmp/gpu-bins && mkdir -p .gpu/debs /tmp/gpu-bins
  for b in $bins; do mkdir -p "/tmp/gpu-bins/$(dirname "$b")"; strip -g -o "/tmp/gpu-bins/$b" "build/$b"; done
  tar cJf .gpu/bins.tar.xz -C /tmp/gpu-bins .
  (cd .gpu/debs && apt-get download libopenblas0-pthread libgfortran5 libquadmath0 libopenmpi3 \
    openmpi-bin openmpi-common libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 \
    libevent-2.1-7 libpmix2 libfabric1 libucx0 libibverbs1 librdmacm1 libnl-3-200 \
    libnl-route-3-200 libpsm2-2 libpsm-infinipath1 libxnvctrl0)
  du -sh .gpu
  exit 0
fi
budget=${1:-520}
OUT=${OUT:-/tmp/gpu-out}
LOGS=/tmp/gpu-run
mkdir -p "$OUT" "$LOGS"
start=$(date +%s)
deadline=$((start + budget))
summary="$LOGS/summary.txt"
: >"$summary"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none

step() {  # name, timeout, command...
  local name=$1 to=$2
  shift 2
  local left=$((deadline - $(date +%s)))
  if [[ -n "${GPU_RUN_ONLY:-}" && " $GPU_RUN_ONLY " != *" $name "* ]] || [[ " ${GPU_RUN_SKIP:-} " == *" $name "* ]]; then
    printf '%-28s %6s %8s\n' "$name" "left" "-" >>"$summary"
    return
  fi
  if ((left < 5)); then
    printf '%-28s %6s %8s\n' "$name" "skip" "-" >>"$summary"
    return
  fi
  ((to > left)) && to=$left
  local t0 rc ms
  t0=$(date +%s%N)
  timeout -k 5 "$to" stdbuf -oL -eL "$@" >"$LOGS/$name.log" 2>&1
  rc=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  printf '%-28s %6s %5d.%01d\n' "$name" "$rc" $((ms / 1000)) $((ms % 1000 / 100)) >>"$summary"
  echo "== $name: exit $rc"
  tail -n 4 "$LOGS/$name.log"
}

# --- the binaries and the libraries ---------------------------------------------------------
mkdir -p build && tar xJf .gpu/bins.tar.xz -C build
if [ -d .gpu/debs ]; then
  rm -rf /tmp/debs && mkdir -p /tmp/debs
  for f in .gpu/debs/*.deb; do dpkg -x "$f" /tmp/debs; done
  cp -rn /tmp/debs/. / 2>/dev/null
  ldconfig
fi
libdirs=""
for l in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  if ! ldconfig -p | grep -q "$l "; then
    f=$(find /usr/local /opt /usr/lib -name "$l" 2>/dev/null | head -n 1)
    [ -n "$f" ] && libdirs="$libdirs:$(dirname "$f")"
  fi
done
export LD_LIBRARY_PATH="${libdirs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv
  for b in build/tests/backends/backends_nccl build/examples/spmd-demo build/tools/spmd-plan; do
    echo "$b:"; ldd "$b" | grep -E "not found|nccl|cublas|cudart|mpi|openblas"
  done
  python3 -c "import torch; print('torch', torch.__version__)"
} >"$LOGS/env.txt" 2>&1
cat "$LOGS/env.txt"

# --- correctness: the CUDA and NCCL tests of the suite ------------------------------------------
step cuda_layout_kernel 60 build/tests/cuda/cuda_layout_kernel
step cuda_step_kernel 60 build/tests/cuda/cuda_step_kernel
step cuda_backend 90 build/tests/cuda/cuda_backend
step suite-cuda 150 build/tests/backends/backends_cuda
step train-cuda 150 build/tests/training/training_train_cuda
# the pipeline executor with every rank on the GPU, and over NCCL with one process (issue 59)
step executor-cuda 90 build/tests/pipeline/pipeline_cuda
step executor-nccl 60 build/tests/pipeline/pipeline_nccl
# a training step as one graph against PyTorch eager and torch.compile on this GPU (issue 60);
# the script is this checkout's, not the build machine's folder
step train_cuda_vs_torch 300 env PYTHONUNBUFFERED=1 SPMD_BENCH_SOURCE_DIR="$PWD/bench" build/bench/train_cuda_vs_torch
step nccl_backend 60 build/tests/nccl/nccl_backend
step suite-nccl 120 build/tests/backends/backends_nccl
step spmd-demo-cuda 60 build/examples/spmd-demo --backend cuda
step spmd-grad-demo-cuda 60 build/examples/spmd-grad-demo --backend cuda
step spmd-plan-run-cuda 90 python3 tests/cli/test_plan_run_cuda.py build/tools/spmd-plan

# --- speed: spmd's redistributes against LocalTensor on the same GPU; NCCL's transport ----------
step localtensor 150 env PYTHONUNBUFFERED=1 python3 bench/localtensor_cuda.py --quick
grep -E '^(8|2x4) ' "$LOGS/localtensor.log" >"$LOGS/torch.txt"
step redistribute_cuda 150 build/bench/redistribute_cuda --torch "$LOGS/torch.txt"
step redistribute_nccl 60 build/bench/redistribute_nccl
step redistribute_cuda_quick 60 build/bench/redistribute_cuda --quick
# small steps' launches over 8 and 32 blocks at least, against the default just above
step redistribute_cuda_spread 120 sh -c 'for b in 8 32; do SPMD_CUDA_SMALL_STEP_BLOCKS=$b build/bench/redistribute_cuda --quick; done'
step step_kernels 120 sh -c 'build/bench/step_kernels 256 && build/bench/step_kernels 1024 && build/bench/step_kernels --kib 4 && build/bench/step_kernels --kib 64 && for k in 256 1024 4096 16384; do build/bench/step_kernels --kib $k "S(0)->S(1)"; done'
step fill_cuda 60 build/bench/fill_cuda

# --- compute-sanitizer over the suite and the training test -------------------------------------
# (racecheck over the whole CUDA suite takes more than 200 s on an H200: the smaller programs.
# NCCL probes its own kernels at ncclCommInitRank with cudaFuncGetAttributes, which reports
# cudaErrorNoKernelImageForDevice for architectures it was not built for: API errors are not
# reported for the NCCL program; memory errors are.)
cs="compute-sanitizer --error-exitcode 9 --print-limit 20"
step memcheck-suite-cuda 200 $cs --tool memcheck build/tests/backends/backends_cuda
step memcheck-train-cuda 150 $cs --tool memcheck build/tests/training/training_train_cuda
step memcheck-suite-nccl 120 $cs --tool memcheck --report-api-errors no build/tests/backends/backends_nccl
step racecheck-cuda-backend 60 $cs --tool racecheck build/tests/cuda/cuda_backend
step racecheck-spmd-demo 60 $cs --tool racecheck build/examples/spmd-demo --backend cuda
step racecheck-grad-demo 60 $cs --tool racecheck build/examples/spmd-grad-demo --backend cuda
step racecheck-nccl-backend 60 $cs --tool racecheck build/tests/nccl/nccl_backend
step racecheck-train-cuda 120 $cs --tool racecheck build/tests/training/training_train_cuda

# --- profiles: only when GPU_RUN_ONLY names them ---------------------------------------------
# ncu's sections for one launch of a kernel (H200.md: --clock-control none on that machine).
# The SASS needs no GPU: `pip download nvidia-cuda-cuobjdump` has a cuobjdump for the objects
# built here (bench/RESULTS.md). fill_cuda_base: a fill_cuda built before a change, carried in
# .gpu/ by hand, to compare in the same call.
profile() {  # as step, but only when named
  [[ " ${GPU_RUN_ONLY:-} " == *" $1 "* ]] && step "$@"
}
ncu="ncu --clock-control none --kernel-name-base demangled -c 1 --section SpeedOfLight --section ComputeWorkloadAnalysis
  --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats --section InstructionStats
  --section SourceCounters --section MemoryWorkloadAnalysis"
profile ncu-uniform 60 $ncu -k regex:'random_fill' build/bench/fill_cuda 256 'rand (uniform)'
profile ncu-normal 60 $ncu -k regex:'random_fill' build/bench/fill_cuda 256 'randn'
profile ncu-arange 60 $ncu -k regex:'generate<float>' build/bench/fill_cuda 256 'arange'
profile ncu-tile 60 $ncu -k regex:'step_tile_kernel' build/bench/step_kernels 256
profile ncu-small-pr 60 $ncu -k regex:'step_wide_(inline_)?kernel' build/bench/step_kernels --kib 4 'P->R'
profile fill_cuda_base 60 .gpu/fill_cuda_base
cp "$summary" "$OUT/summary.txt"
tar czf "$OUT/logs.tgz" -C "$LOGS" .
echo "== summary (step, exit code, seconds; total $(($(date +%s) - start)) s)"
cat "$summary"
