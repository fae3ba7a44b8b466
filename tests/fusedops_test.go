package tests

import (
	"fmt"
	"strings"
	"testing"
)

// The fused operations of collmux.h where they cannot run (the CUDA
// stand-in has no kernels): every rank's call returns -1 with a message
// that names the call and the reason, nothing hangs, and MPI goes on. Their
// results are tested on the GPU machine (tests/gpu/fusedops.c in
// scripts/gpu-test.sh).
func TestFusedOpsUnavailable(t *testing.T) {
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			dir := fakeCUDA(t)
			dev := deviceProgram(t, m, "../gpu/fusedops.c", "fusedops")
			env, _ := preloaded(t, "LD_LIBRARY_PATH", dir)
			out, errs, err := run(t, m, 2, env, dev, "unavailable")
			if err != nil || lastLine(out) != "fusedops: 2 ranks, 0 failures (unavailable)" {
				t.Fatalf("%v: ends %q\n%s", err, lastLine(out), errs)
			}
			for r := 0; r < 2; r++ {
				want := fmt.Sprintf("collmux: collmux_gemv_allreduce on rank %d: ", r)
				if !strings.Contains(errs, want) || !strings.Contains(errs, "unavailable on some rank") {
					t.Errorf("no message %q naming the reason:\n%s", want, errs)
				}
			}
			for _, op := range []string{"collmux_gemm_reducescatter", "collmux_allgather_gemm"} {
				if n := strings.Count(errs, "collmux: "+op+" on rank "); n != 2 {
					t.Errorf("%d messages naming %s, want one a rank:\n%s", n, op, errs)
				}
			}
			// each rank's GEMM + all-to-all on MPI_COMM_SELF, where it is rank 0
			if n := strings.Count(errs, "collmux: collmux_gemm_alltoall on rank 0: the CUDA driver's IPC"); n != 2 {
				t.Errorf("%d messages naming collmux_gemm_alltoall and its reason, want one a rank:\n%s", n, errs)
			}
		})
	}
}
