#!/usr/bin/env bash
# The GPU suite, run on the GPU machine from a libcollmux.so built elsewhere
# (build/ carried along): device-buffer correctness on every collective
# against the native host results, the fused kernels' edge cases,
# COLLMUX_CHECK, the watchdog, mpi4py with CuPy and PyTorch, and the
# benchmark against NCCL. Everything lands in $OUT.
#
# ONLY="PART ...": those parts alone, of overlap (the copy-engine and
# overlap cases), ops (the fused operations), coll (colltest on every
# path), requests (nonblocking, persistent, point-to-point, neighbourhood
# calls, mixed datatypes, ranks with nothing to exchange), kernel (the
# resident kernel's edges, freed communicators, its stop, kernels compiled
# ahead of time, COLLMUX_CHECK),
# faults (the watchdogs and fault injection) and py (mpi4py with CuPy and
# PyTorch), so that a run too long for one call splits into two.
# FAULTS=0: everything but the watchdogs and fault injection. BENCH: which
# benchmarks follow the tests (below; BENCH=0 none).
# MPS=1: two ranks on every GPU, sharing it through an MPS server this
# script starts and stops (private pipe and log folders): the tests run on
# GPUs + 1 to 2 x GPUs ranks (the counts where ranks share a GPU), so a
# one-GPU machine runs the fused paths on two ranks. NCCL refuses ranks that share a GPU, so what only NCCL runs is
# left out, and no benchmark follows (their figures would be MPS's).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/collmux-gpu}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
CUDA=${CUDA:-/usr/local/cuda}
LIB=$PWD/build/libcollmux.so
NGPU=$(nvidia-smi -L | wc -l)
B=$(mktemp -d)
RANKS=$NGPU FIRST=1
if [ "${MPS:-0}" = 1 ]; then
  export CUDA_MPS_PIPE_DIRECTORY=$B/mps CUDA_MPS_LOG_DIRECTORY=$B/mps-log
  mkdir -m 700 "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || { echo "MPS=1: nvidia-cuda-mps-control -d failed"; exit 1; }
  trap 'echo quit | nvidia-cuda-mps-control' EXIT
  trap 'exit 143' TERM # so that the EXIT trap stops the server
  trap 'exit 130' INT
  RANKS=$((2 * NGPU)) FIRST=$((NGPU + 1)) BENCH=0
fi
shared() { [ "$1" -gt "$NGPU" ]; } # shared NP: NP ranks put two on some GPU
PASS=0 FAIL=0
: > "$OUT/gpu-tests.txt"
result() { # result STATUS NAME: one line here and in gpu-tests.txt
  local word=PASS
  if [ "$1" = 0 ]; then PASS=$((PASS + 1)); else FAIL=$((FAIL + 1)) word=FAIL; fi
  echo "$word $2" | tee -a "$OUT/gpu-tests.txt"
}
MPSX=() # the MPS server's folders, for every rank
[ "${MPS:-0}" = 1 ] && MPSX=(-x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY)
X=(-x LD_PRELOAD="$LIB" -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS "${MPSX[@]}")
run() { local np=$1; shift; timeout 300 mpirun --oversubscribe -np "$np" "$@"; }
calls() { # calls STATS.json BACKEND -> total calls on that backend
  python3 -c "import json,sys; print(sum(r['calls'] for r in json.load(open(sys.argv[1]))['rows'] if r['backend']==sys.argv[2]))" "$1" "$2" 2>/dev/null || echo 0
}
famon() { # famon STATS.json FAMILY BACKEND -> calls of that family on that backend
  python3 -c "import json,sys; print(sum(r['calls'] for r in json.load(open(sys.argv[1]))['rows'] if r['collective']==sys.argv[2] and r['backend']==sys.argv[3]))" "$1" "$2" "$3" 2>/dev/null || echo 0
}
offhost() { # offhost STATS.json FAMILY -> calls of that family on a device backend (not forwarded to MPI)
  python3 -c "import json,sys; print(sum(r['calls'] for r in json.load(open(sys.argv[1]))['rows'] if r['collective']==sys.argv[2] and r['backend']!='mpi'))" "$1" "$2" 2>/dev/null || echo 0
}

