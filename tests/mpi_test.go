package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"collmux/dispatch"
)

// Every intercepted collective, every datatype/op combination of colltest,
// 1-4 ranks: output under collmux (statistics on, statistics off, and
// disabled) is byte-identical to the native run, and the statistics prove
// that each collective went through collmux.
func TestCollectivesMatchNative(t *testing.T) {
	for _, m := range impls(t) {
		prog := program(t, m, "colltest.c", "colltest")
		for np := 1; np <= 4; np++ {
			t.Run(fmt.Sprintf("%s/np%d", m.name, np), func(t *testing.T) {
				sameAsNative(t, m, np, prog, fmt.Sprintf("colltest: %d ranks, 0 failures", np))
			})
		}
	}
}

// The same from Fortran (mpif.h / `use mpi`): Open MPI's Fortran binding
// calls PMPI_* directly, so collmux has Fortran entry points of its own
// (converting handles, MPI_IN_PLACE, integers by reference); under MPICH
// they forward to MPICH's binding, which calls the C functions.
func TestFortranMatchesNative(t *testing.T) {
	for _, m := range impls(t) {
		if why := noFortran(m); why != "" {
			t.Logf("skipped for %s: %s", m.name, why)
			continue
		}
		if _, err := exec.LookPath("gfortran"); err != nil {
			t.Skip("skipped: no gfortran (scripts/setup.sh installs it)")
		}
		prog := program(t, m, "colltest.f90", "fcolltest")
		for np := 1; np <= 3; np++ {
			if m.mpichBased() && np > 2 {
				continue // MPICH's busy polling makes 3 ranks on 2 cores slow; np 3 runs under Open MPI
			}
			t.Run(fmt.Sprintf("%s/np%d", m.name, np), func(t *testing.T) {
				sameAsNative(t, m, np, prog, "bcast.badroot error T")
			})
		}
	}
}

// sameAsNative runs prog natively (its output must contain sane) and
// under collmux with statistics on, off, and disabled: the output must be
// byte-identical each time, and the statistics must show every collective
// going through collmux.
func sameAsNative(t *testing.T, m mpiImpl, np int, prog, sane string) {
	t.Helper()
	native, errs, err := run(t, m, np, nil, prog)
	if err != nil {
		t.Fatalf("native run failed: %v\n%s", err, errs)
	}
	if !strings.Contains(native, sane) {
		t.Fatalf("native run lacks %q:\n%s", sane, tail(native))
	}
	env, statsFile := preloaded(t)
	got, errs, err := run(t, m, np, env, prog)
	if err != nil {
		t.Fatalf("run under collmux failed: %v\n%s", err, errs)
	}
	if got != native {
		t.Fatalf("output under collmux differs from native:\n%s", diff(native, got))
	}
	r := readStats(t, statsFile)
	if r.Ranks != np || r.ABI != m.name {
		t.Errorf("statistics say %d ranks, ABI %q; want %d, %q", r.Ranks, r.ABI, np, m.name)
	}
	// colltest (C and Fortran) calls every blocking collective of MPI-3
	// but Alltoallw: the families up to Barrier in the table
	for c := dispatch.Coll(0); c <= dispatch.Barrier; c++ {
		if r.Calls(c.String(), "mpi") == 0 {
			t.Errorf("statistics show no %s call: not intercepted", c)
		}
	}
	for _, extra := range [][2]string{{"COLLMUX_STATS", ""}, {"COLLMUX_DISABLE", "1"}} {
		env := map[string]string{"LD_PRELOAD": libPath(t), extra[0]: extra[1]}
		got, errs, err := run(t, m, np, env, prog)
		if err != nil || got != native {
			t.Fatalf("with %s=%q: err %v, output differs:\n%s\n%s", extra[0], extra[1], err, diff(native, got), errs)
		}
	}
}

// Bad arguments under MPI_ERRORS_RETURN give the same error classes with
// collmux, on the dispatch path (statistics on), as without it.
func TestBadInputSameErrors(t *testing.T) {
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			prog := program(t, m, "errtest.c", "errtest")
			native, errs, err := run(t, m, 2, nil, prog)
			if err != nil {
				t.Fatalf("native: %v\n%s", err, errs)
			}
			if !strings.Contains(native, "class=") || !strings.Contains(native, "sum=2") {
				t.Fatalf("native errtest output unexpected:\n%s", native)
			}
			env, statsFile := preloaded(t)
			got, errs, err := run(t, m, 2, env, prog)
			if err != nil {
				t.Fatalf("under collmux: %v\n%s", err, errs)
			}
			if got != native {
				t.Fatalf("error behaviour differs under collmux:\n%s", diff(native, got))
			}
			if readStats(t, statsFile).Calls("allreduce", "mpi") == 0 {
				t.Error("the successful allreduce was not counted")
			}
		})
	}
}

