// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// nvtxRange is one range a rank opened, as the stand-in tool wrote it.
type nvtxRange struct {
	fn, size, backend string
}

// readRanges reads the stand-in NVTX tool's file (tests/fakenvtx): every
// push is at depth 0 (collmux's ranges never nest: the router's re-entry
// guard sends inner MPI calls straight to MPI) and is followed by its pop
// on the same thread before the next push.
func readRanges(t *testing.T, path string) []nvtxRange {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the NVTX tool recorded nothing: %v", err)
	}
	defer f.Close()
	name := regexp.MustCompile(`^(MPI_\w+) (?:(\d+ (?:B|KiB|MiB|GiB)) )?(mpi|nccl|fused|staged)$`)
	open := map[string]bool{} // by "pid tid"
	var out []nvtxRange
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		w := strings.SplitN(sc.Text(), " ", 5)
		if len(w) < 4 {
			t.Fatalf("line %q", sc.Text())
		}
		thread, depth := w[0]+" "+w[1], w[3]
		switch {
		case w[2] == "push" && len(w) == 5 && depth == "0" && !open[thread]:
			m := name.FindStringSubmatch(w[4])
			if m == nil {
				t.Fatalf("range %q: want \"MPI_<function> [<size> <unit>] <backend>\"", w[4])
			}
			out = append(out, nvtxRange{m[1], m[2], m[3]})
			open[thread] = true
		case w[2] == "pop" && depth == "1" && open[thread]:
			open[thread] = false
		default:
			t.Fatalf("line %q: ranges must not nest, and each push is popped on its thread", sc.Text())
		}
	}
	for th, o := range open {
		if o {
			t.Errorf("thread %s left a range open", th)
		}
	}
	return out
}

// family is the statistics' family of an MPI function that colltest calls
// ("MPI_Allreduce_c" is "allreduce").
func family(fn string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimPrefix(fn, "MPI_")), "_c")
}

// NVTX ranges for Nsight Systems, through NVTX_INJECTION64_PATH and a
// stand-in of the tool's injection library that records each range. On
// host buffers every routed call is one range named after its function,
// size and backend (the MPI), as many per family as statistics count; on
// device buffers under the CUDA stand-in the staged calls show, each after
// the backends that declined it; without the variable, or with a library
// that is no tool or whose initialisation fails, there are none (the
// latter two say why) and the program runs as ever.
func TestNVTXRanges(t *testing.T) {
	tool := filepath.Join(stubLib(t, "fakenvtx", "libfakenvtx.so"), "libfakenvtx.so")
	notTool := filepath.Join(fakeCUDA(t), "libcuda.so.1")
	cases := []struct {
		name    string
		device  bool
		env     []string // NVTX_INJECTION64_PATH and the stand-in's switches
		ranges  bool
		warning string
	}{
		{"host", false, []string{"NVTX_INJECTION64_PATH", tool}, true, ""},
		{"device", true, []string{"NVTX_INJECTION64_PATH", tool}, true, ""},
		{"unset", true, nil, false, ""},
		{"tool-fails", false, []string{"NVTX_INJECTION64_PATH", tool, "FAKENVTX_FAIL", "1"}, false, "its InitializeInjectionNvtx2 failed: no NVTX ranges"},
		{"not-a-tool", false, []string{"NVTX_INJECTION64_PATH", notTool}, false, "no InitializeInjectionNvtx2: no NVTX ranges"},
	}
	for _, m := range impls(t) {
		for _, tc := range cases {
			t.Run(m.name+"/"+tc.name, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "ranges")
				env, statsFile := preloaded(t, append([]string{"FAKENVTX_OUT", out}, tc.env...)...)
				prog := program(t, m, "colltest.c", "colltest")
				if tc.device {
					env["LD_LIBRARY_PATH"] = fakeCUDA(t)
					prog = deviceProgram(t, m, "colltest.c", "colltest")
				}
				got, errs, err := run(t, m, 2, env, prog)
				if err != nil || !strings.Contains(got, "colltest: 2 ranks, 0 failures") {
					t.Fatalf("under collmux: %v\n%s\n%s", err, tail(got), errs)
				}
				if tc.warning != "" && strings.Count(errs, tc.warning) != 2 {
					t.Errorf("want each rank to warn %q; stderr:\n%s", tc.warning, errs)
				}
				if !tc.ranges {
					if _, err := os.Stat(out); err == nil {
						t.Fatalf("ranges recorded without a working NVTX tool")
					}
					return
				}
				ranges := readRanges(t, out)
				r := readStats(t, statsFile)
				n, bytes := map[string]uint64{}, map[string]uint64{} // by family/backend: ranges, the bytes they name
				unsized := map[string]bool{}
				for _, rg := range ranges {
					k := family(rg.fn) + "/" + rg.backend
					n[k]++
					var v uint64
					var unit string
					if _, err := fmt.Sscan(rg.size, &v, &unit); err != nil {
						unsized[k] = true
						continue
					}
					bytes[k] += v << (10 * strings.Index("BKMG", unit[:1]))
				}
				if !tc.device {
					want, wantBytes := map[string]uint64{}, map[string]uint64{}
					for _, row := range r.Rows {
						want[row.Coll+"/"+row.Backend] += row.Calls
						wantBytes[row.Coll+"/"+row.Backend] += row.Bytes
					}
					if fmt.Sprint(n) != fmt.Sprint(want) {
						t.Errorf("ranges by family and backend %v;\nstatistics count %v", n, want)
					}
					// a size is left out where collmux would have to ask
					// the MPI about a host call's datatype before the MPI
					// checked it
					checked := 0
					for k, b := range bytes {
						if !unsized[k] {
							checked++
							if b != wantBytes[k] {
								t.Errorf("%s: the ranges name %d bytes, statistics count %d", k, b, wantBytes[k])
							}
						}
					}
					if checked < 3 {
						t.Errorf("sizes named in only %d families (some without: %v)", checked, unsized)
					}
					return
				}
				// a call the staged path took is one staged range; a
				// staged range may also be a decline (no device buffer
				// on this rank), so there are at least as many
				for _, row := range r.Rows {
					if k := row.Coll + "/" + row.Backend; n[k] < row.Calls {
						t.Errorf("%s: %d ranges for %d calls", k, n[k], row.Calls)
					}
				}
				if n["allreduce/staged"] == 0 || r.Calls("allreduce", "staged") == 0 {
					t.Errorf("no staged allreduce: ranges %v", n)
				}
			})
		}
	}
}