{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvidia-smi topo -m | head -$((NGPU + 1))
  echo "nccl: $(grep -m1 -E '#define NCCL_(MAJOR|MINOR|PATCH)' -h /usr/include/nccl.h >/dev/null && awk '/define NCCL_MAJOR/{a=$3}/define NCCL_MINOR/{b=$3}/define NCCL_PATCH/{c=$3}END{print a"."b"."c}' /usr/include/nccl.h)"
  echo "mpi: $(mpirun --version 2>&1 | head -1)"
  echo "cuda: $($CUDA/bin/nvcc --version | tail -2 | head -1)"
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

set -x
mpicc -O1 -o $B/colltest tests/c/colltest.c
mpicc -O1 -DCOLLTEST_CUDA -I$CUDA/include -o $B/colltest_cuda tests/c/colltest.c -L$CUDA/lib64 -lcudart
for p in nbtest p2ptest; do
  mpicc -O1 -pthread -o $B/$p tests/c/$p.c
  mpicc -O1 -pthread -DCOLLTEST_CUDA -I$CUDA/include -o $B/${p}_cuda tests/c/$p.c -L$CUDA/lib64 -lcudart
done
mpicc -O1 -o $B/nbrtest tests/c/nbrtest.c
mpicc -O1 -o $B/typemix tests/c/typemix.c
mpicc -O1 -DCOLLTEST_CUDA -I$CUDA/include -o $B/typemix_cuda tests/c/typemix.c -L$CUDA/lib64 -lcudart
mpicc -O1 -DCOLLTEST_CUDA -I$CUDA/include -o $B/nbrtest_cuda tests/c/nbrtest.c -L$CUDA/lib64 -lcudart
mpicc -O1 -DCOLLTEST_CUDA -I$CUDA/include -o $B/emptyrank_cuda tests/c/emptyrank.c -L$CUDA/lib64 -lcudart
mpicc -I$CUDA/include -o $B/mismatch tests/gpu/mismatch.c -L$CUDA/lib64 -lcudart
mpicc -I$CUDA/include -o $B/hang tests/gpu/hang.c -L$CUDA/lib64 -lcudart
mpicc -I$CUDA/include -o $B/killrank tests/gpu/killrank.c -L$CUDA/lib64 -lcudart -lpthread
mpicc -I$CUDA/include -o $B/edges tests/gpu/edges.c -L$CUDA/lib64 -lcudart -lpthread
mpicc -I$CUDA/include -o $B/commfree tests/gpu/commfree.c -L$CUDA/lib64 -lcudart
mpicc -I$CUDA/include -o $B/lingerrace tests/gpu/lingerrace.c -L$CUDA/lib64 -lcudart
mpicc -O2 -I$CUDA/include -o $B/gpu_bench bench/gpu_bench.c -L$CUDA/lib64 -lcudart -lnccl -ldl
mpicc -I$CUDA/include -o $B/overlaptest tests/c/overlaptest.c -L$CUDA/lib64 -lcudart
mpicc -O2 -I$CUDA/include -o $B/overlap bench/overlap.c -L$CUDA/lib64 -lcudart -ldl
mpicc -I$CUDA/include -o $B/fusedops tests/gpu/fusedops.c -L$CUDA/lib64 -lcudart -ldl -lm
mpicc -O2 -I$CUDA/include -o $B/fusedops_bench bench/fusedops.c -L$CUDA/lib64 -lcudart -lnccl -ldl -lm
mpicc -O2 -I$CUDA/include -o $B/embedding_bench bench/embedding.c -L$CUDA/lib64 -lcudart -lnccl -ldl
mpicc -O2 -I$CUDA/include -o $B/moe_bench bench/moe.c -L$CUDA/lib64 -lcudart -lnccl -ldl
mpicc -O2 -I$CUDA/include -o $B/tp_bench bench/tp.c -L$CUDA/lib64 -lcudart -lnccl -ldl -lm
set +x

# Beside computation (COLLMUX_OVERLAP=1, the collmux_overlap info key):
# data movement on the copy engines, all-reduce on the lean fused kernels,
# the same results as the host MPI; every call forced onto the copy path
# falls through to the next path where the copy engines cannot serve it.
overlap_suite() {
  for np in $(seq $FIRST "$RANKS"); do
    run $np $B/colltest > $B/host.$np 2>&1
    run $np "${X[@]}" -x COLLMUX_OVERLAP=1 -x COLLMUX_STATS=$B/o.$np.json $B/colltest_cuda > $B/ovl.$np 2> $B/ovl.$np.err
    cmp -s $B/host.$np $B/ovl.$np; result $? "colltest on device buffers, $np ranks, COLLMUX_OVERLAP=1: same results as host MPI"
    cmp -s $B/host.$np $B/ovl.$np || { grep -v '^\[' $B/ovl.$np.err | tail -20; diff $B/host.$np $B/ovl.$np | head; }
    k=$(calls $B/o.$np.json copy); echo "  copy $k calls, fused $(calls $B/o.$np.json fused) calls"
    if shared $np; then # a copy within one GPU would run on its SMs
      [ "$k" = 0 ]; result $? "statistics show no copy-engine calls: the copy path refuses ranks that share a GPU, $np ranks"
    else
      [ "$k" -gt 0 ]; result $? "statistics show copy-engine calls, $np ranks"
    fi
    run $np "${X[@]}" -x COLLMUX_RULES='*:cuda:*:copy' $B/colltest_cuda > $B/cpy.$np 2> $B/cpy.$np.err
    cmp -s $B/host.$np $B/cpy.$np; result $? "colltest on device buffers, $np ranks, every call sent to the copy path first: same results"
    cmp -s $B/host.$np $B/cpy.$np || { grep -v '^\[' $B/cpy.$np.err | tail -20; diff $B/host.$np $B/cpy.$np | head; }
  done
  run "$RANKS" "${X[@]}" -x COLLMUX_STATS=$B/ot.json -x COLLMUX_LOG=decisions $B/overlaptest > $B/ot 2> $B/ot.err
  grep -q "0 failures" $B/ot && { shared $RANKS || [ "$(calls $B/ot.json copy)" -gt 0 ]; }
  result $? "the collmux_overlap info key: $(tail -1 $B/ot), $(calls $B/ot.json copy) copy-engine calls"
  grep -q "0 failures" $B/ot || { cat $B/ot; tail $B/ot.err; }
}
# The fused computation + collective operations (collmux.h): the module
# compiles with nvcc too (its registers and spills on record), and every
# operation gives the exact reference bit for bit on 1 to RANKS ranks.
ops_suite() {
  cat fused/abi.h fused/kernels.cu fused/ops.cu > $B/module.cu
  $CUDA/bin/nvcc -cubin -std=c++17 -arch=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .) \
    -Xptxas -v -o $B/module.cubin $B/module.cu > $B/ptxas.txt 2>&1
  result $? "the kernel module (abi.h + kernels.cu + ops.cu) compiles with nvcc"
  echo "operation kernels with register counts in ops-ptxas.txt: $(grep -A3 -E "Compiling entry function '(cmx_gemv_ar|cmx_gemv_tc|cmx_ops_sum)" $B/ptxas.txt | grep -E "entry|registers|spill" | tee "$OUT/ops-ptxas.txt" | grep -c registers)"
  grep -E "error" $B/ptxas.txt | head -20
  for np in $(seq $FIRST "$RANKS"); do
    for algo in auto fused cublas; do
      [ $np = "$RANKS" ] || [ $algo = auto ] || continue
      run $np "${X[@]}" -x COLLMUX_TIMEOUT=20 -x COLLMUX_OPS_ALGO=$algo $B/fusedops > $B/fo.$np 2> $B/fo.$np.err
      grep -q "$np ranks, 0 failures" $B/fo.$np
      result $? "GEMV + all-reduce, embedding + all-to-all, GEMM + all-to-all, GEMM + reduce-scatter, all-gather + GEMM, $np ranks, COLLMUX_OPS_ALGO=$algo: exact results, the same bits on every rank, errors as promised: $(tail -1 $B/fo.$np)"
      grep -q "$np ranks, 0 failures" $B/fo.$np || grep -v '^\[' $B/fo.$np.err | head -20
    done
  done
  run "$RANKS" "${X[@]}" -x PYTHONPATH=$PWD/python python3 tests/py/fusedops_torch.py > $B/fot 2>&1
  grep -q "$RANKS ranks, 0 failures" $B/fot
  result $? "the collmux Python package: a row-parallel linear layer on PyTorch and CuPy, torch.ops and torch.compile, embedding and MoE GEMM + all-to-all, GEMM + reduce-scatter, all-gather + GEMM: $(grep fusedops_torch: $B/fot | tail -1)"
  grep -q "$RANKS ranks, 0 failures" $B/fot || grep -v '^\[' $B/fot | tail -20
}
# The watchdogs (a rank that never arrives) and fault injection (a rank
# killed in the middle of a call), 2 GPUs or more.
faults_suite() {
if [ "$RANKS" -ge 2 ]; then
  # the fused kernel's watchdog; the arrival gate (MPI_THREAD_MULTIPLE) of either backend
  # NCCL single: no gate; the stream is polled against the timeout and
  # the NCCL communicator aborted (it cannot know which rank is missing)
  # NCCL nonblocking: the request fails once COLLMUX_TIMEOUT has passed
  for mode in "fused single" "fused multiple" "nccl multiple" "nccl single" "nccl nonblocking" "fused nonblocking"; do
    set -- $mode
    [ $1 = nccl ] && shared 2 && continue
    start=$(date +%s)
    timeout 120 mpirun -np 2 "${X[@]}" -x COLLMUX_RULES="*:cuda:*:$1" -x COLLMUX_TIMEOUT=3 $B/hang $2 > $B/hang.out 2>&1
    rc=$?
    grep -v '^\[' $B/hang.out | grep -v '^---\|^$' | head -8
    said="ranks 1 did not arrive"
    [ "$mode" = "nccl single" ] && said="NCCL did not complete within COLLMUX_TIMEOUT=3 s"
    [ "$2" = nonblocking ] && said="the device work of this nonblocking call failed"
    [ $rc != 124 ] && grep -q "$said" $B/hang.out && grep -q "rank 0: second allreduce returned an error" $B/hang.out
    result $? "watchdog ($mode): a call rank 1 never makes fails on rank 0 after COLLMUX_TIMEOUT=3: $said ($(( $(date +%s) - start )) s)"
  done
fi

if [ "$RANKS" -ge 2 ]; then
  # fault injection: rank 1 is killed (SIGKILL) in the middle of a call;
  # every surviving rank's call must fail within COLLMUX_TIMEOUT + 5 s
  # (the program prints how long it took and checks the guards around its
  # buffer), with collmux naming rank 1 where it can tell: the fused
  # kernel's watchdog and the arrival gate can, a blocking NCCL call past
  # the gate cannot (docs/design.md, "Known limits"), so for NCCL the name
  # is reported, not required. Open MPI's mpirun must not end the job when
  # rank 1 dies: --mca orte_abort_on_non_zero_status 0 (Open MPI 4.1).
  survivors=$((RANKS - 1))
  for mode in "fused single" "fused multiple" "nccl single" "nccl multiple"; do
    set -- $mode
    [ $1 = nccl ] && shared $RANKS && continue
    start=$(date +%s)
    timeout 120 mpirun --oversubscribe -np "$RANKS" --mca orte_abort_on_non_zero_status 0 "${X[@]}" -x COLLMUX_RULES="*:cuda:*:$1" \
      -x COLLMUX_TIMEOUT=3 $B/killrank $2 > $B/kill.out 2>&1
    rc=$?
    grep -v '^\[' $B/kill.out | grep -v '^---\|^$' | head -12
    # survivors whose call failed within the limit, their guards not overwritten
    inside=$(awk '/^killrank: rank [0-9]+: call [0-9]+ failed after/ && !/OVERWRITTEN/ {
      t = ""; for (i = 1; i <= NF; i++) { if ($i == "after" && t == "") t = $(i + 1); if ($i == "limit") l = $(i + 1) }
      if (t + 0 <= l + 0) n++ } END { print n + 0 }' $B/kill.out)
    named=$(grep -cE "on rank [0-9]+ of $RANKS: ranks 1 did not arrive" $B/kill.out)
    [ $rc != 124 ] && [ "$inside" = "$survivors" ]
    result $? "fault injection ($mode): rank 1 killed in the middle of a call; all $survivors surviving ranks' calls failed within COLLMUX_TIMEOUT=3 + 5 s, no hang, guards intact ($inside did, $(( $(date +%s) - start )) s in all)"
    if [ "$1" = fused ]; then
      [ "$named" -ge "$survivors" ]
      result $? "fault injection ($mode): every survivor's error names rank 1 ($named of $survivors)"
    else
      echo "  $mode: $named of $survivors survivors' errors name rank 1 (not required: NCCL alone cannot tell)"
    fi
  done
fi
}
# colltest on every path, against the host run (ONLY=coll: this alone)
coll_suite() {
  for np in $(seq $FIRST "$RANKS"); do
    run $np $B/colltest > $B/host.$np 2>&1
    run $np "${X[@]}" -x COLLMUX_STATS=$B/s.$np.json -x COLLMUX_CHECK=1 $B/colltest_cuda > $B/dev.$np 2> $B/dev.$np.err
    rc=$?
    cmp -s $B/host.$np $B/dev.$np && grep -q "$np ranks, 0 failures" $B/dev.$np && [ $rc = 0 ]
    result $? "colltest on device buffers, $np ranks: same results as host MPI (COLLMUX_CHECK=1)"
    [ $rc = 0 ] || { tail -20 $B/dev.$np.err; diff $B/host.$np $B/dev.$np | head -10; }
    n=$(calls $B/s.$np.json nccl); s=$(calls $B/s.$np.json staged)
    echo "  backends: nccl $n calls, staged $s calls"
    if shared $np; then
      [ "$n" = 0 ] && [ "$s" -gt 0 ]; result $? "statistics show staged calls and none on NCCL, which refuses ranks that share a GPU, $np ranks"
    else
      [ "$n" -gt 0 ] && [ "$s" -gt 0 ]; result $? "statistics show both nccl and staged calls, $np ranks"
    fi
    run $np "${X[@]}" -x COLLMUX_RULES='*:cuda:*:staged' $B/colltest_cuda > $B/stg.$np 2> $B/stg.$np.err
    cmp -s $B/host.$np $B/stg.$np; result $? "colltest on device buffers, $np ranks, all staged"
    run $np "${X[@]}" -x COLLMUX_RULES='*:cuda:0-8M:fused' -x COLLMUX_STATS=$B/f.$np.json -x COLLMUX_LOG=info $B/colltest_cuda > $B/fus.$np 2> $B/fus.$np.err
    cmp -s $B/host.$np $B/fus.$np; result $? "colltest on device buffers, $np ranks, fused up to 8 MiB: same results as host MPI"
    cmp -s $B/host.$np $B/fus.$np || { grep -v '^\[' $B/fus.$np.err | head -20; diff $B/host.$np $B/fus.$np | head; }
    f=$(calls $B/f.$np.json fused); echo "  fused $f calls ($(grep -m1 'fused' $B/fus.$np.err))"
    [ "$f" -gt 0 ] || [ "$np" = 1 -a "$f" -ge 0 ]; result $? "statistics show fused calls, $np ranks"
    # COLLMUX_FUSED_LINGER=0: the resident kernel stops after every job, so
    # every call races its stop against the next doorbell and relaunches
    run $np "${X[@]}" -x COLLMUX_RULES='*:cuda:0-8M:fused' -x COLLMUX_FUSED_LINGER=0 $B/colltest_cuda > $B/fus0.$np 2> $B/fus0.$np.err
    cmp -s $B/host.$np $B/fus0.$np; result $? "colltest on device buffers, $np ranks, fused, resident kernel relaunched for every call"
    for algo in oneshot twoshot; do
      run $np "${X[@]}" -x COLLMUX_RULES='*:cuda:0-8M:fused' -x COLLMUX_FUSED_ALGO=$algo $B/colltest_cuda > $B/fus$algo.$np 2> $B/fus$algo.$np.err
      cmp -s $B/host.$np $B/fus$algo.$np; result $? "colltest on device buffers, $np ranks, fused, every all-reduce $algo (COLLMUX_FUSED_ALGO=$algo)"
    done
  done
}
# nonblocking, persistent and point-to-point calls, neighbourhood calls and mixed datatypes (ONLY=requests: these alone)
requests_suite() {
  # nonblocking and persistent collectives with every completion call
  # (nbtest), point-to-point in every mode (p2ptest, whose mixed pairs send
  # from device to host buffers and back, so no COLLMUX_CHECK), then both with
  # two threads per rank: device buffers through collmux against the host
  # run of the same program; stderr says which MPI-4 functions were found.
  # nbtest with threads runs under COLLMUX_CHECK; without, its persistent
  # calls' restarts take the prepared path (checked calls are never prepared)
  for p in nbtest p2ptest; do
    for np in $(seq $FIRST "$RANKS") threads; do
      chk=(); [ $p = nbtest ] && [ $np = threads ] && chk=(-x COLLMUX_CHECK=1)
      n=$np args=()
      [ $np = threads ] && n=$((RANKS < 2 ? 1 : 2)) args=(threads)
      run $n $B/$p "${args[@]}" > $B/$p.host.$np 2> $B/$p.host.$np.err
      run $n "${X[@]}" "${chk[@]}" -x COLLMUX_STATS=$B/$p.s.$np.json $B/${p}_cuda "${args[@]}" > $B/$p.dev.$np 2> $B/$p.dev.$np.err
      rc=$?
      cmp -s $B/$p.host.$np $B/$p.dev.$np && grep -qxE "$p: $n ranks, (2 threads, )?0 failures" $B/$p.dev.$np && [ $rc = 0 ]
      result $? "$p on device buffers, $n ranks${args:+, MPI_THREAD_MULTIPLE}: same results as host MPI: $(tail -1 $B/$p.dev.$np)"
      [ $rc = 0 ] || { grep -v '^\[' $B/$p.dev.$np.err | tail -20; diff $B/$p.host.$np $B/$p.dev.$np | head -10; }
      [ $np = 1 ] && grep "^$p:" $B/$p.dev.$np.err
    done
  done

  # persistent starts prepared on fused: nbtest with the device collectives
  # forced onto fused where it runs them (the rest fall through), against the
  # host run; statistics show the persistent all-reduce's 200 restarts there
  for np in $(seq $FIRST "$RANKS"); do
    run $np "${X[@]}" -x COLLMUX_RULES='*:cuda:*:fused' -x COLLMUX_STATS=$B/nbf.$np.json $B/nbtest_cuda > $B/nbf.$np 2> $B/nbf.$np.err
    rc=$? f=$(famon $B/nbf.$np.json allreduce fused)
    cmp -s $B/nbtest.host.$np $B/nbf.$np && [ $rc = 0 ] && [ "$f" -ge 200 ]
    result $? "nbtest on device buffers, $np ranks, forced onto fused (persistent starts prepared): same results as host MPI, $f all-reduces on fused"
    [ $rc = 0 ] || grep -v '^\[' $B/nbf.$np.err | tail -20
  done

  # nbrtest: the neighborhood collectives (Cartesian, graph and distributed
  # graph; blocking, nonblocking, persistent), Alltoallw, Reduce_local,
  # intercommunicator collectives (non-significant buffers NULL) and the _c
  # forms on device buffers, against the host MPI's own results. stdout only:
  # stderr says which MPI-4 functions the MPI has, natively and under collmux.
  # Once checked (COLLMUX_CHECK=1), once with statistics, which must show
  # each new family on a device backend, not forwarded with device pointers.
  for np in $(seq $FIRST "$RANKS"); do
    run $np $B/nbrtest > $B/nbr.host.$np 2> $B/nbr.host.$np.err
    run $np "${X[@]}" -x COLLMUX_CHECK=1 $B/nbrtest_cuda > $B/nbr.dev.$np 2> $B/nbr.dev.$np.err
    rc=$?
    cmp -s $B/nbr.host.$np $B/nbr.dev.$np && grep -q "^nbrtest: $np ranks, 0 failures" $B/nbr.dev.$np && [ $rc = 0 ]
    result $? "nbrtest on device buffers, $np ranks: neighborhood collectives in every form, Alltoallw, Reduce_local, intercommunicators: same results as host MPI (COLLMUX_CHECK=1)"
    [ $rc = 0 ] || grep -v '^\[' $B/nbr.dev.$np.err | tail -20
    cmp -s $B/nbr.host.$np $B/nbr.dev.$np || diff $B/nbr.host.$np $B/nbr.dev.$np | head -10
    run $np "${X[@]}" -x COLLMUX_STATS=$B/ns.$np.json $B/nbrtest_cuda > $B/nbrs.$np 2> $B/nbrs.$np.err
    rc=$? missing=""
    fams="neighbor_allgather neighbor_allgatherv neighbor_alltoall neighbor_alltoallv neighbor_alltoallw reduce_local"
    [ $np -gt 1 ] && fams="$fams alltoallw" # one rank's Alltoallw moves nothing
    for f in $fams; do
      [ "$(offhost $B/ns.$np.json $f)" -gt 0 ] || missing="$missing $f"
    done
    [ "$(famon $B/ns.$np.json reduce_local fused)" -gt 0 ] || missing="$missing reduce_local-on-its-kernel"
    cmp -s $B/nbr.host.$np $B/nbrs.$np && [ $rc = 0 ] && [ -z "$missing" ]
    result $? "nbrtest on device buffers with statistics, $np ranks: same results, every new family on a device backend, Reduce_local on collmux's kernel${missing:+ (not:$missing)}"
    [ $rc = 0 ] || grep -v '^\[' $B/nbrs.$np.err | tail -8
  done

  # emptyrank: a rank with nothing to exchange passes NULL while its peers
  # pass device buffers (gatherv, scatterv, alltoallv also nonblocking, a
  # graph neighbourhood), on a new communicator and after a device
  # all-reduce, where the ranks agree on the route; COLLMUX_CHECK finds
  # them in agreement (the first fused call may compile the kernels)
  for np in $(seq $FIRST "$RANKS"); do
    run $np "${X[@]}" -x COLLMUX_CHECK=1 $B/emptyrank_cuda > $B/er.$np 2> $B/er.$np.err
    rc=$?
    grep -qx "emptyrank: $np ranks, 0 failures" $B/er.$np && [ $rc = 0 ]
    result $? "emptyrank on device buffers, $np ranks: a rank with nothing to exchange routes with its peers: $(tail -1 $B/er.$np)"
    [ $rc = 0 ] || grep -v '^\[' $B/er.$np.err | tail -12
  done

  # typemix: ranks pass one type signature through different datatypes (a
  # contiguous type or MPI_2INT on one, ints on the others; strided and
  # column types on one side of a call, packed for the device backend on
  # that rank): the same results as the host MPI on each path, every rank
  # explaining the same routing decisions (COLLMUX_LOG=decisions). Under
  # the copy path's rule the packing matters twice: ranks that share a GPU
  # (MPS=1) all fall from it to the fused path, which decides alone
  if [ "$RANKS" -ge 2 ]; then
    run "$RANKS" $B/typemix > $B/tm.host 2>&1
    for rules in default '*:cuda:*:nccl' '*:cuda:0-8M:fused' '*:cuda:*:copy'; do
      env=(); [ "$rules" != default ] && env=(-x COLLMUX_RULES="$rules")
      run "$RANKS" "${X[@]}" "${env[@]}" -x COLLMUX_LOG=decisions $B/typemix_cuda > $B/tm.dev 2> $B/tm.err
      rc=$?
      # each rank's explained decisions, the rank's prefix dropped, sorted: one set for all ranks
      sets=$(for r in $(seq 0 $((RANKS - 1))); do grep "^collmux\[rank $r\]: .* -> " $B/tm.err | sed 's/^collmux\[rank [0-9]*\]: //' | sort | md5sum; done | sort -u | wc -l)
      cmp -s $B/tm.host $B/tm.dev && [ $rc = 0 ] && [ "$sets" = 1 ]
      result $? "typemix on device buffers, $RANKS ranks, rules $rules: mixed datatypes of one signature give the host MPI's results, every rank routing alike ($sets decision sets)"
      [ $rc = 0 ] || grep -v '^\[' $B/tm.err | tail -12
      cmp -s $B/tm.host $B/tm.dev || diff $B/tm.host $B/tm.dev | head -10
    done
  fi
}

