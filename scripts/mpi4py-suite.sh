#!/usr/bin/env bash
# mpi4py-suite.sh TESTS [OUT]: mpi4py's own test suite under collmux, each
# rank's verdict on every test compared with the native run's: a large
# real program's check that collmux is transparent. mpi4py is not part of
# collmux: TESTS is the test/ folder of the mpi4py release that PYTHON
# imports (from its source tree, e.g. `git archive 3.1.4 test` of
# github.com/mpi4py/mpi4py for Debian 12's python3-mpi4py).
#
# Open MPI's mpirun (MPIRUN, default mpirun.openmpi): each rank's output
# goes to a file of its own (--output-filename). NP (default "1 2 3 4"):
# the rank counts. LIMIT: seconds a run may take (default 900; the rest
# of a run cut short is missing from its verdicts). RUNTESTS: arguments for
# runtests.py besides -v (default: leave out spawn and dynamic process
# tests, which start processes the preload does not reach). NATIVE=0: no
# native run, and the verdicts must then all be ok, skipped or expected
# failures (the GPU machine with RUNTESTS="--cupy ...": there a device
# array crashes the native MPI, which is not CUDA-aware). COLLMUX_* in the
# environment go to the collmux runs (e.g. COLLMUX_CHECK=1). Writes each
# run's per-rank output and verdict lists into OUT and prints a line per
# rank count; exits 1 if any rank's verdicts differ, or the exit statuses
# (NATIVE=0: if a test failed or the run did not exit 0; the failures by
# kind go to OUT/collmux.NP.rankR.kinds.txt).
#
# CUPY_FILL=wrap: run a copy of TESTS (in OUT/test) whose CuPy arrays,
# filled with a negative integer or made from a list holding one, wrap it
# into an unsigned type by NumPy's cast (-1 is 255 in uint8). CuPy 14
# raises OverflowError, and the suite then fails the test on the one rank
# that fills (a gather's root, say) while its peers enter the collective
# and wait for it: at 2 ranks or more the run hangs, through no fault of
# collmux.
set -uo pipefail
cd "$(dirname "$0")/.."
TESTS=$(realpath "${1:?usage: mpi4py-suite.sh TESTS [OUT]}")
OUT=$(realpath -m "${2:-${OUT:-/tmp/collmux-mpi4py}}")
PYTHON=${PYTHON:-/usr/bin/python3}
MPIRUN=${MPIRUN:-mpirun.openmpi}
LIB=$PWD/build/libcollmux.so
read -r -a ARGS <<<"${RUNTESTS:---no-builddir -e spawn -e dynproc}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -f "$TESTS/runtests.py" ] || { echo "mpi4py-suite.sh: no runtests.py in $TESTS" >&2; exit 2; }
mkdir -p "$OUT"
if [ "${CUPY_FILL:-}" = wrap ]; then
  [ "$OUT/test" != "$TESTS" ] || { echo "mpi4py-suite.sh: CUPY_FILL=wrap copies TESTS to OUT/test, which is TESTS" >&2; exit 2; }
  rm -rf "$OUT/test" && cp -r "$TESTS" "$OUT/test" && TESTS=$OUT/test
  "$PYTHON" - "$TESTS/arrayimpl.py" <<'PY' || { echo "mpi4py-suite.sh: CUPY_FILL=wrap: cannot patch $TESTS/arrayimpl.py" >&2; exit 2; }
import sys
path = sys.argv[1]
text = open(path).read()
cls = text.index("class GPUArrayCuPy")


def swap(text, old, new):  # old's first place in the CuPy class, made new
    at = text.index(old, cls)
    return text[:at] + new + text[at + len(old):]


text = swap(text, "self.array.fill(arg)",
            "self.array.fill(numpy.asarray(arg).astype(typecode)[()] if isinstance(arg, int) and arg < 0 else arg)")
