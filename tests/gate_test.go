package tests

import (
	"path/filepath"
	"strings"
	"testing"
)

// The arrival gate of the device backends (gate/gate.c), compiled into
// tests/c/gatetest.c and run over real MPI on 3 ranks: the order it
// enforces, its timeout and what the late rank sees, one verdict for all
// ranks when their deadlines differ, and where there is no gate (below
// MPI_THREAD_MULTIPLE, ranks on two nodes).
func TestArrivalGate(t *testing.T) {
	inc := "-I" + filepath.Join(repoRoot(), "internal", "cmx")
	cases := []struct {
		mode   string
		env    map[string]string
		stderr []string // what the gate must have said
	}{
		{"order", nil, []string{"arrival gate for a communicator of 3 ranks"}},
		{"timeout", nil, []string{ // ranks 0 and 2 time out together: the first to decide names rank 1, the other may name it or the first
			"of 3: ranks 1 did not arrive within COLLMUX_TIMEOUT=1 s",
			"MPI_Allreduce on rank 1 of 3: rank ",
			"gave up on this call",
			"an earlier device collective on this communicator timed out",
		}},
		{"split", nil, []string{"MPI_Allreduce on rank 0 of 3: ranks 1 did not arrive within COLLMUX_TIMEOUT=1 s",
			"MPI_Allreduce on rank 2 of 3: rank 0 gave up on this call"}},
		{"single", nil, nil},
		{"nodes", map[string]string{"GATETEST_NODES": "2"}, nil},
	}
	for _, m := range impls(t) {
		prog := program(t, m, "gatetest.c", "gatetest", filepath.Join(repoRoot(), "gate", "gate.c"), inc)
		for _, tc := range cases {
			t.Run(m.name+"/"+tc.mode, func(t *testing.T) {
				out, errs, err := run(t, m, 3, tc.env, prog, tc.mode)
				if strings.Contains(out, "skipped") {
					t.Skipf("%s", strings.TrimSpace(out))
				}
				if err != nil || !strings.Contains(out, "gatetest "+tc.mode+": 3 ranks, 0 failures") {
					t.Fatalf("err %v\n%s\n%s", err, out, errs)
				}
				for _, s := range tc.stderr {
					if !strings.Contains(errs, s) {
						t.Errorf("stderr lacks %q:\n%s", s, errs)
					}
				}
				if tc.stderr == nil && strings.Contains(errs, "arrival gate") {
					t.Errorf("a gate where none belongs:\n%s", errs)
				}
			})
		}
	}
}
