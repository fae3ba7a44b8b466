package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// plot draws a figure per op and batch from the benchmarks' CSV (runs
// appended, headers repeated) and refuses what it cannot read.
func TestPlotOps(t *testing.T) {
	gemv := "op,m,k,batch,ranks,contender,us,speedup_vs_a,max_rel_diff_vs_a\n" +
		"gemv_allreduce,4096,4096,1,2,a:cublas+nccl,14.0,1.000,0\n" +
		"gemv_allreduce,4096,4096,1,2,d:fused,18.7,0.747,0\n" +
		"gemv_allreduce,4096,4096,1,2,gemv:cublas-alone,8.7,1.6,0\n" +
		"gemv_allreduce,8192,8192,4,2,a:cublas+nccl,29.3,1.000,0\n" +
		"op,m,k,batch,ranks,contender,us,speedup_vs_a,max_rel_diff_vs_a\n" +
		"gemv_allreduce,8192,8192,4,2,d:cublas,30.7,0.95,0\n"
	emb := "op,tables,rows,dim,batch,lookups,ranks,contender,us,speedup_vs_a\n" +
		"embedding_alltoall,26,1000000,128,16384,1-1,2,a:pool+nccl-alltoall,363.8,1.000\n" +
		"embedding_alltoall,26,1000000,128,16384,1-1,2,d:collmux-fused,250.2,1.454\n" +
		"embedding_alltoall,26,1000000,128,16384,1-1,2,pool-alone,156.6,2.324\n"
	moe := "op,tokens,k,n,experts,ranks,contender,us,speedup_vs_a\n" +
		"gemm_alltoall,4096,4096,4096,8,1,a:cublas+nccl-alltoallv,211.8,1.000\n" +
		"gemm_alltoall,4096,4096,4096,8,1,b:cublas+MPI_Alltoallv(collmux),233.3,0.908\n" +
		"gemm_alltoall,4096,4096,4096,8,1,d:collmux-fused,226.0,0.937\n" +
		"gemm_alltoall,4096,4096,4096,8,1,gemm-alone,193.7,1.094\n"
	rs := "op,m,k,n,ranks,contender,us,speedup_vs_a\n" +
		"gemm_reducescatter,8192,28672,8192,2,a:cublas+nccl-reducescatter,2100.0,1.000\n" +
		"gemm_reducescatter,8192,28672,8192,2,d:collmux-fused,1900.0,1.105\n" +
		"gemm_reducescatter,4096,28672,8192,2,a:cublas+nccl-reducescatter,1100.0,1.000\n" +
		"gemm_reducescatter,4096,28672,8192,2,d:collmux-fused,1000.0,1.100\n"
	for _, tc := range []struct {
		name, csv string
		files     []string // the PNGs written, or nil when it must fail
		err       string
	}{
		{"gemv", gemv, []string{"gemv_allreduce-batch1.png", "gemv_allreduce-batch4.png"}, ""},
		{"embedding", emb, []string{"embedding_alltoall.png"}, ""},
		{"moe", moe, []string{"gemm_alltoall-n4096.png"}, ""},
		{"reduce-scatter", rs, []string{"gemm_reducescatter-n8192.png"}, ""},
		{"no header", "gemv_allreduce,1,1,1,2,a:x,1,1,0\n", nil, "before the header"},
		{"unknown op", "op,contender,us\nallgather,a:x,1\n", nil, "is not one this command knows"},
		{"bad time", strings.Replace(emb, "250.2", "-3", 1), nil, "not a positive number"},
		{"no baseline", strings.Replace(emb, "a:pool", "x:pool", 1), nil, "needs a baseline"},
		{"no column", "op,m,contender,us\ngemv_allreduce,1,a:x,1\n", nil, `no column "batch"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "in.csv")
			if err := os.WriteFile(in, []byte(tc.csv), 0o600); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "plots")
			got, err := run("plot", "-o", out, in)
			if tc.files == nil {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("want an error with %q, got %v\n%s", tc.err, err, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, got)
			}
			for _, f := range tc.files {
				st, err := os.Stat(filepath.Join(out, f))
				if err != nil || st.Size() < 1000 {
					t.Errorf("%s: %v (size %v)", f, err, st)
				}
				if !strings.Contains(got, f) {
					t.Errorf("output does not name %s:\n%s", f, got)
				}
			}
			if ents, _ := os.ReadDir(out); len(ents) != len(tc.files) {
				t.Errorf("%d files written, want %d", len(ents), len(tc.files))
			}
		})
	}
}
