package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var (
	stubMu   sync.Mutex
	stubDirs = map[string]string{}
)

// stubLib builds tests/<name>/<name>.c into a shared library called
// soname, once per run, and returns its folder.
func stubLib(t *testing.T, name, soname string) string {
	t.Helper()
	stubMu.Lock()
	defer stubMu.Unlock()
	if d, ok := stubDirs[name]; ok {
		return d
	}
	d, err := os.MkdirTemp("", "collmux-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(repoRoot(), "tests", name, name+".c")
	if out, err := exec.Command("cc", "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", filepath.Join(d, soname), src).CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v: %s", soname, err, out)
	}
	stubDirs[name] = d
	return d
}

// fakeCUDA builds tests/fakecuda into libcuda.so.1 and returns its folder:
// a stand-in for the CUDA driver whose "device memory" the host cannot
// touch (tests/fakecuda/fakecuda.c), so that the CPU suite runs collmux's
// device-buffer logic against real MPIs. Real CUDA and the NCCL and fused
// paths are tested on the GPU machine (scripts/gpu-test.sh).
func fakeCUDA(t *testing.T) string { return stubLib(t, "fakecuda", "libcuda.so.1") }

// deviceProgram builds a test program in its -DCOLLTEST_CUDA form (every
// buffer in device memory) against the stand-in.
func deviceProgram(t *testing.T, m mpiImpl, src, out string) string {
	dir := fakeCUDA(t)
	return program(t, m, src, out+"-dev", "-DCOLLTEST_CUDA", "-I"+filepath.Join(repoRoot(), "tests", "fakecuda"),
		"-pthread", "-ldl", "-L"+dir, "-l:libcuda.so.1", "-Wl,-rpath,"+dir)
}

