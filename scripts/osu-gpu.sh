#!/usr/bin/env bash
# osu-gpu.sh OSU_SRC [OUT]: OSU's blocking collective benchmarks on device
# buffers under collmux, with their default datatype (MPI_CHAR) and with
# -T mpi_float, on the GPU machine (issue 20: OSU's defaults must run where
# floats do, every size within 10%). OSU is not part of collmux: OSU_SRC is
# a source tree of OSU micro-benchmarks 7.x (configure at its top), carried
# to the GPU machine in an ignored folder (e.g. build/osu-src, with
# `carry`). It is built there against the system MPI and CUDA, with the one
# change CUDA 13 needs (cudaMemPrefetchAsync takes a location and flags,
# ../shared/GPU-MACHINE.md). Writes each run's output, the build logs and
# osu.md (the table) into OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
SRC=${1:?usage: osu-gpu.sh OSU_SRC [OUT]}
OUT=${2:-${OUT:-/tmp/collmux-osu}}
CUDA=${CUDA:-/usr/local/cuda}
LIB=$PWD/build/libcollmux.so
NP=${NP:-$(nvidia-smi -L | wc -l)}
MAX=${OSU_MAX:-16777216}
# OSU_ITERS, OSU_WARMUP: osu's -i and -x (200 and 20 by default)
mkdir -p "$OUT"
B=$(mktemp -d)
cp -r "$SRC" "$B/osu" && cd "$B/osu" || exit 1
sed -i 's/cudaMemPrefetchAsync(buf, length, devid, um_stream)/cudaMemPrefetchAsync(buf, length, (struct cudaMemLocation){.type = cudaMemLocationTypeDevice, .id = devid}, 0, um_stream)/' \
	c/util/osu_util_mpi.c
{ ./configure CC=mpicc CXX=mpicxx --enable-cuda --with-cuda="$CUDA" && make -j16; } > "$OUT/osu-build.log" 2>&1 ||
	{ tail -20 "$OUT/osu-build.log"; exit 1; }
cd c/mpi/collective/blocking
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
for b in allreduce reduce reduce_scatter allgather alltoall bcast; do
	for t in default mpi_float; do
		args=(-d cuda -m "1:$MAX" -i "${OSU_ITERS:-200}" -x "${OSU_WARMUP:-20}")
		[ "$t" = default ] || args+=(-T "$t")
		timeout 300 mpirun --oversubscribe -np "$NP" -x LD_PRELOAD="$LIB" -x NCCL_NVLS_ENABLE \
			-x COLLMUX_STATS="$OUT/osu_$b.$t.json" ./osu_$b "${args[@]}" > "$OUT/osu_$b.$t.txt" 2>&1 ||
			echo "osu_$b ($t) failed: $(tail -3 "$OUT/osu_$b.$t.txt")"
	done
done
# the table: per benchmark and size, MPI_CHAR against MPI_FLOAT
python3 - "$OUT" > "$OUT/osu.md" <<'EOF'
import glob, os, sys
out = sys.argv[1]
def read(path):
    rows = {}
    for line in open(path, errors="replace"):
        f = line.split()
        if len(f) >= 2 and f[0].isdigit():
            try:
                rows[int(f[0])] = float(f[1])
            except ValueError:
                pass
    return rows
print("| benchmark | bytes | default (MPI_CHAR) µs | -T mpi_float µs | ratio | within 10% |")
print("| --- | --- | --- | --- | --- | --- |")
worst = 0
for b in ["allreduce", "reduce", "reduce_scatter", "allgather", "alltoall", "bcast"]:
    d, f = (os.path.join(out, "osu_%s.%s.txt" % (b, t)) for t in ("default", "mpi_float"))
    if not (os.path.exists(d) and os.path.exists(f)):
        continue
    rd, rf = read(d), read(f)
    for size in sorted(set(rd) & set(rf)):
        r = rd[size] / rf[size] if rf[size] else float("inf")
        worst = max(worst, r)
        print("| %s | %d | %.2f | %.2f | %.3f | %s |" % (b, size, rd[size], rf[size], r, "yes" if r <= 1.10 else "no"))
print()
print("Largest ratio: %.3f" % worst)
EOF
cat "$OUT/osu.md" | tail -3
