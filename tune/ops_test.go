package tune

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChooseOps(t *testing.T) {
	s := []OpsSample{
		{"gemv_allreduce", 2, 4096, 1, "cublas", 10}, {"gemv_allreduce", 2, 4096, 1, "nccl", 12},
		{"gemv_allreduce", 2, 8192, 1, "cublas", 20}, {"gemv_allreduce", 2, 8192, 1, "nccl", 19.5}, // within 5 %: cublas stays
		{"gemv_allreduce", 2, 16384, 1, "cublas", 50}, {"gemv_allreduce", 2, 16384, 1, "fused", 40},
		{"gemv_allreduce", 2, 4096, 4, "nccl", 10}, {"gemv_allreduce", 2, 4096, 4, "fused", 30},
		{"gemv_allreduce", 2, 4096, 4, "nccl", 14}, // a second run: averaged to 12, still the fastest
	}
	got := ChooseOps(s, 0.05)
	want := []OpsRange{
		{"gemv_allreduce", 2, 1, 3, 0, 8192, "cublas"},
		{"gemv_allreduce", 2, 1, 3, 8193, math.MaxUint64, "fused"},
		{"gemv_allreduce", 2, 4, MaxOpsBatch, 0, math.MaxUint64, "nccl"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("range %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// The forms recorded on 2 x H200 (docs/results/gpu-2026-11-30-fusedops-final,
// "a:cublas+nccl" being what the nccl form runs, outside collmux): cuBLAS +
// collmux's sum at batch 1, NCCL's form past it, the fused kernel never.
func TestChooseOpsFromRecordedH200(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "fusedops_h200x2.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ReadOpsCSV(f, func(c string) string {
		if c == "a:cublas+nccl" {
			return "nccl"
		}
		return FormOf(c)
	})
	if err != nil || len(s) != 36 || s[0].Ranks != 2 { // 4 m x 3 batches x 3 forms, 2 ranks
		t.Fatalf("%d samples, %v", len(s), err)
	}
	for _, r := range ChooseOps(s, 0.05) {
		if want := map[bool]string{true: "cublas", false: "nccl"}[r.BatchLo == 1]; r.Form != want {
			t.Errorf("%+v: want %s", r, want)
		}
	}
}

func TestReadOpsCSVErrors(t *testing.T) {
	for _, in := range []string{"gemv_allreduce,x,1,1,2,d:fused,3,1,0\n", "gemv_allreduce,8,1,0,2,d:fused,3,1,0\n", "gemv_allreduce,8\n",
		"gemv_allreduce,8,1,32,2,d:fused,3,1,0\n",  // a batch the operation does not take
		"gemv_allreduce,8,1,1,2,d:fused,0,1,0\n",   // no time: a form that did not run
		"gemv_allreduce,8,1,1,2,d:fused,3,1,0.5\n", // a result far from the baseline's
	} {
		if _, err := ReadOpsCSV(strings.NewReader(in), FormOf); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

// Times from runs on different numbers of ranks are chosen apart: a
// communicator of 8 ranks does not take what 2 measured fastest.
func TestChooseOpsByRanks(t *testing.T) {
	s := []OpsSample{{"gemv_allreduce", 2, 4096, 1, "cublas", 10}, {"gemv_allreduce", 2, 4096, 1, "nccl", 20},
		{"gemv_allreduce", 8, 4096, 1, "cublas", 30}, {"gemv_allreduce", 8, 4096, 1, "nccl", 20}}
	got := ChooseOps(s, 0.05)
	if len(got) != 2 || got[0].Ranks != 2 || got[0].Form != "cublas" || got[1].Ranks != 8 || got[1].Form != "nccl" || got[1].BatchHi != MaxOpsBatch {
		t.Errorf("%+v", got)
	}
}
