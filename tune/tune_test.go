package tune

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChooseMarginAndRanges(t *testing.T) {
	s := []Sample{
		{"allreduce", "nccl", 8, 10}, {"allreduce", "fused", 8, 7},
		{"allreduce", "nccl", 64, 10}, {"allreduce", "fused", 64, 10.3}, // within 5%: fused stays
		{"allreduce", "nccl", 512, 10}, {"allreduce", "fused", 512, 11}, // beyond: nccl takes over
		{"allreduce", "nccl", 4096, 12}, {"allreduce", "fused", 4096, 11.9}, // within 5%: nccl stays
		{"bcast", "staged", 8, 5}, {"bcast", "nccl", 8, 5.1}, // prefer nccl within margin
	}
	got := Choose(s, 0.05, "nccl")
	want := []Range{
		{"allreduce", 0, 64, "fused"},
		{"allreduce", 65, math.MaxUint64, "nccl"},
		{"bcast", 0, math.MaxUint64, "nccl"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("range %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	rules := Rules(got, "")
	if rules[0] != "allreduce:cuda:0-64:fused" || rules[1] != "allreduce:cuda:65-inf:nccl" {
		t.Errorf("rules %v", rules)
	}
}

// The sweeps recorded on 2 x H200: fused beats NCCL over megabytes of
// sizes, staged never wins, and NCCL takes the largest sizes.
func TestChooseFromRecordedH200Sweep(t *testing.T) {
	var all []Sample
	for file, backendOf := range map[string]func(string) string{
		"bench_fused.csv":   only("fused"),
		"bench_staged.csv":  only("staged"),
		"bench_collmux.csv": func(p string) string { return map[string]string{"nccl": "nccl"}[p] },
	} {
		f, err := os.Open(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		s, err := ReadCSV(f, backendOf)
		f.Close()
		if err != nil || len(s) == 0 {
			t.Fatalf("%s: %d samples, %v", file, len(s), err)
		}
		all = append(all, s...)
	}
	rs := Choose(all, 0.05, "nccl")
	byColl := map[string][]Range{}
	for _, r := range rs {
		byColl[r.Coll] = append(byColl[r.Coll], r)
		if r.Backend == "staged" {
			t.Errorf("staged chosen for %+v: it is never the fastest there", r)
		}
	}
	for _, c := range []string{"allreduce", "allgather", "alltoall"} {
		fused := false
		for _, r := range byColl[c] {
			fused = fused || (r.Backend == "fused" && r.Hi-r.Lo >= 1<<20)
		}
		last := byColl[c][len(byColl[c])-1]
		if !fused || last.Backend != "nccl" || last.Hi != math.MaxUint64 {
			t.Errorf("%s: want a fused range of a megabyte or more and nccl last, got %+v", c, byColl[c])
		}
	}
	if r := byColl["reduce_scatter"]; len(r) != 1 || r[0].Backend != "nccl" {
		t.Errorf("reduce_scatter has no fused kernel: %+v", r)
	}
}

func only(b string) func(string) string {
	return func(p string) string {
		if p == b {
			return b
		}
		return ""
	}
}

func TestMerge(t *testing.T) {
	s := []Sample{{"allreduce", "nccl", 8, 10}, {"allreduce", "nccl", 8, 12}, {"reduce_scatter", "fused", 8, 1}, {"bcast", "fused", 8, 3}}
	got := Merge(s, func(b, c string, n uint64) bool { return b != "fused" || c != "reduce_scatter" })
	if len(got) != 2 || got[0].Micros != 11 || got[1].Coll != "bcast" {
		t.Errorf("Merge: %+v", got)
	}
}

func TestTableRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t.json")
	tab := Table{Version: TableVersion, GPUKey: "abc", Rules: []string{"allreduce:cuda:0-64:fused"}}
	if err := tab.Write(p); err != nil {
		t.Fatal(err)
	}
	got, err := Read(p)
	if err != nil || got.GPUKey != "abc" || got.RuleString() != "allreduce:cuda:0-64:fused" {
		t.Fatalf("%+v %v", got, err)
	}
	tab.Version = 99
	tab.Write(p)
	if _, err := Read(p); err == nil || !strings.Contains(err.Error(), "version 99") {
		t.Errorf("a future table version must be refused: %v", err)
	}
}

func TestReadCSVErrors(t *testing.T) {
	if _, err := ReadCSV(strings.NewReader("allreduce,fused,x,1\n"), only("fused")); err == nil {
		t.Error("bad bytes accepted")
	}
}
