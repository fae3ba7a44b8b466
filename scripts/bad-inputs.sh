#!/usr/bin/env bash
# bad-inputs.sh: the table of docs/bad-inputs.md. tests/c/errtest.c makes
# erroneous calls on rank 0 under MPI_ERRORS_RETURN; this runs it natively
# on host buffers, under collmux on host buffers, and under collmux on
# device buffers (tests/fakecuda: memory the MPI cannot touch), with and
# without COLLMUX_CHECK, for each installed MPI, and writes the error class
# each case got side by side. TestBadInputSameErrors and
# TestDeviceBuffersStaged assert that the columns agree.
set -euo pipefail
cd "$(dirname "$0")/.."
LIB=${COLLMUX_LIB:-$PWD/build/libcollmux.so}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -shared -fPIC -O1 -o "$tmp/libcuda.so.1" tests/fakecuda/fakecuda.c
out=docs/bad-inputs.md
{
  echo "# Bad inputs: MPI's answers with and without collmux"
  echo
  echo "Made by \`scripts/bad-inputs.sh\` on $(date -u +%F) ($(nproc) cores, $(uname -r)). Rank 0 of 2 makes each erroneous call"
  echo "alone under \`MPI_ERRORS_RETURN\` (\`tests/c/errtest.c\`); each cell is the error class returned (\`ok\` for success)."
  echo "Device buffers are \`tests/fakecuda\` memory, which an MPI faults on: collmux must hand the call to"
  echo "MPI for its error before any device path or \`COLLMUX_CHECK\` communicates."
  echo
} > "$out"
for impl in openmpi mpich; do
  command -v mpicc.$impl >/dev/null || continue
  mpicc.$impl -O1 -o "$tmp/host" tests/c/errtest.c
  mpicc.$impl -O1 -DCOLLTEST_CUDA -Itests/fakecuda -o "$tmp/dev" tests/c/errtest.c -L"$tmp" -l:libcuda.so.1 -Wl,-rpath,"$tmp"
  # run N PROG VAR=VALUE...: the lines of one run into $tmp/out.N
  run() {
    local n=$1 prog=$2 env=()
    shift 2
    for kv in "$@"; do
      if [ $impl = openmpi ]; then env+=(-x "$kv"); else env+=(-genv "${kv%%=*}" "${kv#*=}"); fi
    done
    if [ $impl = openmpi ]; then
      timeout 120 mpirun.openmpi --oversubscribe -np 2 "${env[@]}" "$prog"
    else
      timeout 120 mpirun.mpich -n 2 "${env[@]}" "$prog"
    fi 2>/dev/null | grep 'rc=' > "$tmp/out.$n" || true
  }
  run 0 "$tmp/host"
  run 1 "$tmp/host" LD_PRELOAD="$LIB"
  run 2 "$tmp/dev" LD_PRELOAD="$LIB" LD_LIBRARY_PATH="$tmp"
  run 3 "$tmp/dev" LD_PRELOAD="$LIB" LD_LIBRARY_PATH="$tmp" COLLMUX_CHECK=1
  {
    echo "## $impl $(mpirun.$impl --version 2>&1 | grep -m1 -oE '[0-9]+\.[0-9]+\.[0-9]+')"
    echo
    echo "| call | native, host | collmux, host | collmux, device | collmux, device, COLLMUX_CHECK=1 |"
    echo "| --- | --- | --- | --- | --- |"
    paste -d'\t' "$tmp/out.0" "$tmp/out.1" "$tmp/out.2" "$tmp/out.3" | awk -F'\t' '{
      n = split($1, a, "rc="); call = a[1]; sub(/ +$/, "", call)
      row = "| " call
      for (i = 1; i <= 4; i++) { split($i, b, "class="); v = ($i ~ /rc=ok/) ? "ok" : b[2]; row = row " | " v }
      print row " |"
    }'
    echo
  } >> "$out"
done
cat "$out"
