// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"fmt"
	"strings"
	"testing"
)

// MPI_CHAR, which no reduction may take by the standard, is reduced by
// both MPIs here (OSU's benchmarks rely on it), so collmux asks the MPI at
// start-up and classes it an integer (datatype class int), the device
// paths then taking its reductions; MPI_WCHAR, which neither MPI reduces,
// stays "other" and its reductions reach the MPI, which refuses them. The
// 16-bit integers are integers too. A rule on dtype=int shows the class in
// the decision log. Results on device buffers (the CUDA stand-in: staged)
// are byte for byte the MPI's on host buffers, errors included.
func TestCharReductions(t *testing.T) {
	const rule = "allreduce:cuda:*:staged:dtype=int"
	decisions := []struct {
		typ, want string
	}{
		{"MPI_CHAR", `allreduce on cuda memory, 16 B -> staged (rule "` + rule + `" from COLLMUX_RULES)`},
		{"MPI_SHORT", `allreduce on cuda memory, 32 B -> staged (rule "` + rule + `" from COLLMUX_RULES)`},
		{"MPI_UINT16_T", `allreduce on cuda memory, 32 B -> staged (rule "` + rule + `" from COLLMUX_RULES)`},
		{"MPI_WCHAR", `allreduce on cuda memory, 64 B -> staged (rule "allreduce:cuda:0-8M:fused" from default; fused declined the call)`},
	}
	for _, m := range impls(t) {
		dir := fakeCUDA(t)
		host := program(t, m, "chartest.c", "chartest")
		dev := deviceProgram(t, m, "chartest.c", "chartest")
		for _, np := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/np%d", m.name, np), func(t *testing.T) {
				native, errs, err := run(t, m, np, nil, host)
				if err != nil || lastLine(native) != fmt.Sprintf("chartest: %d ranks", np) || !strings.Contains(native, "MPI_WCHAR sum n=1: error class") {
					t.Fatalf("native host run: %v, ends %q\n%s", err, lastLine(native), errs)
				}
				env, statsFile := preloaded(t, "LD_LIBRARY_PATH", dir)
				got, errs, err := run(t, m, np, env, dev)
				if err != nil || got != native {
					t.Fatalf("device build under collmux: %v\n%s\n%s", err, diff(native, got), errs)
				}
				if r := readStats(t, statsFile); r.Calls("allreduce", "staged") == 0 || r.Calls("reduce_scatter_block", "staged") == 0 {
					t.Errorf("statistics show no staged reductions: %+v", r.Rows)
				}
			})
		}
		for _, tc := range decisions {
			t.Run(m.name+"/route/"+tc.typ, func(t *testing.T) {
				env, _ := preloaded(t, "LD_LIBRARY_PATH", dir, "COLLMUX_RULES", rule, "COLLMUX_LOG", "decisions")
				out, errs, err := run(t, m, 2, env, dev, tc.typ)
				if err != nil || lastLine(out) != "chartest: 2 ranks" {
					t.Fatalf("%v\n%s\n%s", err, tail(out), errs)
				}
				if !strings.Contains(errs, tc.want) {
					t.Errorf("decision log lacks %q:\n%s", tc.want, errs)
				}
			})
		}
	}
}