# the resident kernel: edges, communicators freed, the stop, kernels compiled ahead of time, none compiled where ranks share a GPU without MPS, COLLMUX_CHECK (ONLY=kernel: these alone)
kernel_suite() {
  # the edges under the fused kernels (resident, then relaunched every call,
  # then every all-reduce one-shot and two-shot through the slots instead of
  # LL) and under NCCL (misaligned reductions run through an aligned copy)
  edge_modes="linger200 linger0 oneshot twoshot"
  shared $RANKS || edge_modes+=" nccl"
  for mode in $edge_modes; do
    case $mode in
    linger200) env=(-x COLLMUX_FUSED_LINGER=200) backend=fused ;;
    linger0) env=(-x COLLMUX_FUSED_LINGER=0) backend=fused ;;
    oneshot | twoshot) env=(-x COLLMUX_FUSED_ALGO=$mode) backend=fused ;;
    nccl) env=(-x COLLMUX_RULES='*:cuda:*:nccl') backend=nccl ;;
    esac
    run "$RANKS" "${X[@]}" "${env[@]}" -x COLLMUX_STATS=$B/e.$mode.json $B/edges > $B/edges.$mode 2>&1
    rc=$?
    grep -q "0 failures" $B/edges.$mode && [ $rc = 0 ] && [ "$(calls $B/e.$mode.json $backend)" -gt 0 -o "$RANKS" = 1 ]
    result $? "edges on $backend ($mode): offsets 0/1/4/8 B and differing between ranks, odd counts, LL limit, in place, 200 bcasts in a row, two communicators from two threads: $(grep '^edges' $B/edges.$mode)"
    grep -q "0 failures" $B/edges.$mode || grep -v '^\[' $B/edges.$mode | head -12
  done

  # communicators made and freed in a loop, more than a process has
  # workspaces: each freed one's workspace goes to the next communicator of
  # the same processes (any rank order), so no call falls back to NCCL
  run "$RANKS" "${X[@]}" -x COLLMUX_RULES='*:cuda:*:fused' -x COLLMUX_LOG=info -x COLLMUX_STATS=$B/cf.json $B/commfree > $B/cf.out 2>&1
  rc=$?
  n=$(calls $B/cf.json nccl) f=$(calls $B/cf.json fused) t=$(grep -c 'taken over' $B/cf.out)
  echo "  commfree: fused $f calls, nccl $n, workspaces taken over $t times"
  grep -q "0 failures" $B/cf.out && [ $rc = 0 ] && [ "$n" = 0 ] && [ "$f" -gt 0 ] && [ "$t" -ge 40 ]
  result $? "44 communicators made and freed (half with ranks reversed): every call fused, freed workspaces taken over; opposite-order frees do not hang: $(grep '^commfree' $B/cf.out)"
  grep "^first use" $B/cf.out
  [ "$n" = 0 ] || grep -v '^\[' $B/cf.out | head -12

  # nonblocking jobs rung as the resident kernel stops for want of jobs,
  # while the rank then waits in host MPI (lingerrace): each must still run
  # (the stop handshake in kernels.cu's take_job), or the peers' watchdog
  # fails their blocking call
  if [ "$RANKS" -ge 2 ]; then
    run "$RANKS" "${X[@]}" -x COLLMUX_RULES='*:cuda:*:fused' -x COLLMUX_FUSED_LINGER=30 -x COLLMUX_TIMEOUT=5 -x COLLMUX_STATS=$B/lr.json $B/lingerrace > $B/lr.out 2>&1
    rc=$? f=$(calls $B/lr.json fused)
    grep -q "0 failures" $B/lr.out && [ $rc = 0 ] && [ "$f" -ge 20000 ]
    result $? "a nonblocking job rung as the resident kernel stops still runs while its rank waits in host MPI: $(grep '^lingerrace' $B/lr.out), $f calls on fused"
    [ $rc = 0 ] || grep -v '^\[' $B/lr.out | head -8
  fi

  # kernels compiled ahead of time (as CMake does where nvcc exists) are
  # loaded from collmux-kernels/ beside the library instead of NVRTC
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
  mkdir -p $B/aot/collmux-kernels && cp "$LIB" $B/aot/
  cat fused/abi.h fused/kernels.cu fused/ops.cu > $B/aot/k.cu # the module, as fused.Source joins it
  $CUDA/bin/nvcc -cubin -std=c++17 -arch=sm_$arch -o $B/aot/collmux-kernels/sm_$arch-$(sha256sum $B/aot/k.cu | cut -c1-24).cubin $B/aot/k.cu
  run "$RANKS" -x LD_PRELOAD=$B/aot/libcollmux.so -x NCCL_NVLS_ENABLE "${MPSX[@]}" -x COLLMUX_LOG=info -x XDG_CACHE_HOME=$B/nocache $B/edges > $B/aot.out 2>&1
  grep -q "0 failures" $B/aot.out && grep -q "compiled ahead of time" $B/aot.out
  result $? "kernels compiled ahead of time by nvcc for sm_$arch are loaded beside the library: $(grep -m1 -o 'fused kernels from .*' $B/aot.out)"

  # ranks that share a GPU without MPS never compile the kernels: the
  # fused set-up agrees on the placement before it loads them (under MPS=1
  # the server holds the GPU, so this runs without it only)
  if [ "${MPS:-0}" != 1 ]; then
    mkdir -m 700 $B/fresh
    run $((NGPU + 1)) "${X[@]}" -x COLLMUX_LOG=info -x XDG_CACHE_HOME=$B/fresh $B/edges > $B/shared.out 2>&1
    rc=$?
    grep -q "0 failures" $B/shared.out && [ $rc = 0 ] && grep -q "fused path off .*share a GPU without MPS" $B/shared.out &&
      ! grep -q "compiled by NVRTC" $B/shared.out && [ -z "$(ls -A $B/fresh)" ]
    result $? "$((NGPU + 1)) ranks, two sharing a GPU without MPS: the fused path off without compiling the kernels: $(grep '^edges' $B/shared.out)"
    [ $rc = 0 ] || grep -v '^\[' $B/shared.out | tail -8
  fi

  if [ "$RANKS" -ge 2 ]; then
    timeout 120 mpirun -np 2 "${X[@]}" -x COLLMUX_CHECK=1 $B/mismatch > $B/mm 2>&1
    rc=$?
    cat $B/mm | grep -v '^\[' | head -8
    [ $rc != 0 ] && [ $rc != 124 ] && grep -q "disagree on the memory kind" $B/mm
    result $? "COLLMUX_CHECK names the ranks that pass host and device buffers (exit $rc, no hang)"
  fi
}