// Every intercepted call on device buffers, through the staged path (the
// stand-in has no NCCL and no kernels): colltest (blocking collectives),
// nbtest (nonblocking and persistent collectives, every completion call)
// and p2ptest (point-to-point in every mode, probes, wildcards,
// truncation, cancellation), with their buffers in memory the MPI cannot
// read, give byte for byte what the host build gives natively; their
// statistics show staged calls; and without collmux the same device build
// fails, as on a real MPI without CUDA support.
func TestDeviceBuffersStaged(t *testing.T) {
	cases := []struct {
		src, sane string
		families  []string // families whose statistics must show staged calls
		args      []string
	}{
		{"colltest.c", "colltest: %d ranks, 0 failures", []string{"allreduce", "bcast", "alltoallv", "scan", "reduce_scatter"}, nil},
		{"nbtest.c", "nbtest: %d ranks, 0 failures", []string{"allreduce", "alltoallw", "gatherv"}, nil},
		{"p2ptest.c", "p2ptest: %d ranks, 0 failures", []string{"send", "recv", "sendrecv"}, nil},
		{"nbtest.c", "nbtest: %d ranks, 2 threads, 0 failures", []string{"allreduce"}, []string{"threads"}},
		{"p2ptest.c", "p2ptest: %d ranks, 2 threads, 0 failures", []string{"send", "recv"}, []string{"threads"}},
	}
	for _, m := range impls(t) {
		dir := fakeCUDA(t)
		for _, tc := range cases {
			name := strings.TrimSuffix(tc.src, ".c")
			host := program(t, m, tc.src, name, "-pthread", "-ldl")
			dev := deviceProgram(t, m, tc.src, name)
			maxNP := maxRequestRanks(m)
			if tc.args != nil {
				maxNP = 2
			}
			for np := 1; np <= maxNP; np++ {
				if tc.args != nil && np != 2 {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s%s/np%d", m.name, name, strings.Join(tc.args, ""), np), func(t *testing.T) {
					native, errs, err := run(t, m, np, nil, append([]string{host}, tc.args...)...)
					if err != nil || lastLine(native) != fmt.Sprintf(tc.sane, np) {
						t.Fatalf("native host run: %v, ends %q\n%s", err, lastLine(native), errs)
					}
					env, statsFile := preloaded(t, "LD_LIBRARY_PATH", dir)
					got, errs, err := run(t, m, np, env, append([]string{dev}, tc.args...)...)
					if err != nil {
						t.Fatalf("device build under collmux: %v\n%s\n%s", err, tail(got), errs)
					}
					if got != native {
						t.Fatalf("device build under collmux differs from the native host run:\n%s\n%s", diff(native, got), errs)
					}
					r := readStats(t, statsFile)
					for _, f := range tc.families {
						if np == 1 {
							break // one rank moves nothing in some of them
						}
						if r.Calls(f, "staged") == 0 {
							t.Errorf("statistics show no staged %s call", f)
						}
					}
				})
			}
		}
		// bad arguments on device buffers: the errors MPI gives on host
		// ones, also with COLLMUX_CHECK (which must not communicate before
		// MPI has judged the call: rank 0 makes the bad calls alone)
		t.Run(m.name+"/errtest", func(t *testing.T) {
			host := program(t, m, "errtest.c", "errtest")
			dev := deviceProgram(t, m, "errtest.c", "errtest")
			native, errs, err := run(t, m, 2, nil, host)
			if err != nil || !strings.Contains(native, "sum=2") {
				t.Fatalf("native: %v\n%s\n%s", err, native, errs)
			}
			for _, check := range []string{"0", "1"} {
				env, _ := preloaded(t, "LD_LIBRARY_PATH", dir, "COLLMUX_CHECK", check)
				got, errs, err := run(t, m, 2, env, dev)
				if err != nil || got != native {
					t.Fatalf("device buffers under collmux, COLLMUX_CHECK=%s: %v\n%s\n%s", check, err, diff(native, got), errs)
				}
			}
		})
		// colltest under COLLMUX_CHECK too: its calls of no bytes, where
		// rank 0 passes NULL and the others device buffers, agree
		t.Run(m.name+"/colltest-check", func(t *testing.T) {
			host := program(t, m, "colltest.c", "colltest")
			dev := deviceProgram(t, m, "colltest.c", "colltest")
			native, errs, err := run(t, m, 3, nil, host)
			if err != nil {
				t.Fatalf("native: %v\n%s", err, errs)
			}
			env, _ := preloaded(t, "LD_LIBRARY_PATH", dir, "COLLMUX_CHECK", "1")
			if got, errs, err := run(t, m, 3, env, dev); err != nil || got != native {
				t.Fatalf("device buffers under COLLMUX_CHECK=1: %v\n%s\n%s", err, diff(native, got), errs)
			}
		})
		// the stand-in is faithful: an MPI handed its device pointers fails
		t.Run(m.name+"/control", func(t *testing.T) {
			dev := deviceProgram(t, m, "colltest.c", "colltest")
			for _, env := range []map[string]string{
				{"LD_LIBRARY_PATH": dir},
				{"LD_LIBRARY_PATH": dir, "LD_PRELOAD": libPath(t), "COLLMUX_DISABLE": "1"},
			} {
				out, _, err := run(t, m, 2, env, dev)
				if err == nil && strings.Contains(out, "0 failures") {
					t.Errorf("the device build passed without collmux (%v): the stand-in's device memory is readable", env)
				}
			}
		})
	}
}

// stagedRun runs the device build of src at 2 ranks under collmux on the
// CUDA stand-in, with the environment variables of extra (name, value, ...)
// besides; it must exit 0 and report no failures. Its output, error
// output and statistics file.
func stagedRun(t *testing.T, m mpiImpl, src string, extra ...string) (out, errs, statsFile string) {
	t.Helper()
	name := strings.TrimSuffix(src, ".c")
	dir := fakeCUDA(t)
	prog := deviceProgram(t, m, src, name)
	env, statsFile := preloaded(t, append([]string{"LD_LIBRARY_PATH", dir}, extra...)...)
	out, errs, err := run(t, m, 2, env, prog)
	if err != nil || !strings.Contains(out, name+": 2 ranks, 0 failures") {
		t.Fatalf("%v\n%s\n%s", err, out, errs)
	}
	return out, errs, statsFile
}