// A malformed COLLMUX_* variable stops the program in MPI_Init with a
// message naming it, on every rank, instead of being ignored or guessed.
func TestBadConfigStopsAtInit(t *testing.T) {
	bad := []struct{ name, value string }{
		{"COLLMUX_LOG", "loud"},
		{"COLLMUX_TIMEOUT", "0"},
		{"COLLMUX_FUSED_LINGER", "1ms"},
		{"COLLMUX_FUSED_ALGO", "ring"},
		{"COLLMUX_STREAM_ORDER", "per-thread"},
		{"COLLMUX_RULES", "allreduce:cuda:*:warp"},
	}
	for _, m := range impls(t) {
		prog := program(t, m, "errtest.c", "errtest")
		for _, b := range bad {
			t.Run(m.name+"/"+b.name, func(t *testing.T) {
				env := map[string]string{"LD_PRELOAD": libPath(t), b.name: b.value}
				out, errs, err := run(t, m, 2, env, prog)
				if err == nil || strings.Contains(fmt.Sprint(err), "timed out") {
					t.Fatalf("want a failed start, got err %v\n%s", err, out)
				}
				if !strings.Contains(errs, "collmux: fatal: "+b.name) {
					t.Errorf("stderr does not name %s:\n%s", b.name, errs)
				}
				if strings.Contains(out, "sum=") {
					t.Errorf("the program ran past MPI_Init:\n%s", out)
				}
			})
		}
	}
}

// MPI_THREAD_MULTIPLE: concurrent collectives on distinct communicators.
func TestThreadMultiple(t *testing.T) {
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			prog := program(t, m, "threadtest.c", "threadtest", "-pthread")
			env, statsFile := preloaded(t)
			out, errs, err := run(t, m, 2, env, prog)
			if strings.Contains(out, "skipped") {
				t.Skipf("skipped: %s", strings.TrimSpace(out))
			}
			if err != nil || !strings.Contains(out, "threadtest: 2 ranks, 3 threads, 0 failures") {
				t.Fatalf("err %v\n%s\n%s", err, out, errs)
			}
			// 3 threads x 60 iterations x 2 ranks, plus the final sum
			if n := readStats(t, statsFile).Calls("allreduce", "mpi"); n != 3*60*2+2 {
				t.Errorf("statistics count %d allreduce calls, want %d", n, 3*60*2+2)
			}
		})
	}
}

// A program that does not link MPI loads an MPI-using module with
// dlopen(RTLD_LOCAL), as Python does: collmux still intercepts and forwards.
func TestModuleLoadedLocally(t *testing.T) {
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			mod := program(t, m, "collmod.c", "libcollmod.so")
			host := program(t, m, "dlhost.c", "dlhost", "-ldl")
			env, statsFile := preloaded(t)
			out, errs, err := run(t, m, 2, env, host, mod)
			if err != nil || !strings.Contains(out, "collmod: sum=3 bcast=42 ok") {
				t.Fatalf("err %v\n%s\n%s", err, out, errs)
			}
			r := readStats(t, statsFile)
			if r.Calls("allreduce", "mpi") != 2 || r.Calls("bcast", "mpi") != 2 {
				t.Errorf("want 2 allreduce and 2 bcast calls through collmux, got %d and %d",
					r.Calls("allreduce", "mpi"), r.Calls("bcast", "mpi"))
			}
		})
	}
}

// debianMPI4Py is Debian's Python with its mpi4py and NumPy, and the MPI
// that mpi4py is built for (Open MPI); the test says "skipped" without them.
func debianMPI4Py(t *testing.T) (string, mpiImpl) {
	t.Helper()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import mpi4py.MPI, numpy").Run(); err != nil {
		t.Skip("skipped: /usr/bin/python3 has no mpi4py or numpy")
	}
	m := mpiImpl{"openmpi", "mpicc.openmpi", "mpirun.openmpi", nil}
	if _, err := exec.LookPath(m.mpirun); err != nil {
		t.Skip("skipped: mpi4py is built for Open MPI, which is not installed")
	}
	return py, m
}

