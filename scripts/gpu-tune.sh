#!/usr/bin/env bash
# Tunes the GPU machine and checks the table, from a libcollmux.so and
# collmux tool built elsewhere (build/ carried along):
#  1. collmux tune: every backend timed at every size in one interleaved
#     gpu_bench run, winners per size range, table and plots;
#     OVERLAP=1: also every backend beside a reference GEMM stream (tune
#     --overlap, overlap=yes rules); OPS=1: also every form of the fused
#     GEMV + all-reduce (tune --ops); their CSVs land in $OUT too;
#  2. collmux check: gpu_bench with the tuned policy and every backend
#     alone, again in one run (policies switched with collmux_set_rules),
#     and the table against the best backend alone, per size and summed.
# Everything lands in $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/collmux-tune}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
CUDA=${CUDA:-/usr/local/cuda}
LIB=$PWD/build/libcollmux.so
NGPU=$(nvidia-smi -L | wc -l)
MAX=${MAX:-1073741824}
STAGED_MAX=${STAGED_MAX:-16777216}
B=$(mktemp -d)
mpicc -O2 -I"$CUDA/include" -o "$B/gpu_bench" bench/gpu_bench.c -L"$CUDA/lib64" -lcudart -lnccl -ldl

build/collmux topo > "$OUT/topo.txt"
EXTRA=()
[ "${OVERLAP:-0}" = 1 ] && EXTRA+=(--overlap --save-overlap-csv "$OUT/overlap.csv")
[ "${OPS:-0}" = 1 ] && EXTRA+=(--ops --save-ops-csv "$OUT/fusedops.csv")
build/collmux tune --bench "$B/gpu_bench" --lib "$LIB" --max-bytes "$MAX" --staged-max-bytes "$STAGED_MAX" \
  --out "$OUT/tuning.json" --plots "$OUT" "${EXTRA[@]}" | tee "$OUT/tune.txt"
timeout 590 build/collmux check --table "$OUT/tuning.json" --bench "$B/gpu_bench" --lib "$LIB" --max-bytes "$MAX" \
  --staged-max-bytes "$STAGED_MAX" --save-csv "$OUT/policies.csv" | tee "$OUT/tuned-check.md"
