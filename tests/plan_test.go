package tests

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"collmux/fused"
)

// plantest runs tests/c/plantest (fused/plan.c compiled in, with
// the C compiler alone: no MPI; in GNU C, as cgo compiles the library) on
// the given lines and returns its answers, one per line.
func plantest(t *testing.T, lines []string) []string {
	t.Helper()
	fused := filepath.Join(repoRoot(), "fused")
	bin := program(t, mpiImpl{name: "cc", mpicc: "cc"}, "plantest.c", "plantest", "-std=gnu11", "-Wextra", "-Werror", "-I"+fused,
		"-I"+filepath.Join(repoRoot(), "internal", "cmx"), filepath.Join(fused, "plan.c"))
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
		{"allgather 4096 2 auto", "llmove 1"},      // moves: LL as well, by one rank's block
		{"allgather 262144 2 auto", "llmove 32"},   // the LL limit
		{"allgather 262152 2 auto", "move 32"},     // past it: through the slots
		{"allgather 4100 2 auto", "move 3"},        // not a multiple of 8: a block per 2 KiB
		{"alltoall 4096 2 auto", "llmove 1"},       //
		{"alltoall 4096 2 oneshot", "move 2"},      // a forced algorithm: through the slots
		{"bcast 256 2 auto", "move 1"},             // never LL: the root would run ahead
		{"allgather 8388608 8 auto", "move 32"},    // one rank's block fills the slot
		{"alltoall 1048576 8 auto", "move 32"},     // all 8 blocks fill it
		{"alltoall 1048577 8 auto", "none"},        //
		{"bcast 8388609 2 auto", "none"},           //
		{"bcast 100 2 twoshot", "move 1"},          // no two shots but for the all-reduce
	}
	lines := make([]string, len(cases))
	for i, c := range cases {
		lines[i] = "plan " + c.in
	}
	for i, got := range plantest(t, lines) {
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
		lines[i] = fmt.Sprintf("plan %s %d %d auto", x.coll, x.per, x.ranks)
	}
	for i, got := range plantest(t, lines) {
		x := qs[i]
		if fits, serves := got != "none", fused.Serves("fused", x.coll, x.whole, x.ranks); fits != serves {
			t.Errorf("%s of %d bytes (%d a rank) on %d ranks: plan %q, fused.Serves %v", x.coll, x.whole, x.per, x.ranks, got, serves)
		}
	}
}

// Job numbers skip 0 (an LL line never written cannot pass for one) and
// alternate in parity across the wrap (consecutive jobs use different data
// slots and LL areas).
func TestJobNumbers(t *testing.T) {
	cases := []struct{ s, next uint32 }{
		{0, 1}, // a new workspace: its first job is 1
		{1, 2},
		{0xfffffffd, 0xfffffffe},
		{0xfffffffe, 1}, // the wrap: even, then odd
	}
	lines := make([]string, len(cases))
	for i, c := range cases {
		lines[i] = fmt.Sprintf("seq %d", c.s)
	}
	for i, got := range plantest(t, lines) {
		c := cases[i]
		if want := fmt.Sprint(c.next); got != want {
			t.Errorf("seq %#x: %q, want %q", c.s, got, want)
		}
		if c.s != 0 && (c.next^c.s)&1 == 0 {
			t.Errorf("jobs %#x and %#x have the same parity", c.s, c.next)
		}
	}
}