# mpi4py with CuPy and PyTorch (ONLY=py: this alone)
py_suite() {
  run "$RANKS" "${X[@]}" -x COLLMUX_STATS=$B/py.json python3 tests/py/mpi4py_cupy.py > $B/py 2>&1
  grep -q "0 failures" $B/py; result $? "mpi4py + CuPy/PyTorch device arrays: $(grep mpi4py_cupy $B/py)"
  py_backend=nccl; shared $RANKS && py_backend=fused
  [ "$(calls $B/py.json $py_backend)" -gt 0 ]; result $? "mpi4py device calls went to $py_backend"
  grep -q "0 failures" $B/py || tail -30 $B/py
  run "$RANKS" "${X[@]}" -x COLLMUX_STATS=$B/pynb.json python3 tests/py/mpi4py_cupy_nb.py > $B/pynb 2>&1
  grep -q "0 failures" $B/pynb; result $? "mpi4py + CuPy/PyTorch: nonblocking, persistent and point-to-point calls on device arrays, MPIX_Query_cuda_support: $(grep mpi4py_cupy_nb $B/pynb)"
  grep -q "0 failures" $B/pynb || tail -30 $B/pynb
  [ "$(calls $B/pynb.json staged)" -gt 0 ]; result $? "mpi4py point-to-point device calls went through collmux (staged)"
  # MPI-IO on the process's first CuPy array: refused, never reaching the
  # MPI (mpi4py 4.1.2's test_io crashed Open MPI there at two ranks in
  # session 26; not yet run here)
  for np in 1 $((NGPU + 1)); do
    run $np "${X[@]}" python3 tests/py/mpi4py_unserved.py > $B/pyio.$np 2>&1
    rc=$?
    grep -q "0 failures" $B/pyio.$np && [ $rc = 0 ]
    result $? "mpi4py + CuPy, $np ranks: MPI-IO on the first device array refused with MPI_ERR_OTHER: $(grep -h 'mpi4py_unserved\|binds' $B/pyio.$np | tr '\n' ' ')"
    [ $rc = 0 ] || grep -v '^\[' $B/pyio.$np | tail -12
  done
}