# and a list of them ([-1] * 5 in test_cco_buf_inter)
text = swap(text, "self.array[:] = cupy.asarray(arg, typecode)",
            "self.array[:] = cupy.asarray(numpy.asarray(arg).astype(typecode) if isinstance(arg, list) "
            "and any(isinstance(v, int) and v < 0 for v in arg) else cupy.asarray(arg, typecode))")
open(path, "w").write(text)
PY
fi
X=(-x LD_PRELOAD="$LIB")
for v in $(env | grep -o '^COLLMUX_[A-Z_]*'); do X+=(-x "$v"); done
# verdicts DIR NP: one file per rank, a line per test ("name ... verdict"),
# a skip's reason dropped, sorted (the order is runtests.py's)
verdicts() {
  for r in $(seq 0 $(($2 - 1))); do
    grep -E ' \.\.\. ' "$1/1/rank.$r/stderr" | sed -E "s/^\[[^]]*\] ?//; s/skipped '.*'/skipped/" | sort > "$1.rank$r.txt"
  done
}
# kinds STDERR: the failures of a run by kind: test module, the last line
# of the traceback (digits as N), the array backend the subtest names,
# with a count each, most first (NATIVE=0, where the failures cannot be
# compared with a native run's: CuPy's, collmux's refusals, collmux's faults)
kinds() {
  "$PYTHON" - "$1" <<'PY'
import collections, re, sys
text = open(sys.argv[1], errors="replace").read()
count = collections.Counter()
for block in re.split(r"\n={50,}\n", text):
    m = re.match(r"(?:ERROR|FAIL): \w+ \((\w+)\.[\w.]+\)(.*)", block)
    if not m:
        continue
    lines = [l for l in block.strip().split("\n") if l and not l.startswith(" ")]
    backend = re.search(r"backend='([^']+)'", m.group(2))
    count[(m.group(1), re.sub(r"(?<![A-Za-z])-?\d+", "N", lines[-1])[:100], backend.group(1) if backend else "-")] += 1
for (module, last, backend), n in count.most_common():
    print(f"{n} | {module} | {last} | {backend}")
PY
}
bad=0
for np in ${NP:-1 2 3 4}; do
  runs=(collmux)
  [ "${NATIVE:-1}" = 1 ] && runs=(native collmux)
  declare -A rc=() # exit status by run
  for w in "${runs[@]}"; do
    pre=()
    [ $w = collmux ] && pre=("${X[@]}")
    rm -rf "$OUT/$w.$np"
    timeout "${LIMIT:-900}" $MPIRUN --oversubscribe -np "$np" --output-filename "$OUT/$w.$np" "${pre[@]}" \
      "$PYTHON" "$TESTS/runtests.py" -v "${ARGS[@]}" > /dev/null 2>&1
    rc[$w]=$?
    verdicts "$OUT/$w.$np" "$np"
  done
  # a crash cuts the verdict lists short; the exit status says so too
  line="$np ranks: exit status ${rc[native]:+${rc[native]} native, }${rc[collmux]} collmux;"
  [ "${rc[collmux]}" = "${rc[native]:-0}" ] || bad=1
  for r in $(seq 0 $((np - 1))); do
    c=$OUT/collmux.$np.rank$r.txt
    n=$(wc -l < "$c") ok=$(grep -c ' ok$' "$c") fail=$(grep -cE ' (FAIL|ERROR)$' "$c")
    if [ "${NATIVE:-1}" = 1 ]; then
      d=$(diff "$OUT/native.$np.rank$r.txt" "$c" | grep -c '^[<>]')
      line+=" rank $r $n tests, $ok ok, $d differ from native;"
      [ "$d" = 0 ] && [ "$n" -gt 0 ] || bad=1
    else
      line+=" rank $r $n tests, $ok ok, $fail failed;"
      [ "$fail" = 0 ] && [ "$n" -gt 0 ] || bad=1
      kinds "$OUT/collmux.$np/1/rank.$r/stderr" > "$OUT/collmux.$np.rank$r.kinds.txt"
    fi
  done
  echo "$line" | tee -a "$OUT/summary.txt"
done
exit $bad
