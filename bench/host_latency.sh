#!/usr/bin/env bash
# Pass-through overhead on 2 ranks, native and under collmux (no
# statistics: the pass-through path), alternating ROUNDS times in one run,
# for each installed MPI: an 8-byte MPI_Allreduce from C and from Fortran,
# and from C an 8-byte MPI_Iallreduce + MPI_Wait and an 8-byte ping-pong
# (bench/host_latency.c). Writes a dated table to docs/results/ (or
# $OUT_DIR) and prints it.
#
#   bench/host_latency.sh            this machine's MPIs (make bench):
#                                    host-passthrough-DATE.md
#   bench/host_latency.sh --worlds   the same inside the chroots of
#                                    scripts/mpi-world.sh (make bench-world):
#                                    the Debian 13 world (Open MPI 5, MPICH
#                                    4.2) and the MPI-5 ABI world (MPICH 5.0
#                                    through libmpi_abi), into one table,
#                                    host-passthrough-worlds-DATE.md
#
# MPIS names the MPIs to try (default "openmpi mpich"; one not installed is
# left out): openmpi and mpich compile with mpicc.<name>, mpi-abi with
# `mpicc.mpich -mpi-abi` (the MPI-5 standard ABI) and launches with
# mpirun.mpich. ROWS=FILE appends the table's rows to FILE instead of
# writing the table (how --worlds collects the worlds' rows).
set -euo pipefail
cd "$(dirname "$0")/.."
LIB=${COLLMUX_LIB:-$PWD/build/libcollmux.so}
ROUNDS=${ROUNDS:-9}
OUT_DIR=${OUT_DIR:-docs/results}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# under /tmp: the worlds see the host's /tmp (and the repository), so the
# rows a world writes come back here
tmp=$(mktemp -d /tmp/collmux-bench-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

. bench/ratios.sh # median, median_ci

header() { # $1: where the MPIs were
  echo "# Pass-through overhead: 8-byte calls on host memory, 2 ranks"
  echo
  echo "Date: $(date -u +%FT%TZ). Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r). $1"
  echo "Each round runs the benchmark natively and then with collmux preloaded (COLLMUX_STATS unset: the pass-through path); a run's figure is the median over 50 batches of 2000 calls. $ROUNDS rounds; the ratio is the median of the rounds' ratios (each compares two runs made one after the other), with its 95% confidence interval (order statistics of the rounds' ratios); the times are the medians over rounds. A target is met only where the interval's top is within it."
  echo
  echo "| MPI, call | native median (µs) | collmux median (µs) | ratio | 95% interval | target |"
  echo "| --- | --- | --- | --- | --- | --- |"
}

if [ "${1:-}" = --worlds ]; then
  world=scripts/mpi-world.sh
  out="$OUT_DIR/host-passthrough-worlds-$(date +%F).md"
  : > "$tmp/rows"
  where="MPIs in the chroots of scripts/mpi-world.sh (the library built on the host, preloaded there):"
  # the table says which world each row comes from: an MPI's version
  # alone does not say which glibc and compiler it was built with
  if $world path >/dev/null; then
    where="$where Debian 13 (Open MPI, MPICH 4.2);"
    $world run -- env ROUNDS="$ROUNDS" ROWS="$tmp/rows" MPIS="openmpi mpich" COLLMUX_LIB="$LIB" bench/host_latency.sh
  else
    echo "host_latency: no Debian 13 world (scripts/mpi-world.sh build): skipped" >&2
    echo "| Debian 13 world | skipped: not built | | | | |" >> "$tmp/rows"
  fi
  if $world --abi path >/dev/null; then
    where="$where Debian sid (MPICH 5.0 built with --enable-mpi-abi, programs compiled with \`mpicc.mpich -mpi-abi\`, running on libmpi_abi.so.1)."
    $world --abi run -- env ROUNDS="$ROUNDS" ROWS="$tmp/rows" MPIS="mpi-abi" COLLMUX_LIB="$LIB" bench/host_latency.sh
  else
    echo "host_latency: no MPI-5 ABI world (scripts/mpi-world.sh --abi build): skipped" >&2
    echo "| MPI-5 ABI world | skipped: not built | | | | |" >> "$tmp/rows"
  fi
  mkdir -p "$OUT_DIR"
  { header "$where"; cat "$tmp/rows"; } > "$out"
  cat "$out"
  exit 0
fi

rows=${ROWS:-$tmp/rows}
for impl in ${MPIS:-openmpi mpich}; do
  cc=mpicc.$impl fc=mpifort.$impl run=mpirun.$impl ccflags=() label=$impl
  if [ $impl = mpi-abi ]; then
    cc=mpicc.mpich fc="" run=mpirun.mpich ccflags=(-mpi-abi) label="mpi-abi (MPICH"
  fi
  command -v $cc >/dev/null && command -v $run >/dev/null || continue
  # awk reads to the end: grep -m1 stopping early could kill the launcher
  # with SIGPIPE, which pipefail turns into this script's exit
  version=$($run --version 2>&1 | awk 'match($0, /[0-9]+\.[0-9]+\.[0-9]+/) && !v {v = substr($0, RSTART, RLENGTH)} END {print v}')
  [ $impl = mpi-abi ] && version="$version, libmpi_abi)"
  for lang in C C-iallreduce C-pingpong Fortran; do
    mode=allreduce
    case $lang in C-*) mode=${lang#C-} ;; esac
    if [ $lang != Fortran ]; then
      $cc "${ccflags[@]}" -O2 -o "$tmp/lat" bench/host_latency.c
    elif [ -z "$fc" ]; then
      # MPICH's mpifort has no -mpi-abi (it hands the flag to gfortran and
      # links libmpich): there is no Fortran binding of the standard ABI
      echo "| $label $version, Fortran | skipped: no Fortran binding for the standard ABI | | | | |" >> "$rows"
      continue
    elif ! command -v $fc >/dev/null || ! command -v gfortran >/dev/null; then
      echo "| $label $version, Fortran | skipped: no $fc or gfortran | | | | |" >> "$rows"
      continue
    else
      $fc -O2 -o "$tmp/lat" bench/allreduce_latency.f90
    fi
    if [ $impl = openmpi ]; then
      raw=()
      # Open MPI 5's launcher can send the start of a stdout line out on
      # stderr on a loaded machine (see run() in tests/harness_test.go)
      case $version in [5-9].*) raw=(--output :raw) ;; esac
      launch() { $run -np 2 --bind-to core "${raw[@]}" "$@" "$tmp/lat" $mode; }
      pre=(-x LD_PRELOAD="$LIB")
    else
      launch() { $run -n 2 -bind-to core "$@" "$tmp/lat" $mode; }
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
    echo "| $label $version, $lang ($mode) | $n | $c | $ratio | $(median_ci < "$tmp/r") | ≤ 1.03 |" >> "$rows"
  done
done
[ -n "${ROWS:-}" ] && exit 0
out="$OUT_DIR/host-passthrough-$(date +%F).md"
mkdir -p "$OUT_DIR"
{ header ""; cat "$rows"; } > "$out"
cat "$out"