# ONLY: the parts named (any of overlap ops coll requests kernel faults py,
# space-separated), else all of them, the watchdogs and fault injection
# last but one unless FAULTS=0
parts="overlap ops coll requests kernel faults py"
[ "${FAULTS:-1}" = 1 ] || parts=${parts/ faults/}
for part in ${ONLY:-$parts}; do
  case " overlap ops coll requests kernel faults py " in
  *" $part "*) "${part}_suite" ;;
  *) echo "ONLY=$ONLY: no part $part (overlap ops coll requests kernel faults py)"; exit 2 ;;
  esac
done
echo "summary: $PASS passed, $FAIL failed" | tee -a "$OUT/gpu-tests.txt"

# BENCH=1 (default): every benchmark; BENCH=nb: only gpu_nb (the calls
# beyond blocking collectives); BENCH=persist: only persist_lat; BENCH=0: none
if [ "${BENCH:-1}" = 1 ]; then
  $CUDA/bin/nvcc -O2 -arch=native -o $B/launch_floor bench/launch_floor.cu -lcuda && $B/launch_floor | tee "$OUT/launch-floor.txt"
  $CUDA/bin/nvcc -O2 -arch=native -o $B/sync_costs bench/sync_costs.cu && $B/sync_costs | tee "$OUT/sync-costs.txt"
  # one run: NCCL directly, the default policy, staged, fused and NCCL (through collmux) alone
  timeout 590 mpirun -np "$NGPU" "${X[@]}" $B/gpu_bench ${BENCH_MAX:-$((1 << 30))} collmux= staged="*:cuda:*:staged@$((64 << 20))" \
    fused="*:cuda:*:fused@$((8 << 20))" ncclpath="*:cuda:*:nccl@$((1 << 20))" > "$OUT/bench.csv" 2> $B/bench.err || tail $B/bench.err
  build/collmux routes > $B/routes.txt
  python3 bench/gpu_report.py "$OUT/bench.csv" "$OUT/gpu-bench" "$(tr '\n' ' ' < "$OUT/machine.txt")" $B/routes.txt > /dev/null
  grep -A60 "## Targets" "$OUT/gpu-bench.md"
