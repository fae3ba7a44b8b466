package tests

import (
	"os/exec"
	"strings"
	"testing"

	"collmux/dispatch"
)

// The library exports every intercepted MPI function (C, and the Fortran
// manglings) and nothing an MPI ABI probe looks for (mpi4py asks
// dlopen(NULL) for MPI_Get_version, MPI_Abi_get_version and ompi_* to tell
// MPIs apart).
func TestExportedSymbols(t *testing.T) {
	out, err := exec.Command("nm", "-D", "--defined-only", libPath(t)).Output()
	if err != nil {
		t.Skipf("skipped: nm not available: %v", err)
	}
	exported := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			exported[f[2]] = true
		}
	}
	for name := range exported {
		for _, bad := range []string{"MPI_Get_version", "MPI_Abi_", "ompi_", "MPIR_", "PMPI_"} {
			if strings.HasPrefix(name, bad) {
				t.Errorf("exports %s, which MPI ABI probes or PMPI callers would find", name)
			}
		}
	}
	for c := dispatch.Coll(0); c < dispatch.NumColl; c++ {
		name := "MPI_" + strings.ToUpper(c.String()[:1]) + c.String()[1:]
		if !exported[name] {
			t.Errorf("%s is not exported", name)
		}
	}
	for _, name := range []string{"MPI_Init", "MPI_Init_thread", "MPI_Allreduce_c", "collmux_version", "collmux_comm_states", "collmux_gemv_allreduce", "collmux_embedding_alltoall", "collmux_gemm_alltoall", "collmux_gemm_reducescatter", "collmux_allgather_gemm", "collmux_symm_alloc", "collmux_symm_free",
		"mpi_init_", "mpi_init_thread_", "mpi_allreduce_", "mpi_allreduce__", "MPI_ALLREDUCE", "mpi_reduce_scatter_block_", "mpi_barrier_"} {
		if !exported[name] {
			t.Errorf("%s is not exported", name)
		}
	}
	if exported["MPI_Barrier_c"] {
		t.Error("MPI_Barrier has no large-count twin in MPI-4")
	}
}
