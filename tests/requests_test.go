package tests

import (
	"fmt"
	"strings"
	"testing"
)

// Nonblocking collectives (every one, on int/float/double with sum and
// max), each completion call (Wait, Test, Request_get_status, and the
// array calls over mixed arrays of collectives, point-to-point and
// MPI_REQUEST_NULL), 300 requests outstanding at once, persistent
// collectives restarted 200 times, and the large-count MPI_Iallreduce_c
// and MPI_Ibcast_c (tests/c/nbtest.c): the output under collmux is
// byte-identical to the native run's. Where the MPI lacks the MPI-4
// functions (Open MPI 4.1) and collmux provides none, nbtest runs the
// equivalent nonblocking calls instead, with the same output.
func TestNonblockingCollectivesMatchNative(t *testing.T) {
	for _, m := range impls(t) {
		prog := program(t, m, "nbtest.c", "nbtest", "-pthread")
		for np := 1; np <= maxRequestRanks(m); np++ {
			t.Run(fmt.Sprintf("%s/np%d", m.name, np), func(t *testing.T) {
				matchesNative(t, m, np, fmt.Sprintf("nbtest: %d ranks, 0 failures", np), prog)
				intercepted(t, m, np, prog, "allreduce", "reduce", "bcast", "allgather", "allgatherv", "gather", "gatherv",
					"scatter", "scatterv", "alltoall", "alltoallv", "alltoallw", "reduce_scatter", "reduce_scatter_block",
					"scan", "exscan", "barrier")
			})
		}
	}
}

// Point-to-point in every mode, blocking, nonblocking and persistent, with
// probes, wildcards, message order, MPI_PROC_NULL, truncation and
// cancellation (tests/c/p2ptest.c): the same output with collmux as
// without it.
func TestPointToPointMatchesNative(t *testing.T) {
	for _, m := range impls(t) {
		prog := program(t, m, "p2ptest.c", "p2ptest", "-pthread")
		for np := 1; np <= maxRequestRanks(m); np++ {
			t.Run(fmt.Sprintf("%s/np%d", m.name, np), func(t *testing.T) {
				matchesNative(t, m, np, fmt.Sprintf("p2ptest: %d ranks, 0 failures", np), prog)
				intercepted(t, m, np, prog, "send", "recv", "sendrecv")
			})
		}
	}
}

// MPI_THREAD_MULTIPLE: two threads per rank, each on its own communicator,
// start nonblocking collectives (nbtest) or exchange messages (p2ptest)
// and complete them with Wait and Test loops.
func TestRequestsThreadMultiple(t *testing.T) {
	for _, m := range impls(t) {
		for _, name := range []string{"nbtest", "p2ptest"} {
			prog := program(t, m, name+".c", name, "-pthread")
			t.Run(m.name+"/"+name, func(t *testing.T) {
				matchesNative(t, m, 2, name+": 2 ranks, 2 threads, 0 failures", prog, "threads")
			})
		}
	}
}

// maxRequestRanks: 1-3 ranks under Open MPI; MPICH busy-polls, so 3 ranks
// on 2 cores take seconds where 2 take a fraction of one, and it stops at 2.
func maxRequestRanks(m mpiImpl) int {
	if m.mpichBased() {
		return 2
	}
	return 3
}

// matchesNative runs prog natively, whose last line of output must be
// sane, then under collmux with statistics on and with COLLMUX_DISABLE=1:
// each output must be byte-identical to the native one. Unlike
// sameAsNative it asks nothing of collmux's statistics. A native run that
// says "skipped" (no MPI_THREAD_MULTIPLE) skips the test.
func matchesNative(t *testing.T, m mpiImpl, np int, sane string, prog ...string) {
	t.Helper()
	native, errs, err := run(t, m, np, nil, prog...)
	if strings.Contains(native, "skipped") {
		t.Skipf("skipped: %s", strings.TrimSpace(native))
	}
	if err != nil {
		t.Fatalf("native run failed: %v\n%s\n%s", err, tail(native), errs)
	}
	if last := lastLine(native); last != sane {
		t.Fatalf("native run ends %q, want %q:\n%s\n%s", last, sane, tail(native), errs)
	}
	env, _ := preloaded(t)
	for _, c := range []struct {
		how string
		env map[string]string
	}{
		{"statistics on", env},
		{"COLLMUX_DISABLE=1", map[string]string{"LD_PRELOAD": libPath(t), "COLLMUX_DISABLE": "1"}},
	} {
		got, errs, err := run(t, m, np, c.env, prog...)
		if err != nil {
			t.Fatalf("under collmux, %s: %v\n%s\n%s", c.how, err, tail(got), errs)
		}
		if got != native {
			t.Fatalf("output under collmux, %s, differs from native:\n%s\n%s", c.how, diff(native, got), errs)
		}
	}
}

// intercepted runs prog under collmux and requires its statistics to show
// calls of every family named: nbtest makes only nonblocking and
// persistent collective calls, p2ptest only point-to-point ones, so their
// counts prove those forms go through collmux.
func intercepted(t *testing.T, m mpiImpl, np int, prog string, families ...string) {
	t.Helper()
	env, statsFile := preloaded(t)
	if _, errs, err := run(t, m, np, env, prog); err != nil {
		t.Fatalf("under collmux: %v\n%s", err, errs)
	}
	r := readStats(t, statsFile)
	for _, f := range families {
		if r.Calls(f, "mpi") == 0 {
			t.Errorf("statistics show no %s call: not intercepted", f)
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