fi
# BENCH=overlap (and BENCH=1): a GEMM stream beside each collective, on
# each path: NCCL, the default (fused where it runs), overlap mode
if { [ "${BENCH:-1}" = 1 ] || [ "${BENCH:-1}" = overlap ]; } && [ "$NGPU" -ge 2 ]; then
  for p in nccl:COLLMUX_RULES='*:cuda:*:nccl' default:COLLMUX_OVERLAP=0 overlap:COLLMUX_OVERLAP=1; do
    timeout 200 mpirun -np "$NGPU" "${X[@]}" -x "${p#*:}" $B/overlap "${p%%:*}" ${OVERLAP_MAX:-$((256 << 20))} 2> $B/ovb.err |
      { [ "${p%%:*}" = nccl ] && cat || tail -n +2; } || tail $B/ovb.err
  done > "$OUT/overlap.csv"
  cat "$OUT/overlap.csv"
fi
# BENCH=ops (and BENCH=1): the fused operations against their unfused forms
if { [ "${BENCH:-1}" = 1 ] || [ "${BENCH:-1}" = ops ]; } && [ "$NGPU" -ge 2 ]; then
  # OPS_BENCH=emb: the embedding benchmark alone
  [ "${OPS_BENCH:-all}" = emb ] || { { timeout 300 mpirun -np "$NGPU" "${X[@]}" -x COLLMUX_OPS_ALGO=fused $B/fusedops_bench ${OPS_MAX:-28672} ${OPS_CONTENDERS:-adbgn1} d:fused
    timeout 200 mpirun -np "$NGPU" "${X[@]}" -x COLLMUX_OPS_ALGO=cublas $B/fusedops_bench ${OPS_MAX:-28672} d1 d:cublas | tail -n +2
    timeout 200 mpirun -np "$NGPU" "${X[@]}" $B/fusedops_bench ${OPS_MAX:-28672} d d:auto | tail -n +2
  } > "$OUT/fusedops.csv" 2> $B/fob.err || tail -20 $B/fob.err; cat "$OUT/fusedops.csv"; }
  # DLRM-like bags of 20-80 lookups (pooling-bound), then one-hot ones (Criteo's: the all-to-all weighs most)
  { timeout 200 mpirun -np "$NGPU" "${X[@]}" $B/embedding_bench ${EMB_BATCH:-16384}
    timeout 200 mpirun -np "$NGPU" "${X[@]}" $B/embedding_bench ${EMB_BATCH:-16384} 1 1 | tail -n +2
  } > "$OUT/embedding.csv" 2> $B/emb.err || tail -20 $B/emb.err
  cat "$OUT/embedding.csv"
  # MoE combine: 4 K and 32 K tokens a rank, hidden 4096 and 7168, 8 and 32 experts a rank
  { timeout 200 mpirun -np "$NGPU" "${X[@]}" $B/moe_bench 4096 4096 4096 8
    for s in "32768 4096 4096 8" "8192 7168 7168 8" "32768 7168 7168 32"; do
      timeout 200 mpirun -np "$NGPU" "${X[@]}" $B/moe_bench $s | tail -n +2
    done
  } > "$OUT/moe.csv" 2> $B/moe.err || tail -20 $B/moe.err
  cat "$OUT/moe.csv"
  # row-parallel linear + reduce-scatter: a 70B-class and an 8B-class MLP down projection, and fewer tokens;
  # column-parallel all-gather + linear: their up projections
  { timeout 200 mpirun -np "$NGPU" "${X[@]}" $B/tp_bench rs 8192 28672 8192
    for s in "rs 2048 28672 8192" "rs 16384 14336 4096" "ag 8192 8192 28672" "ag 2048 8192 28672" "ag 16384 4096 14336"; do
      timeout 200 mpirun -np "$NGPU" "${X[@]}" $B/tp_bench $s | tail -n +2
    done
    # and as PyTorch runs them, with its own fused operators (contender c) beside
    for s in "rs 8192 28672 8192" "ag 8192 8192 28672"; do
      timeout 300 mpirun -np "$NGPU" "${X[@]}" -x PYTHONPATH=$PWD/python python3 bench/tp_torch.py $s | tail -n +2
    done
  } > "$OUT/tp.csv" 2> $B/tp.err || tail -20 $B/tp.err
  cat "$OUT/tp.csv"