// mpi4py (Debian's, built for Open MPI) with NumPy arrays.
func TestMPI4PyNumPy(t *testing.T) {
	py, m := debianMPI4Py(t)
	env, statsFile := preloaded(t)
	out, errs, err := run(t, m, 2, env, py, repoRoot()+"/tests/py/mpi4py_numpy.py")
	if err != nil || !strings.Contains(out, "mpi4py_numpy: 2 ranks, 0 failures") {
		t.Fatalf("err %v\n%s\n%s", err, out, errs)
	}
	r := readStats(t, statsFile)
	for _, c := range []string{"allreduce", "bcast", "allgather", "alltoall"} {
		if r.Calls(c, "mpi") == 0 {
			t.Errorf("no %s call from mpi4py went through collmux", c)
		}
	}
}

// mpi4py's device arrays in MPI-IO, as the process's first device buffers,
// first through MPI_File_iwrite_c (tests/py/mpi4py_unserved.py over the CUDA stand-in and a stand-in of
// CuPy's few calls): each call is refused with MPI_ERR_OTHER and
// collmux's message, and never reaches the MPI, whose host code would
// fault on the stand-in's device memory. The same program runs on CuPy on
// the GPU machine (scripts/gpu-test.sh, py part).
func TestMPI4PyDeviceArraysInMPIIO(t *testing.T) {
	py, m := debianMPI4Py(t)
	env, _ := preloaded(t, "LD_LIBRARY_PATH", fakeCUDA(t), "PYTHONPATH", repoRoot()+"/tests/py/fakecupy")
	for np := 1; np <= 2; np++ {
		out, errs, err := run(t, m, np, env, py, repoRoot()+"/tests/py/mpi4py_unserved.py")
		if err != nil || !strings.Contains(out, fmt.Sprintf("mpi4py_unserved: %d ranks, 0 failures", np)) ||
			!strings.Contains(out, "MPI_File_iwrite binds to collmux") {
			t.Fatalf("%d ranks: %v\n%s\n%s", np, err, out, errs)
		}
		// the large-count twin Open MPI 4.1 lacks, called first (as mpi4py
		// 4's wheels do), narrowed to MPI_File_iwrite: it once skipped the
		// check for CUDA and forwarded the device array
		for _, fn := range []string{"MPI_File_iwrite_c", "MPI_File_iwrite"} {
			if n := strings.Count(errs, "collmux: "+fn+": device memory is not supported for MPI-IO"); n != np {
				t.Errorf("%d ranks: %d refusals of %s reported, want one a rank:\n%s", np, n, fn, errs)
			}
		}
	}
}

// With COLLMUX_DISABLE the library forwards only: no statistics appear even
// when asked for.
func TestDisableIsPureForwarder(t *testing.T) {
	m := impls(t)[0]
	prog := program(t, m, "collmod.c", "libcollmod.so")
	host := program(t, m, "dlhost.c", "dlhost", "-ldl")
	env, statsFile := preloaded(t, "COLLMUX_DISABLE", "1")
	out, errs, err := run(t, m, 2, env, host, prog)
	if err != nil || !strings.Contains(out, "ok") {
		t.Fatalf("err %v\n%s\n%s", err, out, errs)
	}
	if _, err := os.Stat(statsFile); err == nil {
		t.Error("COLLMUX_DISABLE=1 still wrote statistics")
	}
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// diff shows the first differing lines of two outputs.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i, n := 0, 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  native:  %s\n  collmux: %s\n", i+1, wl, gl)
			if n++; n == 5 {
				break
			}
		}
	}
	return b.String()
}

// A program that ends without MPI_Finalize loses collmux's statistics:
// collmux says so instead of staying silent.
func TestNoFinalizeWarns(t *testing.T) {
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			prog := program(t, m, "nofinalize.c", "nofinalize")
			env, _ := preloaded(t)
			_, errs, _ := run(t, m, 2, env, prog) // the MPI may call the job failed
			if !strings.Contains(errs, "the program ended without MPI_Finalize: no statistics or trace were written") {
				t.Fatalf("no warning:\n%s", errs)
			}
		})
	}
}

