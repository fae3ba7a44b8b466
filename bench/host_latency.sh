#!/usr/bin/env bash
# Pass-through overhead on 2 ranks, native and under collmux (no
# statistics: the pass-through path), alternating ROUNDS times in one run,
# for each installed MPI: an 8-byte MPI_Allreduce from C and from Fortran,
# and from C an 8-byte MPI_Iallreduce + MPI_Wait and an 8-byte ping-pong
# (bench/host_latency.c). Writes a dated table to docs/results/ (or
# $OUT_DIR) and prints it.
set -euo pipefail
cd "$(dirname "$0")/.."
LIB=${COLLMUX_LIB:-$PWD/build/libcollmux.so}
ROUNDS=${ROUNDS:-9}
OUT_DIR=${OUT_DIR:-docs/results}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

out="$OUT_DIR/host-passthrough-$(date +%F).md"
{
  echo "# Pass-through overhead: 8-byte calls on host memory, 2 ranks"
  echo
  echo "Date: $(date -u +%FT%TZ). Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r)."
  echo "Each round runs the benchmark natively and then with collmux preloaded (COLLMUX_STATS unset: the pass-through path); a run's figure is the median over 50 batches of 2000 calls. $ROUNDS rounds; the ratio is the median of the rounds' ratios (each compares two runs made one after the other), the times are the medians over rounds."
  echo
  echo "| MPI, call | native median (µs) | collmux median (µs) | ratio | target |"
  echo "| --- | --- | --- | --- | --- |"
} > "$tmp/table"

for impl in openmpi mpich; do
  for lang in C C-iallreduce C-pingpong Fortran; do
    mode=allreduce
    case $lang in C-*) mode=${lang#C-} ;; esac
    if [ $lang != Fortran ]; then
      command -v mpicc.$impl >/dev/null || continue
      mpicc.$impl -O2 -o "$tmp/lat" bench/host_latency.c
    else
      command -v mpifort.$impl >/dev/null && command -v gfortran >/dev/null || continue
      mpifort.$impl -O2 -o "$tmp/lat" bench/allreduce_latency.f90
    fi
    if [ $impl = openmpi ]; then
      launch() { mpirun.openmpi -np 2 --bind-to core "$@" "$tmp/lat" $mode; }
      pre=(-x LD_PRELOAD="$LIB")
    else
      launch() { mpirun.mpich -n 2 -bind-to core "$@" "$tmp/lat" $mode; }
      pre=(-genv LD_PRELOAD "$LIB")
    fi
    : > "$tmp/n"; : > "$tmp/c"; : > "$tmp/r"
    for r in $(seq "$ROUNDS"); do
      a=$(launch); b=$(launch "${pre[@]}")
      echo "$a" >> "$tmp/n"; echo "$b" >> "$tmp/c"
      awk -v a="$a" -v b="$b" 'BEGIN {print b / a}' >> "$tmp/r"
    done
    n=$(median < "$tmp/n"); c=$(median < "$tmp/c")
    ratio=$(median < "$tmp/r" | awk '{printf "%.3f", $1}')
    echo "| $impl $(mpirun.$impl --version 2>&1 | grep -m1 -oE '[0-9]+\.[0-9]+\.[0-9]+'), $lang ($mode) | $n | $c | $ratio | ≤ 1.03 |" >> "$tmp/table"
  done
done
mkdir -p "$OUT_DIR"
cp "$tmp/table" "$out"
cat "$out"
