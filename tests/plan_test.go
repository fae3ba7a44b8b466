package tests

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"collmux/fused"
)

// plan runs tests/c/plantest (capi/fused_plan.c compiled in, with the C
// compiler alone: no MPI) on the given "COLL BYTES RANKS ALGO" lines and
// returns its answers, one per line.
func plan(t *testing.T, lines []string) []string {
	t.Helper()
	capi := filepath.Join(repoRoot(), "capi")
	bin := program(t, mpiImpl{name: "cc", mpicc: "cc"}, "plantest.c", "plantest", "-std=c11", "-Wextra", "-Werror", "-I"+capi,
		filepath.Join(capi, "fused_plan.c"))
	cmd := exec.Command(bin)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("plantest: %v", err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(got) != len(lines) {
		t.Fatalf("plantest answered %d lines to %d", len(got), len(lines))
	}
	return got
}

// The fused backend's plan: which all-reduce protocol and how many blocks
// a call gets, from what every rank agrees on. No GPU needed.
func TestFusedPlan(t *testing.T) {
	cases := []struct {
		in, want string
	}{
		{"allreduce 8 2 auto", "ll 1"},             // LL, one block
		{"allreduce 16384 2 auto", "ll 1"},         // one block's LL batch
		{"allreduce 16392 2 auto", "ll 9"},         // past it: a block per 2 KiB
		{"allreduce 262144 8 auto", "ll 32"},       // the LL limit, at most 32 blocks
		{"allreduce 262152 2 auto", "oneshot 32"},  // past it, two ranks: one shot
		{"allreduce 262152 3 auto", "twoshot 32"},  // more ranks: two shots
		{"allreduce 12 2 auto", "oneshot 1"},       // not a multiple of 8: no LL
		{"allreduce 12 4 auto", "twoshot 1"},       //
		{"allreduce 8 2 oneshot", "oneshot 1"},     // forced: no LL
		{"allreduce 8 2 twoshot", "twoshot 1"},     //
		{"allreduce 8388608 2 auto", "oneshot 32"}, // the workspace's slot, full
		{"allreduce 8388609 2 auto", "none"},       // more than it holds
		{"allreduce 0 2 auto", "ll 1"},             // nothing to reduce still takes a job
		{"allgather 4096 2 auto", "move 2"},        // moves: a block per 2 KiB of one rank's block
		{"allgather 8388608 8 auto", "move 32"},    // one rank's block fills the slot
		{"alltoall 1048576 8 auto", "move 32"},     // all 8 blocks fill it
		{"alltoall 1048577 8 auto", "none"},        //
		{"bcast 8388609 2 auto", "none"},           //
		{"bcast 100 2 twoshot", "move 1"},          // the algorithm is the all-reduce's alone
	}
	lines := make([]string, len(cases))
	for i, c := range cases {
		lines[i] = c.in
	}
	for i, got := range plan(t, lines) {
		if got != cases[i].want {
			t.Errorf("%s: plan %q, want %q", cases[i].in, got, cases[i].want)
		}
	}
}

// The plan and package fused (which the router and tuner ask what the
// fused backend runs itself) agree on which calls fit the workspace.
func TestFusedPlanAgreesWithServes(t *testing.T) {
	type q struct {
		coll       string
		per, whole uint64 // the plan's bytes, nccl-tests' message
		ranks      int
	}
	var qs []q
	for _, c := range fused.Collectives {
		for _, ranks := range []int{2, 3, 8} {
			for k := 0; k <= 24; k++ {
				for _, b := range []uint64{1<<k - 1, 1 << k, 1<<k + 1} {
					whole := b
					if c == "allgather" || c == "alltoall" {
						whole = b * uint64(ranks) // b is one rank's block
					}
					qs = append(qs, q{c, b, whole, ranks})
				}
			}
		}
	}
	lines := make([]string, len(qs))
	for i, x := range qs {
		lines[i] = fmt.Sprintf("%s %d %d auto", x.coll, x.per, x.ranks)
	}
	for i, got := range plan(t, lines) {
		x := qs[i]
		if fits, serves := got != "none", fused.Serves("fused", x.coll, x.whole, x.ranks); fits != serves {
			t.Errorf("%s of %d bytes (%d a rank) on %d ranks: plan %q, fused.Serves %v", x.coll, x.whole, x.per, x.ranks, got, serves)
		}
	}
}