// The doorbell holds bellSlots jobs, job s in slot s % bellSlots. From
// each last-finished job f (plain, and every position across the wrap),
// the host rings the jobs after it one by one: a job may go into its slot
// only where no job rung after f and still to be taken is there (checked
// against the slots the jobs really take), and must be let in while
// bellSlots-3 or fewer wait (the wrap's two skipped numbers cost at most
// two places).
// Jobs up to f are finished, those after it not.
func TestDoorbellSlots(t *testing.T) {
	const bellSlots = 64 // CMX_BELL_SLOTS in fused/abi.h
	if !strings.Contains(fused.Source, fmt.Sprintf("#define CMX_BELL_SLOTS %d ", bellSlots)) {
		t.Fatalf("abi.h's CMX_BELL_SLOTS is not %d", bellSlots)
	}
	next := func(s uint32) uint32 {
		if s >= 0xfffffffe {
			return 1
		}
		return s + 1
	}
	type ring struct {
		s, f    uint32
		waiting []uint32 // rung after f, before s
	}
	var rings []ring
	starts := []uint32{0, 1, 1000}
	for f := uint32(0xfffffffe - bellSlots - 2); f != 3; f = next(f) {
		starts = append(starts, f)
	}
	for _, f := range starts {
		var waiting []uint32
		for s, k := next(f), 0; k < bellSlots+3; s, k = next(s), k+1 {
			rings = append(rings, ring{s, f, append([]uint32(nil), waiting...)})
			waiting = append(waiting, s)
		}
	}
	lines := make([]string, 0, 2*len(rings))
	for _, r := range rings {
		lines = append(lines, fmt.Sprintf("bell %d %d", r.s, r.f))
	}
	for _, r := range rings { // jobs up to f: finished
		for _, old := range []uint32{r.f, r.f - 5} {
			lines = append(lines, fmt.Sprintf("bell %d %d", old, r.f))
		}
	}
	got := plantest(t, lines)
	for i, r := range rings {
		var room, done int
		fmt.Sscanf(got[i], "%d %d", &room, &done)
		taken := false
		for _, w := range r.waiting {
			taken = taken || w%bellSlots == r.s%bellSlots
		}
		if room == 1 && taken {
			t.Errorf("job %#x after %#x finished: let into a slot job %d of %v still holds", r.s, r.f, r.s%bellSlots, r.waiting)
		}
		if room == 0 && len(r.waiting) <= bellSlots-3 {
			t.Errorf("job %#x after %#x finished: kept out with only %d jobs waiting", r.s, r.f, len(r.waiting))
		}
		if done != 0 {
			t.Errorf("job %#x counted finished when %#x is the last finished", r.s, r.f)
		}
	}
	for i, g := range got[len(rings):] {
		if !strings.HasSuffix(g, " 1") {
			t.Errorf("%s: %q, want the job finished", lines[len(rings)+i], g)
		}
	}
}

// Taking over a freed communicator's workspace: only one that every rank
// offers, whose old places form a permutation of the new ranks, with the
// job numbers going on from the latest any rank rang. Offers are
// "ID:OLD_RANK:LAST_JOB" (hex ID), one group per rank; the answer is
// "ID SEQ OLD0 OLD1 ...". No GPU needed.
func TestFusedPick(t *testing.T) {
	cases := []struct {
		name, offers, want string
	}{
		{"same ranks", "7:0:5 | 7:1:5", "7 5 0 1"},
		{"ranks reversed", "7:1:5 | 7:0:5", "7 5 1 0"},
		{"one rank stopped its kernel with an extra job", "7:0:5 | 7:1:6", "7 6 0 1"},
		{"latest across the wrap", "7:0:4294967294 | 7:1:1", "7 1 0 1"},
		{"the first of rank 0's that all offer", "3:0:2 7:1:9 | 7:0:9", "7 9 1 0"},
		{"rank 0's order decides", "3:0:2 7:1:9 | 7:0:9 3:1:2", "3 2 0 1"},
		{"a rank has not freed it yet", "7:0:5 | ", "none"},
		{"nothing offered", " | ", "none"},
		{"rank 0 offers nothing", " | 7:1:1", "none"},
		{"two ranks claim one place", "7:0:5 | 7:0:5", "none"},
		{"a place outside the communicator", "7:0:1 | 7:2:1", "none"},
		{"three ranks", "a:2:4 | a:0:4 | a:1:4", "a 4 2 0 1"},
		{"one rank", "a:0:4", "a 4 0"},
	}
	lines := make([]string, len(cases))
	for i, c := range cases {
		lines[i] = "pick " + c.offers
	}
	for i, got := range plantest(t, lines) {
		if got != cases[i].want {
			t.Errorf("%s (%s): %q, want %q", cases[i].name, cases[i].offers, got, cases[i].want)
		}
	}
}

// Whether the ranks' places let them share IPC workspaces: one node, and
// ranks that share a GPU only under MPS (each rank's contexts otherwise
// take turns on it, and the kernels wait on each other every step).
func TestFusedPlacement(t *testing.T) {
	const shared = "two ranks share a GPU without MPS (or CUDA_VISIBLE_DEVICES hides the peers)"
	cases := []struct {
		name, places, want string // places: HOST:BUS:MPS a rank
	}{
		{"a GPU each", "n:gpu0:0 n:gpu1:0", "ok"},
		{"one rank", "n:gpu0:0", "ok"},
		{"two nodes", "n:gpu0:0 m:gpu1:0", "the ranks span several nodes"},
		{"one GPU, no MPS", "n:gpu0:0 n:gpu0:0", shared},
		{"one GPU, MPS", "n:gpu0:1 n:gpu0:1", "ok"},
		{"one GPU, MPS on one rank only", "n:gpu0:1 n:gpu0:0", shared},
		{"four ranks on two GPUs under MPS", "n:gpu0:1 n:gpu1:1 n:gpu0:1 n:gpu1:1", "ok"},
		{"MPS on the GPU shared, not on the other", "n:gpu0:1 n:gpu0:1 n:gpu1:0", "ok"},
		{"three of four ranks on one GPU", "n:gpu0:1 n:gpu0:1 n:gpu1:1 n:gpu0:1", "ok"},
		{"the third rank shares without MPS", "n:gpu0:1 n:gpu1:0 n:gpu1:0", shared},
	}
	lines := make([]string, len(cases))
	for i, c := range cases {
		lines[i] = "place " + c.places
	}
	for i, got := range plantest(t, lines) {
		if got != cases[i].want {
			t.Errorf("%s (%s): %q, want %q", cases[i].name, cases[i].places, got, cases[i].want)
		}
	}
}

