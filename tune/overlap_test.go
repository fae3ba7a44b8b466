package tune

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChooseOverlap(t *testing.T) {
	ag := func(b string, n uint64, gemm, alone, beside float64) OverlapSample {
		return OverlapSample{"allgather", b, n, gemm, alone, beside, 0}
	}
	for _, tc := range []struct {
		name    string
		samples []OverlapSample
		want    []Range
	}{
		{"the path that keeps to the target beats a faster one that slows the GEMMs",
			[]OverlapSample{ag("fused", 8, 0.20, 10, 11), ag("copy", 8, 0.01, 20, 21)},
			[]Range{{"allgather", 0, math.MaxUint64, "copy"}}},
		{"keeping the GEMMs fast is not enough: the collective must keep 90 % of its own speed",
			[]OverlapSample{ag("copy", 8, 0.00, 10, 30), ag("nccl", 8, 0.03, 10, 10.5)},
			[]Range{{"allgather", 0, math.MaxUint64, "nccl"}}},
		{"where none keeps to it, the least slowed GEMMs; negative slowdowns count as none",
			[]OverlapSample{ag("fused", 8, 0.30, 10, 11), ag("nccl", 8, -0.08, 10, 200), ag("copy", 8, 0.20, 10, 12)},
			[]Range{{"allgather", 0, math.MaxUint64, "nccl"}}},
		{"within 1 % of the least slowdown, the faster collective",
			[]OverlapSample{ag("nccl", 8, 0.105, 10, 200), ag("copy", 8, 0.11, 10, 12)},
			[]Range{{"allgather", 0, math.MaxUint64, "copy"}}},
		{"the previous size's choice stays within the margin, then gives way",
			[]OverlapSample{ag("copy", 8, 0, 10, 10), ag("fused", 8, 0, 10, 11),
				ag("copy", 64, 0, 10, 10.3), ag("fused", 64, 0, 10, 10),
				ag("copy", 512, 0, 10, 12), ag("fused", 512, 0, 11, 11)},
			[]Range{{"allgather", 0, 64, "copy"}, {"allgather", 65, math.MaxUint64, "fused"}}},
		{"a reduction may slow the GEMMs by 8 % and keep 80 % of its speed",
			[]OverlapSample{{"allreduce", "fused", 8, 0.07, 10, 12, 0}, {"allreduce", "nccl", 8, 0.09, 10, 10, 0}},
			[]Range{{"allreduce", 0, math.MaxUint64, "fused"}}},
	} {
		got := ChooseOverlap(tc.samples, 0.05)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: range %d %+v, want %+v", tc.name, i, got[i], tc.want[i])
			}
		}
	}
}

// The overlap runs recorded on 2 x H200 (docs/results/gpu-2026-11-30-overlap):
// NCCL beside the GEMMs takes 20-30 times as long as alone, so wherever the
// overlap policy's path (the copy engines for all-gather and all-to-all)
// was measured it is chosen; the ranks' lines are taken together.
func TestChooseOverlapFromRecordedH200(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "overlap_h200x2.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ReadOverlapCSV(f, func(p string) string { return map[string]string{"nccl": "nccl", "overlap": "copy"}[p] })
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 40 { // 4 collectives x 5 sizes x 2 paths, a line per rank each
		t.Fatalf("%d samples, want 40", len(s))
	}
	for _, x := range s {
		if x.Coll == "allgather" && x.Bytes == 65536 && x.Backend == "nccl" && (x.BesideUs < 600 || x.JPerGB == 0) {
			t.Errorf("the ranks' lines of a point are not taken together (the slowest rank's time, rank 0's energy): %+v", x)
		}
	}
	for _, r := range ChooseOverlap(s, 0.05) {
		if (r.Coll == "allgather" || r.Coll == "alltoall") && r.Backend != "copy" {
			t.Errorf("%+v: the copy engines keep the GEMMs' speed and their own", r)
		}
	}
}

func TestReadOverlapCSVErrors(t *testing.T) {
	for _, in := range []string{"allgather,copy,8,0,1,1,x,1,1,1,1,0,0\n", "allgather,copy,8,0\n", "allgather,copy,8,0,1,1,NaN,1,1,1,1,0,0\n"} {
		if _, err := ReadOverlapCSV(strings.NewReader(in), func(p string) string { return p }); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

// Two runs of one point appended in one file stay two samples (a rank
// that comes again starts the next run's); MergeOverlap averages them and
// drops what the backend cannot serve.
func TestOverlapRunsMerged(t *testing.T) {
	in := "coll,path,bytes,rank,gemm_ms,gemm_together_ms,gemm_slowdown,coll_us,coll_together_us,coll_slowdown,calls_together,coll_J,J_per_GB\n" +
		"allgather,via-copy,8,0,50,51,0.02,10,11,0.1,5,0,0\n" +
		"allgather,via-copy,8,1,50,52,0.04,12,13,0.1,5,0.1,4\n" +
		"allgather,via-copy,8,0,50,51,0.00,8,9,0.1,5,0,0\n" +
		"allgather,via-copy,8,1,50,51,0.02,8,9,0.1,5,0.1,2\n" +
		"allreduce,via-copy,8,0,50,51,0.00,8,9,0.1,5,0,0\n"
	s, err := ReadOverlapCSV(strings.NewReader(in), func(p string) string { return strings.TrimPrefix(p, "via-") })
	if err != nil || len(s) != 3 {
		t.Fatalf("%d samples (%v), want 3: %+v", len(s), err, s)
	}
	if s[0].GEMMSlowdown != 0.04 || s[0].BesideUs != 13 || s[0].JPerGB != 4 || s[1].AloneUs != 8 {
		t.Errorf("ranks' lines not taken together run by run: %+v", s)
	}
	m := MergeOverlap(s, func(b, c string, n uint64) bool { return c != "allreduce" })
	if len(m) != 1 || m[0].GEMMSlowdown != 0.03 || m[0].AloneUs != 10 || m[0].BesideUs != 11 || m[0].JPerGB != 3 {
		t.Errorf("merged: %+v", m)
	}
}
