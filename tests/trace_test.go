// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"collmux/trace"
)

// COLLMUX_TRACE: on 2 ranks, each rank's file is valid JSON, 0600, with
// one "X" event per routed call: per family and backend, the events of
// calls that succeeded (and are not a persistent call's set-up, which
// statistics count at each start instead) are as many as that rank's
// statistics count; each event names an MPI function of its family; and
// `collmux trace merge` joins both ranks in time order. Host buffers
// (colltest: the MPI backend) and device buffers under the CUDA stand-in
// with two threads under MPI_THREAD_MULTIPLE (nbtest: staged,
// nonblocking and persistent calls).
func TestTraceTimeline(t *testing.T) {
	tool := filepath.Join(t.TempDir(), "collmux")
	if out, err := exec.Command("go", "build", "-o", tool, "collmux/cmd/collmux").CombinedOutput(); err != nil {
		t.Fatalf("building the tool: %v\n%s", err, out)
	}
	for _, m := range impls(t) {
		for _, dev := range []bool{false, true} {
			name := map[bool]string{false: "colltest", true: "nbtest-device-threads"}[dev]
			t.Run(m.name+"/"+name, func(t *testing.T) {
				dir := t.TempDir()
				prefix := filepath.Join(dir, "tl")
				env, statsFile := preloaded(t, "COLLMUX_TRACE", prefix)
				prog, sane := []string{program(t, m, "colltest.c", "colltest")}, "colltest: 2 ranks, 0 failures"
				if dev {
					env["LD_LIBRARY_PATH"] = fakeCUDA(t)
					prog, sane = []string{deviceProgram(t, m, "nbtest.c", "nbtest"), "threads"}, "nbtest: 2 ranks, 2 threads, 0 failures"
				}
				out, errs, err := run(t, m, 2, env, prog...)
				if err != nil || !strings.Contains(out, sane) {
					t.Fatalf("under collmux: %v\n%s\n%s", err, tail(out), errs)
				}
				r := readStats(t, statsFile)
				var files []string
				total := 0
				for rank := 0; rank < 2; rank++ {
					p := fmt.Sprintf("%s.%d.json", prefix, rank)
					files = append(files, p)
					st, err := os.Stat(p)
					if err != nil {
						t.Fatalf("rank %d wrote no trace: %v", rank, err)
					}
					if st.Mode().Perm() != 0o600 {
						t.Errorf("%s: mode %v", p, st.Mode().Perm())
					}
					f, err := trace.Read(p)
					if err != nil {
						t.Fatal(err)
					}
					if f.OtherData.Rank != rank || f.OtherData.Ranks != 2 || f.OtherData.Dropped != 0 || f.OtherData.Clock != trace.Clock {
						t.Errorf("rank %d's file says %+v", rank, f.OtherData)
					}
					traced := map[string]uint64{}
					threads := map[int]bool{}
					for _, e := range f.TraceEvents {
						if e.Ph != "X" {
							continue
						}
						total++
						var a struct {
							Backend, Mem, Form string
							Bytes              uint64
							RC                 int
						}
						if err := json.Unmarshal(e.Args, &a); err != nil || a.Backend == "" || a.Mem == "" || a.Form == "" {
							t.Fatalf("event %+v: args %s (%v)", e, e.Args, err)
						}
						if e.PID != rank || e.TS < 0 || e.Dur < 0 {
							t.Errorf("event %+v on rank %d", e, rank)
						}
						fn := strings.ToLower(strings.TrimPrefix(e.Name, "MPI_"))
						if !strings.HasPrefix(e.Name, "MPI_") || !strings.Contains(fn, e.Cat) {
							t.Errorf("event %s is in family %q", e.Name, e.Cat)
						}
						if dev && a.Mem != "cuda" && e.Cat != "barrier" && a.Bytes > 0 {
							t.Errorf("device run: %s on %s memory", e.Name, a.Mem)
						}
						threads[e.TID] = true
						if a.RC == 0 && a.Form != "persistent" {
							traced[e.Cat+"/"+a.Backend]++
						}
					}
					counted := map[string]uint64{}
					for _, row := range r.RankRows {
						if row.Rank == rank {
							counted[row.Coll+"/"+row.Backend] += row.Calls
						}
					}
					if len(counted) == 0 || fmt.Sprint(traced) != fmt.Sprint(counted) {
						t.Errorf("rank %d: traced calls %v;\nstatistics count %v", rank, traced, counted)
					}
					if dev && len(threads) < 2 {
						t.Errorf("rank %d: events of threads %v, want the program's 2", rank, threads)
					}
				}
				merged := filepath.Join(dir, "all.json")
				if out, err := exec.Command(tool, append([]string{"trace", "merge", merged}, files...)...).CombinedOutput(); err != nil {
					t.Fatalf("collmux trace merge: %v\n%s", err, out)
				}
				f, err := trace.Read(merged)
				if err != nil {
					t.Fatal(err)
				}
				n, pids, last := 0, map[int]int{}, -1.0
				for _, e := range f.TraceEvents {
					if e.Ph == "X" {
						n++
						pids[e.PID]++
						if e.TS < last {
							t.Fatalf("merged events out of order at %+v", e)
						}
						last = e.TS
					}
				}
				if n != total || pids[0] == 0 || pids[1] == 0 {
					t.Errorf("merged trace: %d calls (ranks %v); the ranks' files hold %d", n, pids, total)
				}
			})
		}
	}
}
