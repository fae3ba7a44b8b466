#!/usr/bin/env bash
# host_ab.sh MPI MODE ROUNDS LIB...: one row of bench/host_latency.sh
# (MODE: allreduce, iallreduce or pingpong from C, fortran for the
# Fortran allreduce; 2 ranks, 8 bytes) for several
# preloaded libraries in one run: each round runs the benchmark natively,
# then with each LIB preloaded, each against the native run just before
# it. Prints, per library, the median of its ratios to native with the 95%
# confidence interval of that median (as host_latency.sh does). For
# controls: which property of a preloaded library moves a row
# (docs/results/host-passthrough-2026-12-01-aside.md).
#   bench/host_ab.sh mpich iallreduce 61 build/libcollmux.so /tmp/libbare.so
set -euo pipefail
cd "$(dirname "$0")/.."
impl=${1:?usage: host_ab.sh MPI MODE ROUNDS LIB...} mode=${2:?} rounds=${3:?}
shift 3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d /tmp/collmux-ab-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if [ $mode = fortran ]; then
  mpifort.$impl -O2 -o "$tmp/lat" bench/allreduce_latency.f90
else
  mpicc.$impl -O2 -o "$tmp/lat" bench/host_latency.c
fi
launch() {
  if [ $impl = openmpi ]; then
    mpirun.openmpi -np 2 --bind-to core ${1:+-x LD_PRELOAD=$1} "$tmp/lat" $mode
  else
    mpirun.mpich -n 2 -bind-to core ${1:+-genv LD_PRELOAD $1} "$tmp/lat" $mode
  fi
}
libs=()
for lib in "$@"; do libs+=("$(realpath "$lib")"); done
for r in $(seq "$rounds"); do
  for i in "${!libs[@]}"; do
    a=$(launch "") b=$(launch "${libs[$i]}")
    awk -v a="$a" -v b="$b" 'BEGIN {print b / a}' >> "$tmp/r.$i"
  done
done
. bench/ratios.sh # median, median_ci
for i in "${!libs[@]}"; do
  printf '%s %s, %s: %.3f (95%% interval %s, %d rounds)\n' "$impl" "$mode" "${libs[$i]}" "$(median < "$tmp/r.$i")" \
    "$(median_ci < "$tmp/r.$i")" "$rounds"
done