fi
# BENCH=persist (and BENCH=1): an 8-byte device all-reduce blocking,
# persistent (MPI_Start + MPI_Wait) and nonblocking, taking turns, on
# fused (with and without the default-stream ordering) and NCCL, at each
# rank count the GPUs allow; rank 0's CSV rows with the path prepended
if [ "${BENCH:-1}" = 1 ] || [ "${BENCH:-1}" = persist ]; then
  mpicc -O2 -I$CUDA/include -o $B/persist_lat bench/persist_lat.c -L$CUDA/lib64 -lcudart -ldl
  for np in $(seq 1 "$NGPU"); do
    for p in "fused:COLLMUX_RULES=*:cuda:*:fused" "fused-unordered:COLLMUX_RULES=*:cuda:*:fused COLLMUX_STREAM_ORDER=none" \
      "nccl:COLLMUX_RULES=*:cuda:*:nccl"; do
      env=(); for e in ${p#*:}; do env+=(-x "$e"); done
      timeout 200 mpirun --oversubscribe -np $np "${X[@]}" "${env[@]}" $B/persist_lat 2000 2> $B/pl.err | sed "1d;s/^/${p%%:*},/" || tail $B/pl.err
    done
  done | tee "$OUT/persist-lat.csv"
fi
if [ "${BENCH:-1}" != 0 ] && [ "${BENCH:-1}" != overlap ] && [ "${BENCH:-1}" != ops ] && [ "${BENCH:-1}" != persist ] && [ "$NGPU" -ge 2 ]; then
  $CUDA/bin/nvcc -O2 -arch=native -o $B/gpu_nb bench/gpu_nb.cu $(mpicc --showme:compile) $(mpicc --showme:link) -lnccl &&
    timeout 300 mpirun -np 2 "${X[@]}" $B/gpu_nb > "$OUT/nb-bench.csv" 2> $B/nb.err || tail $B/nb.err
  cat "$OUT/nb-bench.csv"
fi
[ "$FAIL" = 0 ]