// The pinned buffer a thread stages its blocking device calls through goes
// when the thread does, and the last ones at MPI_Finalize: stagethreads
// starts and joins 20 rounds of 4 threads making device point-to-point
// calls, and the stand-in counts the pinned allocations left (before the
// fix, one per thread that ever staged a call: 80 after the rounds).
func TestStagingMemoryFreed(t *testing.T) {
	line := regexp.MustCompile(`stagethreads: rank (\d): \d+ rounds of \d+ threads, pinned allocations live: at most (-?\d+) after a round, (-?\d+) before MPI_Finalize, (-?\d+) after`)
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			out, _, statsFile := stagedRun(t, m, "stagethreads.c")
			seen := 0
			for _, mm := range line.FindAllStringSubmatch(out, -1) {
				seen++
				if got := mm[2] + " " + mm[3] + " " + mm[4]; got != "0 1 0" {
					t.Errorf("rank %s: pinned allocations live after a round, before and after MPI_Finalize: %s, want 0 1 0", mm[1], got)
				}
			}
			if seen != 2 {
				t.Fatalf("want a line from each of 2 ranks:\n%s", out)
			}
			if r := readStats(t, statsFile); r.Calls("sendrecv", "staged") == 0 {
				t.Errorf("statistics show no staged sendrecv call")
			}
		})
	}
}

// Device sends whose requests the program frees at once, acknowledged by
// a reply and never completed by a completion call (freedsends), are
// finished by collmux as it makes its next request: 200 such sends leave
// a few pinned staging buffers, not one each (200 before the fix).
func TestFreedSendsFinished(t *testing.T) {
	live := regexp.MustCompile(`pinned allocations live after them: (\d+)`)
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			out, _, _ := stagedRun(t, m, "freedsends.c")
			mm := live.FindStringSubmatch(out)
			if mm == nil {
				t.Fatalf("no count of pinned allocations:\n%s", out)
			}
			if n, _ := strconv.Atoi(mm[1]); n > 4 {
				t.Errorf("%d pinned allocations live after 200 freed sends, want at most 4: the freed requests were not finished", n)
			}
		})
	}
}

// A device receive collmux cannot stage (pinned host memory runs out: the
// stand-in allows 4 allocations) fails with an error and a message naming
// the call, and never reaches the MPI with its device buffer (which
// segfaulted when the MPI wrote the message there); the receives posted
// before it complete with their data.
func TestUnstageableCallFails(t *testing.T) {
	line := regexp.MustCompile(`nopinned: (\d+) receives posted, (\d+) refused, (\d+) failures`)
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			dir := fakeCUDA(t)
			prog := deviceProgram(t, m, "nopinned.c", "nopinned")
			env, _ := preloaded(t, "LD_LIBRARY_PATH", dir, "FAKECUDA_PINNED_MAX", "4")
			out, errs, err := run(t, m, 1, env, prog)
			mm := line.FindStringSubmatch(out)
			if err != nil || mm == nil {
				t.Fatalf("%v\n%s\n%s", err, out, errs)
			}
			if mm[1] == "0" || mm[2] == "0" || mm[3] != "0" || !strings.Contains(errs, "MPI_Irecv: device memory could not be staged") {
				t.Errorf("want some receives posted and some refused with a message, none wrong:\n%s\n%s", out, errs)
			}
		})
	}
}