// collmux_gemv_allreduce's fused kernel (fused/plan.c), from what every rank
// agrees on: the tensor cores for 16-bit types where every rank has them,
// the CUDA-core loop for fp32 and where they are missing. k is cut into
// segments: up to batch 8, as many as come nearest two blocks a
// multiprocessor where the 32-row tiles fit one wave of four blocks a
// multiprocessor (132 multiprocessors: up to 16 896 rows), at least two
// waves' worth past it; at batch 9 to 16, 16 units a multiprocessor from 3
// tiles a multiprocessor (12 672 rows). Within the workspace's bound
// (cmx_gemv_segs_most, the answer's last field). No GPU needed.
func TestGemvPlan(t *testing.T) {
	cases := []planCase{
		{"gemv 4096 1 132 1 0", "tc 2 6"},   // 128 tiles: 2 segments come nearest two blocks a multiprocessor
		{"gemv 1024 4 132 1 0", "tc 6 6"},   // 32 tiles want 8: at most 6
		{"gemv 8192 8 132 1 0", "tc 1 4"},   // 256 tiles: already near two blocks a multiprocessor
		{"gemv 16896 4 132 1 0", "tc 1 6"},  // 528 tiles: one wave of four blocks a multiprocessor
		{"gemv 16928 4 132 1 0", "tc 2 6"},  // 529: past one wave, two waves' worth
		{"gemv 28672 1 132 1 0", "tc 2 4"},  // 896 tiles; the flags hold 4096 / 896 units a tile
		{"gemv 0 1 132 1 0", "tc 1 6"},      // no rows
		{"gemv 8192 16 132 1 0", "tc 1 2"},  // batch 16 (two blocks a multiprocessor): 256 tiles, one wave
		{"gemv 12640 16 132 1 0", "tc 1 2"}, // 395 tiles: just below 3 a multiprocessor
		{"gemv 12672 9 132 1 0", "tc 3 3"},  // 396: 16 units a multiprocessor want 6, at most 32 / 9 partials a row
		{"gemv 16384 16 132 1 0", "tc 2 2"}, // 512 tiles want 5, at most 32 / 16
		{"gemv 4096 4 132 0 0", "loop 1 6"}, // no tensor cores on some rank
		{"gemv 4096 4 132 1 1", "loop 1 1"}, // fp32
		{"gemv 131072 8 132 1 0", "tc 1 1"}, // 4096 tiles: the flags hold no more units
	}
	planAnswers(t, cases)
}

// The tuning table's forms (collmux tune --ops): the first entry for the
// communicator's ranks whose batches and rows hold the call, else none.
func TestOpsTunedForm(t *testing.T) {
	table := " | 2:1-3:0-8192:2 2:1-3:8193-18446744073709551615:1 2:4-16:0-18446744073709551615:3 8:1-16:0-18446744073709551615:1"
	cases := []planCase{
		{"tuned 2 1 4096" + table, "2"},
		{"tuned 2 3 8192" + table, "2"},
		{"tuned 2 1 8193" + table, "1"},
		{"tuned 2 4 100" + table, "3"},
		{"tuned 2 16 1" + table, "3"},
		{"tuned 8 5 5" + table, "1"},
		{"tuned 4 1 4096" + table, "0"}, // no entry for 4 ranks: the built-in choice
		{"tuned 2 1 4096 |", "0"},       // no table
	}
	planAnswers(t, cases)
}

// planCase is a line for plantest and the answer it must give.
type planCase struct{ in, want string }

// planAnswers runs plantest on the cases' lines and checks each answer.
func planAnswers(t *testing.T, cases []planCase) {
	t.Helper()
	lines := make([]string, len(cases))
	for i, c := range cases {
		lines[i] = c.in
	}
	for i, got := range plantest(t, lines) {
		if got != cases[i].want {
			t.Errorf("%s: %s, want %s", cases[i].in, got, cases[i].want)
		}
	}
}
