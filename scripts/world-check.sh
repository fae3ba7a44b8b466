#!/bin/sh
# world-check.sh: run inside the Debian 13 MPI world (scripts/mpi-world.sh run
# -- scripts/world-check.sh [NP]): compile colltest, nbtest and p2ptest with
# each MPI's mpicc, run each natively and under collmux (LD_PRELOAD of
# build/libcollmux.so with COLLMUX_STATS) and compare stdout byte for byte.
# Prints one PASS/FAIL line per program and MPI; exits 1 if any fails.
set -u
NP=${1:-2}
REPO=$(cd "$(dirname "$0")/.." && pwd -P)
LIB=${COLLMUX_LIB:-$REPO/build/libcollmux.so}
OUT=$(mktemp -d /tmp/collmux-world-XXXXXX)
fail=0
for mpi in openmpi mpich; do
	# --output :raw: as run() in tests/harness_test.go has it for Open MPI 5
	case $mpi in
	openmpi) launch="mpirun.openmpi --oversubscribe --output :raw -np $NP" ; envflag() { echo "-x $1=$2"; } ;;
	mpich) launch="mpirun.mpich -n $NP" ; envflag() { echo "-genv $1 $2"; } ;;
	esac
	for p in colltest nbtest p2ptest; do
		exe=$OUT/$mpi-$p
		if ! mpicc.$mpi -O1 -Wall -pthread -o "$exe" "$REPO/tests/c/$p.c" 2>"$exe.cc"; then
			echo "FAIL $mpi $p: compile"; cat "$exe.cc"; fail=1; continue
		fi
		timeout 180 $launch "$exe" >"$exe.native" 2>"$exe.native.err"; rn=$?
		stats=$OUT/$mpi-$p.stats.json
		timeout 180 $launch $(envflag LD_PRELOAD "$LIB") $(envflag COLLMUX_STATS "$stats") "$exe" >"$exe.collmux" 2>"$exe.collmux.err"; rc=$?
		abi=$(grep -o '"mpi_abi": *"[a-z_]*"' "$stats" 2>/dev/null | head -n 1 | sed 's/.*: *//')
		colls=$(grep -o '"collective": *"[a-z_]*"' "$stats" 2>/dev/null | sort -u | wc -l)
		last=$(tail -n 1 "$exe.native")
		if [ $rn = 0 ] && [ $rc = 0 ] && cmp -s "$exe.native" "$exe.collmux" && [ -s "$stats" ]; then
			echo "PASS $mpi $p np$NP: native rc $rn, collmux rc $rc, stdout identical ($(wc -l <"$exe.native") lines, \"$last\"), stats: abi $abi, $colls operations seen"
		else
			echo "FAIL $mpi $p np$NP: native rc $rn, collmux rc $rc, stats $( [ -s "$stats" ] && echo present || echo missing)"
			diff "$exe.native" "$exe.collmux" | head -n 20
			tail -n 15 "$exe.collmux.err"
			fail=1
		fi
	done
done
echo "outputs in $OUT"
exit $fail