// A rank with nothing to exchange in a gatherv (also persistent),
// scatterv, alltoallv (also nonblocking) or graph neighbourhood call
// passes NULL, as CuPy and PyTorch do for empty arrays, while its peers
// pass device buffers (emptyrank): every result is right, on a new
// communicator and on one whose ranks have run a device all-reduce
// together; on the latter the empty rank takes the device route with its
// peers (they agree on it), even under a rule on the datatype class,
// which its own datatype (MPI_BYTE) would not meet, and a device root
// with host leaves is staged. COLLMUX_CHECK finds every rank in the same
// call. Before, the empty rank took the MPI while its peers took a GPU
// path: on the GPU machine mpi4py's suite hung in the root's NCCL
// set-up, and here COLLMUX_CHECK stopped the calls as ranks that
// disagree on the memory kind.
func TestEmptyRankRoutesWithItsPeers(t *testing.T) {
	for _, m := range impls(t) {
		dir := fakeCUDA(t)
		prog := deviceProgram(t, m, "emptyrank.c", "emptyrank")
		for _, np := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/np%d", m.name, np), func(t *testing.T) {
				env, _ := preloaded(t, "LD_LIBRARY_PATH", dir, "COLLMUX_CHECK", "1", "COLLMUX_LOG", "debug")
				out, errs, err := run(t, m, np, env, prog)
				if err != nil || !strings.Contains(out, fmt.Sprintf("emptyrank: %d ranks, 0 failures", np)) || strings.Contains(errs, "disagree") {
					t.Fatalf("%v\n%s\n%s", err, out, errs)
				}
				for _, fn := range []string{"gatherv", "scatterv", "alltoallv"} {
					if !regexp.MustCompile(`(?m)^collmux\[rank 1\]: ` + fn + ` on cuda memory`).MatchString(errs) {
						t.Errorf("the empty rank never took the device route of its peers for %s:\n%s", fn, errs)
					}
				}
				// the persistent gatherv collmux holds is routed at its
				// starts: its init, which nothing routed, is not explained
				// as a device call sent to the MPI
				if held := regexp.MustCompile(`(?m)^collmux\[rank \d+\]: gatherv on cuda memory, 0 B -> mpi \(no rule\)$`).FindString(errs); held != "" {
					t.Errorf("a held persistent init explained as %q:\n%s", held, errs)
				}
				// the empty rank's gatherv passes nothing of MPI_BYTE ("other"),
				// its peers ints: a rule on the datatype class must not split
				// them (the backend that ends the call may differ: a path that
				// declines passes it on, and the staged path gives an empty
				// rank's host buffers to the MPI, which matches staged peers)
				env, _ = preloaded(t, "LD_LIBRARY_PATH", dir, "COLLMUX_LOG", "debug", "COLLMUX_RULES", "gatherv:cuda:*:staged:dtype=other")
				out, errs, err = run(t, m, np, env, prog)
				if err != nil || !strings.Contains(out, fmt.Sprintf("emptyrank: %d ranks, 0 failures", np)) {
					t.Fatalf("with a dtype rule: %v\n%s\n%s", err, out, errs)
				}
				routes := map[string]map[string]bool{}
				for _, d := range regexp.MustCompile(`(?m)^collmux\[rank (\d+)\]: gatherv on cuda memory, .* -> \S+ \(([^;)]*)`).FindAllStringSubmatch(errs, -1) {
					if routes[d[1]] == nil {
						routes[d[1]] = map[string]bool{}
					}
					routes[d[1]][d[2]] = true
				}
				if len(routes["1"]) == 0 {
					t.Fatalf("with a dtype rule, the empty rank never took the device route:\n%s", errs)
				}
				for d := range routes["1"] {
					if !routes["0"][d] {
						t.Errorf("with a dtype rule, the empty rank's gatherv took %s, which rank 0's never did:\n%s", d, errs)
					}
				}
			})
		}
	}
}

// A device request whose work fails (its data cannot reach the device:
// the stand-in fails every copy there of 4004 bytes) reports the failure
// as MPI reports a failed request (reqerr): an error of class
// MPI_ERR_OTHER from MPI_Wait and MPI_Waitany (with the failed request's
// index), and from MPI_Request_get_status and the MPI_Wait after it (which
// got 0 before), MPI_ERR_IN_STATUS from MPI_Waitall and
// MPI_Testsome with the error in that request's MPI_ERROR and
// MPI_SUCCESS in the others', the communicator's error handler called
// once with what the call returns, a persistent call failing at each
// start, and no handler called through a communicator freed before its
// request completed. Before, the calls returned MPI_ERR_OTHER alone, with no handler
// called and no status telling which request failed.
func TestFailedRequestsReportedAsMPIDoes(t *testing.T) {
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			_, errs, _ := stagedRun(t, m, "reqerr.c", "FAKECUDA_FAIL_TO_DEVICE", "4004")
			if !strings.Contains(errs, "MPI_Irecv: copying the received data back to the device failed") {
				t.Errorf("no message names the failed call:\n%s", errs)
			}
		})
	}
}

