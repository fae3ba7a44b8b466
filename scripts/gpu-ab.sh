#!/usr/bin/env bash
# Compares builds or settings of collmux (variants) on the GPU machine, as
# docs/results/gpu-2026-11-30-* did: gpu_bench runs each variant in its own
# process against NCCL, the variants taking turns for ROUNDS rounds with the
# order rotated each round, and bench/variant_report.py tabulates each
# variant's speed-up over NCCL measured in the same process (absolute times
# shift by a microsecond or more between processes on the H200 VM).
#
# usage: OUT=dir scripts/gpu-ab.sh ROUNDS NAME=LIB[:VAR=VALUE...] ...
#   e.g. scripts/gpu-ab.sh 4 head=build/v/head/libcollmux.so \
#          two=build/libcollmux.so:COLLMUX_FUSED_ALGO=twoshot
# AB_COLL (default allreduce) and AB_MAX (bytes, default 1048576) choose
# what gpu_bench measures; the policy is fused wherever it serves.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n 2,15p "$0"; exit 2; }
OUT=${OUT:-/tmp/collmux-ab}
CUDA=${CUDA:-/usr/local/cuda}
rounds=$1
shift
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GPU_BENCH_ONLY=${AB_COLL:-allreduce}
B=$(mktemp -d)
mpicc -O2 -I$CUDA/include -o $B/gpu_bench bench/gpu_bench.c -L$CUDA/lib64 -lcudart -lnccl -ldl
names=()
for v in "$@"; do
  names+=("${v%%=*}")
  rm -f "$OUT/bench-${v%%=*}.csv"
done
n=$#
for ((r = 0; r < rounds; r++)); do
  for ((k = 0; k < n; k++)); do
    i=$(((r + k) % n))
    spec=${*:i+1:1}
    name=${spec%%=*} rest=${spec#*=}
    IFS=: read -r -a parts <<< "$rest"
    args=(-x LD_PRELOAD="$(realpath "${parts[0]}")" -x NCCL_NVLS_ENABLE -x GPU_BENCH_ONLY)
    for kv in "${parts[@]:1}"; do args+=(-x "$kv"); done
    timeout 300 mpirun -np "$(nvidia-smi -L | wc -l)" "${args[@]}" $B/gpu_bench "${AB_MAX:-1048576}" "fused=*:cuda:*:fused" \
      >> "$OUT/bench-$name.csv" 2>> "$OUT/err-$name.txt"
  done
done
python3 bench/variant_report.py --coll "$GPU_BENCH_ONLY" "$OUT" "${names[@]}" | tee "$OUT/ab.md"
