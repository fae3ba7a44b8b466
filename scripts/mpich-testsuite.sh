#!/usr/bin/env bash
# mpich-testsuite.sh SRC [OUT]: MPICH's own test suite (test/mpi) on each
# installed MPI, natively and under collmux, every test's verdict compared
# between the two runs: a large real suite's check that collmux is
# transparent. The suite is not part of collmux: SRC is an MPICH source
# tree (e.g. `git archive v4.0.2` of github.com/pmodels/mpich: its test/mpi,
# confdb and maint/version.m4 are used), which needs autoconf, automake and
# libtool to configure.
#
# MPIS (default "openmpi mpich"): compiled with mpicc.<name> and launched
# with mpirun.openmpi / mpiexec.mpich. DIRS (default "attr coll comm
# datatype errhan group info init pt2pt"): the suite's folders. MAXNP
# (default 4) and MPITEST_TIMEOUT (default 60 s a test) go to runtests.
# Without Fortran, C++, dtpools, spawn, ROMIO or performance tests; tests
# that need what the MPI lacks (MPI 4.0 functions under Open MPI 4.1) fail
# to build and fail in both runs alike. Writes OUT/<mpi>-{native,collmux}.tap
# and OUT/summary.txt; exits 1 if a verdict differs (a test that flips
# natively too, under oversubscription, shows up here: run it again).
set -uo pipefail
cd "$(dirname "$0")/.."
SRC=$(realpath "${1:?usage: mpich-testsuite.sh SRC [OUT]}")
OUT=$(realpath -m "${2:-${OUT:-/tmp/collmux-mpich-tests}}")
LIB=$PWD/build/libcollmux.so
HERE=$PWD
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export MPITEST_TIMEOUT=${MPITEST_TIMEOUT:-60}
[ -f "$SRC/test/mpi/configure.ac" ] || { echo "mpich-testsuite.sh: no test/mpi in $SRC" >&2; exit 2; }
mkdir -p "$OUT"
W=$OUT/suite
if [ ! -x "$W/test/mpi/configure" ]; then
  rm -rf "$W" && mkdir -p "$W/test" && cp -r "$SRC/test/mpi" "$W/test/mpi" || exit 1
  cd "$W/test/mpi" || exit 1
  cp -r "$SRC/confdb" confdb && cp -r "$SRC/confdb" dtpools/confdb && cp "$SRC/maint/version.m4" . || exit 1
  # dtpools, which the suite's own library needs, calls MPI_Type_hvector
  # and MPI_Type_hindexed, removed in MPI 3.0 (Open MPI 4.1 has neither):
  # their successors take the same arguments
  sed -i 's/MPI_Type_h\(vector\|indexed\)(/MPI_Type_create_h\1(/' dtpools/src/dtpools_custom.c
  # written by MPICH's binding generator in a full source build
  [ -f include/mtest_mpix.h ] || printf '#ifndef MTEST_MPIX_H_INCLUDED\n#define MTEST_MPIX_H_INCLUDED\n#endif\n' > include/mtest_mpix.h
  { sh autogen.sh && (cd dtpools && autoreconf -fi) && autoreconf -fi; } > "$OUT/autogen.log" 2>&1 ||
    { tail -20 "$OUT/autogen.log"; exit 1; }
  cd "$HERE"
fi
read -r -a dirs <<<"${DIRS:-attr coll comm datatype errhan group info init pt2pt}"
bad=0
for mpi in ${MPIS:-openmpi mpich}; do
  command -v "mpicc.$mpi" > /dev/null || { echo "$mpi: not installed, skipped" | tee -a "$OUT/summary.txt"; continue; }
  case $mpi in
  openmpi) run=mpirun.openmpi args=--oversubscribe pre="-x LD_PRELOAD=$LIB" ;;
  mpich) run=mpiexec.mpich args= pre="-genv LD_PRELOAD $LIB" ;;
  esac
  B=$OUT/build-$mpi
  if [ ! -f "$B/Makefile" ]; then
    mkdir -p "$B" && (cd "$B" && MPICC=mpicc.$mpi "$W/test/mpi/configure" MPICC=mpicc.$mpi MPIEXEC=$run --enable-fortran=no \
      --disable-cxx --disable-dtpools --disable-spawn --disable-romio --disable-perftest) > "$OUT/configure-$mpi.log" 2>&1 ||
      { tail -20 "$OUT/configure-$mpi.log"; exit 1; }
  fi
  for d in util "${dirs[@]}"; do
    (cd "$B/$d" && make -k -j"$(nproc)") >> "$OUT/make-$mpi.log" 2>&1 # what does not build fails in both runs
  done
  printf '%s\n' "${dirs[@]}" > "$B/testlist" # runtests reads the same name in every folder
  for w in native collmux; do
    a=$args
    [ $w = collmux ] && a="$args $pre"
    (cd "$B" && MPITEST_MPIEXECARG="$a" ./runtests -srcdir="$W/test/mpi" -tests=testlist -mpiexec=$run \
      -maxnp="${MAXNP:-4}" -tapfile="$OUT/$mpi-$w.tap") > "$OUT/$mpi-$w.out" 2>&1
  done
  python3 - "$OUT/$mpi-native.tap" "$OUT/$mpi-collmux.tap" "$mpi" <<'EOF' | tee -a "$OUT/summary.txt" || bad=1
import collections, re, sys
def verdicts(tap):  # (test and ranks, its n-th run in the list) -> ok / not ok
    seen, out = collections.Counter(), {}
    for line in open(tap):
        m = re.match(r'^(not ok|ok)\s+-\s+(\S+ \d+)', line)
        if m:
            seen[m.group(2)] += 1
            out[(m.group(2), seen[m.group(2)])] = m.group(1)
    return out
a, b = verdicts(sys.argv[1]), verdicts(sys.argv[2])
both = [k for k in a if k in b]
diff = [k for k in both if a[k] != b[k]]
print(f"{sys.argv[3]}: {len(a)} tests natively, {len(b)} under collmux, {len(both)} in both; "
      f"ok {sum(a[k] == 'ok' for k in both)} natively, {sum(b[k] == 'ok' for k in both)} under collmux; {len(diff)} differ")
for k in diff:
    print(f"  {k[0]}: {a[k]} natively, {b[k]} under collmux")
sys.exit(1 if diff or not both or len(a) != len(b) else 0)
EOF
done
exit $bad
