package tune

import (
	"math"
	"os"
	"strings"
	"testing"

	"collmux/fused"
)

func TestCheck(t *testing.T) {
	tab := Table{Ranges: []Range{{"allreduce", 0, 1024, "fused"}, {"allreduce", 1025, math.MaxUint64, "nccl"}}}
	s := func(b string, n uint64, us float64) Sample { return Sample{"allreduce", b, n, us} }
	samples := []Sample{
		// 8 B: the table's fused is the fastest path; tuned measured 1% slower (noise)
		s(Tuned, 8, 10.1), s("fused", 8, 10), s("nccl", 8, 20),
		// 4 KiB: the table's nccl, but fused alone was faster: a wrong choice
		s(Tuned, 4096, 20), s("fused", 4096, 15), s("nccl", 4096, 19.8),
		// 64 MiB: fused cannot take it and runs NCCL, so both are the same path
		s(Tuned, 64<<20, 100), s("fused", 64<<20, 97), s("nccl", 64<<20, 101),
		s("nccl", 1<<30, 5000), // no tuned sample: not compared
	}
	serves := func(b, c string, n uint64) bool { return b != "fused" || n <= 8<<20 }
	cs := Check(tab, samples, 0.02, serves, "nccl")
	if len(cs) != 1 {
		t.Fatalf("%+v", cs)
	}
	c := cs[0]
	if c.Sizes != 3 || c.Within != 1 || c.WorstBytes != 4096 || math.Abs(c.Worst-20.0/15) > 1e-9 {
		t.Errorf("sizes %d within %d worst %.3f at %d", c.Sizes, c.Within, c.Worst, c.WorstBytes)
	}
	if c.SamePath != 2 || math.Abs(c.SameLo-1.01) > 1e-9 || math.Abs(c.SameHi-100.0/97) > 1e-9 {
		t.Errorf("same path %d: %.3f-%.3f", c.SamePath, c.SameLo, c.SameHi)
	}
	if f := c.Single["fused"]; f.Alone != 122 || math.Abs(f.Tuned-130.1) > 1e-9 {
		t.Errorf("fused sums %+v", f)
	}
	var b strings.Builder
	WriteCheck(&b, cs, 0.02)
	for _, want := range []string{"| allreduce | 3 | 1.333 (4096 B) | 1 of 3 | 2: 1.010–1.031 |", "at every size: NO", "below every backend alone: NO"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// The check of the table tuned on 2 x H200, from the run recorded with it
// (docs/results/tune-2026-11-29-resident): the table takes the fastest
// path at 139 of 140 points; all-gather of 16 MiB went to NCCL while the
// fused kernel, which that sweep did not time there, was faster.
func TestCheckRecordedH200(t *testing.T) {
	tab, err := Read("testdata/h200x2-resident/tuning.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("testdata/h200x2-resident/policies.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	samples, err := ReadCSV(f, func(p string) string {
		if b, ok := strings.CutPrefix(p, "via-"); ok {
			return b
		}
		if p == Tuned {
			return p
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	serves := func(b, c string, n uint64) bool { return fused.Serves(b, c, n, 2) }
	same, points := 0, 0
	for _, c := range Check(tab, samples, 0.02, serves, "nccl") {
		same += c.SamePath
		points += c.Sizes
		if c.Coll == "allgather" && (c.WorstBytes != 16<<20 || c.SamePath != 27) {
			t.Errorf("allgather: worst at %d, same path at %d sizes", c.WorstBytes, c.SamePath)
		}
		if s := c.Single["nccl"]; c.Coll != "reduce_scatter" && s.Tuned >= s.Alone {
			t.Errorf("%s: tuned %.0f µs, NCCL alone %.0f", c.Coll, s.Tuned, s.Alone)
		}
	}
	if same != 139 || points != 140 {
		t.Errorf("the table takes the fastest path at %d of %d points", same, points)
	}
}
