package tests

import (
	"fmt"
	"strings"
	"testing"
)

// Overlap mode (COLLMUX_OVERLAP, the collmux_overlap info key) routes
// device data movement to the copy engines. The CUDA stand-in cannot
// share memory between processes, so here the copy path declines every
// call, and the calls must still be right, on every rank the same path,
// with the decisions log showing which rules the mode selected; the copies
// themselves run on the GPU machine (scripts/gpu-test.sh).
func TestOverlapMode(t *testing.T) {
	const (
		copyRule  = `rule "allgather:cuda:*:copy:overlap=yes" from default; copy declined the call`
		fusedRule = `rule "allgather:cuda:0-8M:fused" from default; fused declined the call`
	)
	for _, m := range impls(t) {
		dir := fakeCUDA(t)
		t.Run(m.name+"/infokey", func(t *testing.T) {
			prog := deviceProgram(t, m, "overlaptest.c", "overlaptest")
			env, _ := preloaded(t, "LD_LIBRARY_PATH", dir, "COLLMUX_LOG", "decisions")
			out, errs, err := run(t, m, 2, env, prog)
			if err != nil || lastLine(out) != "overlaptest: 2 ranks, 0 failures" {
				t.Fatalf("%v\n%s\n%s", err, out, errs)
			}
			// the key turned the mode on, set_info off again (the fused
			// rule's line comes after the copy rule's), and ranks that
			// disagree were told so
			c, f := strings.Index(errs, copyRule), strings.Index(errs, fusedRule)
			if c < 0 || f < c {
				t.Errorf("the decisions log lacks the copy rule's line, or the fused rule's after it:\n%s", errs)
			}
			if !strings.Contains(errs, "set collmux_overlap differently; its mode stays alone") {
				t.Errorf("no warning for ranks that set the key differently:\n%s", errs)
			}
		})
		t.Run(m.name+"/env", func(t *testing.T) {
			host := program(t, m, "colltest.c", "colltest", "-pthread", "-ldl")
			dev := deviceProgram(t, m, "colltest.c", "colltest")
			native, errs, err := run(t, m, 2, nil, host)
			if err != nil {
				t.Fatalf("native: %v\n%s", err, errs)
			}
			env, _ := preloaded(t, "LD_LIBRARY_PATH", dir, "COLLMUX_LOG", "decisions", "COLLMUX_OVERLAP", "1")
			got, errs, err := run(t, m, 2, env, dev)
			if err != nil || got != native {
				t.Fatalf("COLLMUX_OVERLAP=1: %v\n%s\n%s", err, diff(native, got), errs)
			}
			for _, coll := range []string{"allgather", "alltoall", "bcast", "gather", "scatter"} {
				want := fmt.Sprintf(`rule "%s:cuda:*:copy:overlap=yes" from default; copy declined the call`, coll)
				if !strings.Contains(errs, want) {
					t.Errorf("%s: the decisions log does not show the copy rule declined:\n%s", coll, errs)
				}
			}
			if strings.Contains(errs, fusedRule) {
				t.Errorf("an all-gather took the rule of calls not in overlap mode:\n%s", errs)
			}
		})
	}
}