// A call on a communicator MPI does not know runs the program's error
// handler once, as without collmux, also when statistics or checking make
// collmux look the communicator up first. MPICH only: its handles are
// checked integers, where Open MPI's are pointers it would follow.
func TestInvalidCommErrorHandlerOnce(t *testing.T) {
	for _, m := range impls(t) {
		if m.name != "mpich" {
			continue
		}
		prog := program(t, m, "errcount.c", "errcount")
		native, errs, err := run(t, m, 1, nil, prog)
		if err != nil || !strings.Contains(native, "handler ran 1 time(s)") {
			t.Fatalf("native: %v\n%s\n%s", err, native, errs)
		}
		for _, extra := range [][]string{{"COLLMUX_STATS", "1"}, {"COLLMUX_STATS", "1", "COLLMUX_CHECK", "1"}} {
			env := map[string]string{"LD_PRELOAD": libPath(t)}
			for i := 0; i+1 < len(extra); i += 2 {
				env[extra[i]] = extra[i+1]
			}
			got, errs, err := run(t, m, 1, env, prog)
			if err != nil || got != native {
				t.Errorf("%v: %v\n%s\n%s", extra, err, diff(native, got), errs)
			}
		}
	}
}

// Blocking point-to-point from Fortran on device buffers (a CUDA Fortran
// code's halo exchange): collmux's Fortran entry points carry them under
// Open MPI, whose binding calls PMPI_* directly, converting the status
// back (source, tag, count; MPI_STATUS_IGNORE); under MPICH its binding
// reaches collmux's C functions. The results equal the host build's
// native ones, and without collmux the device build fails.
func TestFortranPointToPointDevice(t *testing.T) {
	if _, err := exec.LookPath("gfortran"); err != nil {
		t.Skip("skipped: no gfortran (scripts/setup.sh installs it)")
	}
	for _, m := range impls(t) {
		if why := noFortran(m); why != "" {
			t.Logf("skipped for %s: %s", m.name, why)
			continue
		}
		dir := fakeCUDA(t)
		host := program(t, m, "p2ptest.F90", "fp2ptest", "-cpp")
		dev := program(t, m, "p2ptest.F90", "fp2ptest-dev", "-cpp", "-DCOLLTEST_CUDA", "-L"+dir, "-l:libcuda.so.1", "-Wl,-rpath,"+dir)
		for np := 2; np <= 3; np++ {
			t.Run(fmt.Sprintf("%s/np%d", m.name, np), func(t *testing.T) {
				native, errs, err := run(t, m, np, nil, host)
				if err != nil || lastLine(native) != fmt.Sprintf("fp2ptest: %d ranks, 0 failures", np) {
					t.Fatalf("native: %v\n%s\n%s", err, native, errs)
				}
				env, statsFile := preloaded(t, "LD_LIBRARY_PATH", dir)
				got, errs, err := run(t, m, np, env, dev)
				if err != nil || got != native {
					t.Fatalf("device buffers under collmux: %v\n%s\n%s", err, diff(native, got), errs)
				}
				r := readStats(t, statsFile)
				for _, f := range []string{"send", "recv", "sendrecv"} {
					if r.Calls(f, "staged") == 0 {
						t.Errorf("statistics show no staged %s call", f)
					}
				}
				if out, _, err := run(t, m, np, map[string]string{"LD_LIBRARY_PATH": dir}, dev); err == nil && strings.Contains(out, " 0 failures") {
					t.Errorf("the device build passed without collmux: the stand-in's memory is readable")
				}
			})
		}
	}
}

// The collmux Python package (python/collmux, ctypes only) under mpi4py
// with the library preloaded: it finds the library, checks its arguments,
// and raises collmux.Error where the library refuses a call, with MPI
// going on. Its operations run on the GPU machine (tests/py/fusedops_torch.py).
func TestPythonPackage(t *testing.T) {
	py, m := debianMPI4Py(t)
	env, _ := preloaded(t, "PYTHONPATH", filepath.Join(repoRoot(), "python"))
	out, errs, err := run(t, m, 2, env, py, filepath.Join(repoRoot(), "tests", "py", "collmux_api.py"), projectVersion(t))
	if err != nil || !strings.Contains(out, "collmux_api: 2 ranks, 0 failures") {
		t.Fatalf("err %v\n%s\n%s", err, out, errs)
	}
	if !strings.Contains(errs, "collmux: collmux_gemv_allreduce on rank 0: a, x and y must be in device memory") {
		t.Errorf("the library's reason is not on stderr:\n%s", errs)
	}
}
