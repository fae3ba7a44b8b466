#!/usr/bin/env bash
# The main job: a plain MPI program under mpirun with collmux preloaded,
# printing at finalize what was dispatched where (COLLMUX_STATS=1).
set -euo pipefail
cd "$(dirname "$0")/.."
NP=${NP:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
LIB=$PWD/build/libcollmux.so
if command -v mpicc.openmpi >/dev/null; then
  mpicc.openmpi -O2 -o build/demo examples/demo.c
  # COLLMUX_LOG passes through when set (e.g. COLLMUX_LOG=decisions make demo)
  exec mpirun.openmpi --oversubscribe -np "$NP" -x LD_PRELOAD="$LIB" -x COLLMUX_STATS=1 ${COLLMUX_LOG:+-x COLLMUX_LOG} build/demo
fi
mpicc.mpich -O2 -o build/demo examples/demo.c
exec mpirun.mpich -n "$NP" -genv LD_PRELOAD "$LIB" -genv COLLMUX_STATS 1 build/demo