// Ranks that pass one type signature through different datatypes (a
// contiguous derived type or MPI_2INT on one, basic elements on the
// others; strided types on one side of a call; MPI_DATATYPE_NULL where a
// datatype is not significant) route each call alike: with rules that
// send ints and everything else to different backends, every rank
// explains the same decisions (COLLMUX_LOG); a rank whose datatype does
// not move as bytes packs it for the device backend instead of declining
// it (the peers would run that backend); and the device build under
// collmux prints what the host build prints natively. Before, the rank
// with the derived type routed as "other" and its peers as "int".
func TestMixedDatatypesRouteAlike(t *testing.T) {
	decision := regexp.MustCompile(`(?m)^collmux\[rank (\d+)\]: (\S+ on \S+ memory, .* -> .*)$`)
	packed := regexp.MustCompile(`(?m)^collmux\[rank \d+\]: (MPI_\w+): a datatype that does not move as bytes, packed`)
	wantPacked := []string{"MPI_Bcast", "MPI_Ibcast", "MPI_Gather", "MPI_Igather", "MPI_Scatter", "MPI_Iscatter", "MPI_Allgather",
		"MPI_Allgatherv", "MPI_Alltoallv", "MPI_Neighbor_allgather"}
	for _, m := range impls(t) {
		dir := fakeCUDA(t)
		host := program(t, m, "typemix.c", "typemix")
		dev := deviceProgram(t, m, "typemix.c", "typemix")
		for _, np := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/np%d", m.name, np), func(t *testing.T) {
				native, errs, err := run(t, m, np, nil, host)
				if err != nil || lastLine(native) != fmt.Sprintf("typemix: %d ranks", np) || strings.Contains(native, "error") {
					t.Fatalf("native host run: %v\n%s\n%s", err, native, errs)
				}
				env, statsFile := preloaded(t, "LD_LIBRARY_PATH", dir, "COLLMUX_LOG", "debug",
					"COLLMUX_RULES", "*:cuda:*:nccl:dtype=int#*:cuda:*:fused:dtype=float,other")
				got, errs, err := run(t, m, np, env, dev)
				if err != nil || got != native {
					t.Fatalf("device build under collmux: %v\n%s\n%s", err, diff(native, got), errs)
				}
				seen := map[string]map[string]bool{}
				for _, d := range decision.FindAllStringSubmatch(errs, -1) {
					if seen[d[1]] == nil {
						seen[d[1]] = map[string]bool{}
					}
					seen[d[1]][d[2]] = true
				}
				if len(seen) != np {
					t.Fatalf("decisions explained by %d ranks, want %d:\n%s", len(seen), np, errs)
				}
				for r, set := range seen {
					for d := range set {
						for o, other := range seen {
							if !other[d] {
								t.Errorf("rank %s decided %q, rank %s did not", r, d, o)
							}
						}
					}
				}
				fns := map[string]bool{}
				for _, p := range packed.FindAllStringSubmatch(errs, -1) {
					fns[p[1]] = true
				}
				for _, f := range wantPacked {
					if !fns[f] {
						t.Errorf("no rank packed its datatype for %s", f)
					}
				}
				if fns["MPI_Alltoall"] {
					t.Errorf("MPI_Alltoall was packed: its contiguous types move as bytes")
				}
				r := readStats(t, statsFile)
				for _, f := range []string{"bcast", "gather", "allgatherv", "alltoallv", "neighbor_allgather"} {
					if r.Calls(f, "staged") == 0 {
						t.Errorf("statistics show no staged %s call", f)
					}
				}
			})
		}
	}
}
