package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"collmux/mpi"
)

// TestABIConstantsMatchHeaders: the per-ABI numbers collmux uses without
// asking the MPI (mpi.ABIConstants: sentinels, error classes, MPI_Status's
// size and where its MPI_ERROR field lies) are what each installed MPI's
// mpi.h defines, printed by a program compiled against it. A wrong one
// would put an error in the wrong field of a program's status, or answer
// with another error class than the MPI's own.
func TestABIConstantsMatchHeaders(t *testing.T) {
	abiOf := map[string]mpi.ABI{"openmpi": mpi.ABIOpenMPI, "mpich": mpi.ABIMPICH, "mpi-abi": mpi.ABIStandard}
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			c := mpi.ABIConstants[abiOf[m.name]]
			want := []struct {
				expr string
				v    int64
			}{
				{"MPI_IN_PLACE", c.InPlace}, {"MPI_ROOT", int64(c.Root)}, {"MPI_PROC_NULL", int64(c.ProcNull)},
				{"MPI_ERR_OTHER", int64(c.ErrOther)}, {"MPI_ERR_IN_STATUS", int64(c.ErrInStatus)},
				{"offsetof(MPI_Status, MPI_ERROR)", int64(c.StatusError)}, {"sizeof(MPI_Status)", int64(c.StatusSize)},
				{"MPI_STATUS_IGNORE", c.StatusIgnore}, {"MPI_STATUSES_IGNORE", c.StatusIgnore},
				{"MPI_CART", int64(c.Cart)}, {"MPI_GRAPH", int64(c.Graph)}, {"MPI_DIST_GRAPH", int64(c.DistGraph)},
				{"MPI_THREAD_MULTIPLE", int64(c.ThreadMultiple)},
			}
			var src strings.Builder
			src.WriteString("#include <mpi.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\nint main(void)\n{\n")
			for _, k := range want {
				fmt.Fprintf(&src, "\tprintf(\"%%lld\\n\", (long long)(intptr_t)(%s));\n", k.expr)
			}
			src.WriteString("\treturn 0;\n}\n")
			dir := t.TempDir()
			cfile, exe := filepath.Join(dir, "consts.c"), filepath.Join(dir, "consts")
			if err := os.WriteFile(cfile, []byte(src.String()), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(m.mpicc, append(append([]string{}, m.cflags...), "-Wall", "-o", exe, cfile)...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", m.mpicc, err, out)
			}
			out, err := exec.Command(exe).Output()
			if err != nil {
				t.Fatalf("%s: %v", exe, err)
			}
			got := strings.Fields(string(out))
			if len(got) != len(want) {
				t.Fatalf("printed %d values, want %d: %q", len(got), len(want), out)
			}
			for i, k := range want {
				if got[i] != fmt.Sprint(k.v) {
					t.Errorf("%s: mpi.h says %s, collmux's table %d", k.expr, got[i], k.v)
				}
			}
		})
	}
}
