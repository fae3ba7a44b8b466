package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"collmux/dispatch"
	"collmux/mpi"
	"collmux/stats"
)

// More real-MPI worlds: Debian 13's Open MPI 5.0 and MPICH 4.2, and Debian
// unstable's MPICH 5.0 with its MPI-5 standard ABI library, in the chroots
// scripts/mpi-world.sh builds (make test-world). The library built here,
// on Debian 12, is preloaded into programs compiled and run there.

// world is one chroot of scripts/mpi-world.sh: flags select it.
type world struct {
	script string
	flags  []string
}

// openWorld returns the world the flags select if it is built and usable
// (it needs root), skipping the test otherwise.
func openWorld(t *testing.T, flags ...string) world {
	t.Helper()
	script := filepath.Join(repoRoot(), "scripts", "mpi-world.sh")
	if os.Geteuid() != 0 || exec.Command(script, append(flags, "path")...).Run() != nil {
		t.Skipf("skipped: no MPI world (scripts/mpi-world.sh %s)", strings.Join(flags, " "))
	}
	return world{script, flags}
}

// run runs argv inside the world and returns its stdout and stderr.
func (w world) run(t *testing.T, argv ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.script, append(append(append([]string{}, w.flags...), "run", "--"), argv...)...)
	cmd.Dir = repoRoot()
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out: %v", err)
	}
	return o.String(), e.String(), err
}

// worldTmp is a directory under /tmp, which every world sees (and the
// repository, nothing else of the host).
func worldTmp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "collmux-world-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// worldLaunch is the launcher command line for np ranks with env.
func worldLaunch(m mpiImpl, np int, env [][2]string) []string {
	if m.name == "openmpi" {
		a := []string{m.mpirun, "--oversubscribe", "--output", ":raw", "-np", fmt.Sprint(np)} // as run() has it for Open MPI 5
		for _, kv := range env {
			a = append(a, "-x", kv[0]+"="+kv[1])
		}
		return a
	}
	a := []string{m.mpirun, "-n", fmt.Sprint(np)}
	for _, kv := range env {
		a = append(a, "-genv", kv[0], kv[1])
	}
	return a
}

// TestWorldMatchesNative: in the Debian 13 world, colltest, nbtest and
// p2ptest print the same under collmux as natively on 2 ranks with each
// MPI, and collmux's statistics name the MPI's ABI and show the calls.
func TestWorldMatchesNative(t *testing.T) {
	worldMatchesNative(t, openWorld(t), allImpls)
}

// TestWorldABIMatchesNative: the same with the MPI-5 standard ABI (sid's
// MPICH 5.0 built with --enable-mpi-abi): collmux must find libmpi_abi,
// recognise the ABI (statistics say "mpi-abi") and decode its handles.
func TestWorldABIMatchesNative(t *testing.T) {
	worldMatchesNative(t, openWorld(t, "--abi"), []mpiImpl{abiMPI})
}

func worldMatchesNative(t *testing.T, w world, mpis []mpiImpl) {
	dir := worldTmp(t)
	for _, m := range mpis {
		for _, p := range []struct{ src, want, coll string }{
			{"colltest", "colltest: 2 ranks, 0 failures", "allreduce"},
			{"nbtest", "nbtest: 2 ranks, 0 failures", "allreduce"},
			{"p2ptest", "p2ptest: 2 ranks, 0 failures", "send"},
		} {
			t.Run(m.name+"/"+p.src, func(t *testing.T) {
				exe := filepath.Join(dir, m.name+"-"+p.src)
				cc := append(append([]string{m.mpicc}, m.cflags...), "-O1", "-Wall", "-pthread", "-o", exe,
					filepath.Join(repoRoot(), "tests", "c", p.src+".c"))
				if _, errs, err := w.run(t, cc...); err != nil {
					t.Fatalf("%s: %v\n%s", m.mpicc, err, errs)
				}
				r := worldSameAsNative(t, w, m, filepath.Join(dir, m.name+"-"+p.src+".json"),
					func(out string) bool { return lastLine(out) == p.want }, exe)
				if r.Calls(p.coll, "mpi") == 0 {
					t.Errorf("statistics show no %s call: not intercepted", p.coll)
				}
			})
		}
	}
}

// worldSameAsNative runs prog on 2 ranks in w natively, where sane must
// hold of its stdout, then under collmux with statistics to statsFile
// (under /tmp or the repository, which the world sees): stdout must be
// byte-identical, and the statistics must name 2 ranks and m's ABI. It
// returns the statistics for the caller's checks of the calls.
func worldSameAsNative(t *testing.T, w world, m mpiImpl, statsFile string, sane func(string) bool, prog ...string) stats.Report {
	t.Helper()
	native, errs, err := w.run(t, append(worldLaunch(m, 2, nil), prog...)...)
	if err != nil || !sane(native) {
		t.Fatalf("native run: %v, ends %q\n%s\n%s", err, lastLine(native), tail(native), errs)
	}
	env := [][2]string{{"LD_PRELOAD", libPath(t)}, {"COLLMUX_STATS", statsFile}}
	got, errs, err := w.run(t, append(worldLaunch(m, 2, env), prog...)...)
	if err != nil {
		t.Fatalf("run under collmux: %v\n%s\n%s", err, tail(got), errs)
	}
	if got != native {
		t.Fatalf("output under collmux differs from native:\n%s\n%s", diff(native, got), errs)
	}
	r := readStats(t, statsFile)
	if r.Ranks != 2 || r.ABI != m.name {
		t.Errorf("statistics say %d ranks, ABI %q; want 2, %q", r.Ranks, r.ABI, m.name)
	}
	return r
}

// TestWorldABIConstants: every standard-ABI value of collmux's tables
// (mpi.Datatypes, mpi.Ops, mpi.ABIConstants[mpi.ABIStandard]) is what the
// MPI-5 mpi.h of a real ABI build defines, and every table entry that
// header defines has its value there (a 0 would leave the handle
// undecoded, its calls off the device paths). The values are printed by a
// program compiled against that header, so no hand copy stands between.
func TestWorldABIConstants(t *testing.T) {
	w := openWorld(t, "--abi")
	dir := worldTmp(t)
	c := mpi.ABIConstants[mpi.ABIStandard]
	// name -> what collmux holds; datatypes and ops may be absent (0) where
	// the header lacks them, the rest every MPI-5 mpi.h defines
	want := map[string]int64{}
	optional := map[string]bool{}
	var src strings.Builder
	src.WriteString("#include <mpi.h>\n#include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\n" +
		"#define P(x) printf(\"%s %lld\\n\", #x, (long long)(intptr_t)(x))\nint main(void)\n{\n")
	handle := func(name string, v uint32) {
		want[name], optional[name] = int64(v), true
		fmt.Fprintf(&src, "#ifdef %s\n\tP(%s);\n#else\n\tprintf(\"%s 0\\n\");\n#endif\n", name, name, name)
	}
	for _, d := range mpi.Datatypes {
		handle(d.Name, d.Std)
	}
	for _, o := range mpi.Ops {
		handle(o.Name, o.Std)
	}
	for _, k := range []struct {
		name string
		v    int64
	}{
		{"MPI_IN_PLACE", c.InPlace}, {"MPI_COMM_WORLD", int64(c.CommWorld)}, {"MPI_COMM_SELF", int64(c.CommSelf)},
		{"MPI_COMM_NULL", int64(c.CommNull)}, {"MPI_DATATYPE_NULL", int64(c.DatatypeNull)}, {"MPI_OP_NULL", int64(c.OpNull)},
		{"MPI_INFO_NULL", int64(c.InfoNull)}, {"MPI_ROOT", int64(c.Root)}, {"MPI_PROC_NULL", int64(c.ProcNull)},
		{"MPI_ERR_OTHER", int64(c.ErrOther)}, {"MPI_ERR_IN_STATUS", int64(c.ErrInStatus)},
		{"offsetof(MPI_Status,MPI_ERROR)", int64(c.StatusError)}, {"MPI_REQUEST_NULL", int64(c.RequestNull)},
		{"MPI_STATUS_IGNORE", c.StatusIgnore}, {"MPI_STATUSES_IGNORE", c.StatusIgnore}, {"sizeof(MPI_Status)", int64(c.StatusSize)},
		{"MPI_CART", int64(c.Cart)}, {"MPI_GRAPH", int64(c.Graph)}, {"MPI_DIST_GRAPH", int64(c.DistGraph)},
		{"MPI_THREAD_MULTIPLE", int64(c.ThreadMultiple)},
	} {
		want[k.name] = k.v
		fmt.Fprintf(&src, "\tP(%s);\n", k.name)
	}
	src.WriteString("\treturn 0;\n}\n")
	cfile, exe := filepath.Join(dir, "abiconsts.c"), filepath.Join(dir, "abiconsts")
	if err := os.WriteFile(cfile, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errs, err := w.run(t, append(append([]string{abiMPI.mpicc}, abiMPI.cflags...), "-Wall", "-o", exe, cfile)...); err != nil {
		t.Fatalf("%s: %v\n%s", abiMPI.mpicc, err, errs)
	}
	out, errs, err := w.run(t, exe)
	if err != nil {
		t.Fatalf("%s: %v\n%s", exe, err, errs)
	}
	got := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var name string
		var v int64
		if _, err := fmt.Sscan(line, &name, &v); err != nil {
			t.Fatalf("bad line %q: %v", line, err)
		}
		got[name] = v
	}
	if len(got) != len(want) {
		t.Fatalf("the program printed %d values, want %d:\n%s", len(got), len(want), out)
	}
	for name, v := range want {
		switch g := got[name]; {
		case g == v:
		case optional[name] && v == 0:
			t.Errorf("%s: the header defines it as %#x, the table has no standard-ABI value", name, g)
		default:
			t.Errorf("%s: the header says %d (%#x), collmux has %d (%#x)", name, g, g, v, v)
		}
	}
}

// TestWorldABIDeviceStaged: the standard ABI's sentinels at work. The
// -DCOLLTEST_CUDA builds of colltest, nbtest, p2ptest and nbrtest's parts
// (every buffer in the device memory of tests/fakecuda, which the MPI
// cannot read) run on 2 ranks under collmux, which stages them: that
// decodes MPI_ROOT and MPI_PROC_NULL (intercommunicator roots and
// bystanders), the topology MPI_Topo_test names (neighbourhood
// collectives) and MPI_STATUS_IGNORE and the status size (completions);
// each must print byte for byte what its host build prints natively, and
// the statistics show the families staged. With the sentinels collmux had
// from a pre-5.0 draft (MPI_ROOT -3, MPI_PROC_NULL -2, MPI_CART 203),
// nbtest, p2ptest and nbrtest's neighbor, alltoallw and inter parts abort
// here (MPI_Send_init to "MPI_PROC_NULL" -2: invalid rank) or crash.
func TestWorldABIDeviceStaged(t *testing.T) {
	w := openWorld(t, "--abi")
	lib, fake := libPath(t), fakeCUDA(t)
	if !strings.HasPrefix(fake, "/tmp/") {
		t.Fatalf("the stand-in CUDA driver is in %s, which the world does not see (TMPDIR outside /tmp?)", fake)
	}
	dir := worldTmp(t)
	m := abiMPI
	build := func(t *testing.T, src, out string, extra ...string) string {
		exe := filepath.Join(dir, out)
		cc := append(append([]string{m.mpicc}, m.cflags...), "-O1", "-Wall", "-pthread", "-o", exe,
			filepath.Join(repoRoot(), "tests", "c", src+".c"), "-ldl")
		if _, errs, err := w.run(t, append(cc, extra...)...); err != nil {
			t.Fatalf("%s: %v\n%s", m.mpicc, err, errs)
		}
		return exe
	}
	type part struct {
		src, arg string
		families []string
	}
	parts := []part{
		{"colltest", "", []string{"allreduce", "bcast", "alltoallv", "scan", "reduce_scatter"}},
		{"nbtest", "", []string{"allreduce", "alltoallw", "gatherv"}},
		{"p2ptest", "", []string{"send", "recv", "sendrecv"}},
	}
	for _, p := range nbrParts {
		parts = append(parts, part{"nbrtest", p.name, p.families})
	}
	built := map[string][2]string{}
	for _, p := range parts {
		name := p.src
		if p.arg != "" {
			name += "/" + p.arg
		}
		t.Run(name, func(t *testing.T) {
			exes, ok := built[p.src]
			if !ok {
				exes = [2]string{build(t, p.src, p.src), build(t, p.src, p.src+"-dev", "-DCOLLTEST_CUDA",
					"-I"+filepath.Join(repoRoot(), "tests", "fakecuda"), "-L"+fake, "-l:libcuda.so.1", "-Wl,-rpath,"+fake)}
				built[p.src] = exes
			}
			args := func(exe string) []string {
				if p.arg == "" {
					return []string{exe}
				}
				return []string{exe, p.arg}
			}
			native, errs, err := w.run(t, append(worldLaunch(m, 2, nil), args(exes[0])...)...)
			if err != nil || !strings.HasSuffix(lastLine(native), " 0 failures") {
				t.Fatalf("native host run: %v, ends %q\n%s\n%s", err, lastLine(native), tail(native), errs)
			}
			statsFile := filepath.Join(dir, strings.ReplaceAll(name, "/", "-")+".json")
			env := [][2]string{{"LD_PRELOAD", lib}, {"COLLMUX_STATS", statsFile}, {"LD_LIBRARY_PATH", fake}}
			got, errs, err := w.run(t, append(worldLaunch(m, 2, env), args(exes[1])...)...)
			if err != nil {
				t.Fatalf("device build under collmux: %v\n%s\n%s", err, tail(got), tail(errs))
			}
			if got != native {
				t.Fatalf("device build under collmux differs from the native host run:\n%s\n%s", diff(native, got), tail(errs))
			}
			r := readStats(t, statsFile)
			if r.ABI != m.name {
				t.Errorf("statistics say ABI %q, want %q", r.ABI, m.name)
			}
			for _, f := range p.families {
				if r.Calls(f, "staged") == 0 {
					t.Errorf("statistics show no staged %s call", f)
				}
			}
		})
	}
}

// TestWorldFortranMatchesNative: tests/f/colltest.f90 (every collective
// from `use mpi`, MPI_IN_PLACE, an error) built with each Debian 13 MPI's
// mpifort prints the same on 2 ranks under collmux as natively, and the
// statistics show its calls. Open MPI 5's Fortran binding calls PMPI_*
// itself, so this goes through collmux's own Fortran entry points there;
// MPICH's binding calls the C functions.
func TestWorldFortranMatchesNative(t *testing.T) {
	w := openWorld(t)
	for _, m := range allImpls {
		t.Run(m.name, func(t *testing.T) { worldFortran(t, w, m) })
	}
}

// TestWorldABIFortran: the same for the standard ABI once there is a
// Fortran binding for it; MPICH 5.0.2's has none (its mpifort hands
// -mpi-abi to gfortran and links libmpichfort and libmpich), and the test
// says "skipped" while the wrapper links no libmpi_abi.
func TestWorldABIFortran(t *testing.T) {
	w := openWorld(t, "--abi")
	show, errs, err := w.run(t, fortranCompiler(abiMPI), "-mpi-abi", "-show")
	if err != nil {
		t.Fatalf("%s -mpi-abi -show: %v\n%s", fortranCompiler(abiMPI), err, errs)
	}
	if !strings.Contains(show, "mpi_abi") {
		t.Skipf("skipped: no Fortran binding for the standard ABI (`%s -mpi-abi -show` links no libmpi_abi: %s)",
			fortranCompiler(abiMPI), strings.TrimSpace(show))
	}
	// a binding has appeared: the world needs gfortran (scripts/mpi-world.sh
	// --abi installs none) for this to build
	worldFortran(t, w, abiMPI)
}

func worldFortran(t *testing.T, w world, m mpiImpl) {
	dir := worldTmp(t)
	exe := filepath.Join(dir, m.name+"-fcolltest")
	fc := append(append([]string{fortranCompiler(m)}, m.cflags...), "-O1", "-Wall", "-o", exe,
		filepath.Join(repoRoot(), "tests", "f", "colltest.f90"))
	if _, errs, err := w.run(t, fc...); err != nil {
		t.Fatalf("%s: %v\n%s", fc[0], err, errs)
	}
	r := worldSameAsNative(t, w, m, filepath.Join(dir, m.name+"-fcolltest.json"),
		func(out string) bool { return strings.Contains(out, "bcast.badroot error T") }, exe)
	// colltest.f90 calls every blocking collective up to Barrier, as the C one
	for c := dispatch.Coll(0); c <= dispatch.Barrier; c++ {
		if r.Calls(c.String(), "mpi") == 0 {
			t.Errorf("statistics show no %s call: not intercepted", c)
		}
	}
}

// TestWorldMPI4Py: Debian 13's mpi4py 4.0 (built for its Open MPI 5) with
// NumPy arrays prints the same under collmux as natively on 2 ranks, and
// its collectives go through collmux. mpi4py 4 looks for the MPI's symbols
// at import, which a preloaded library must not confuse.
func TestWorldMPI4Py(t *testing.T) {
	w := openWorld(t)
	if _, errs, err := w.run(t, "python3", "-c", "import mpi4py.MPI, numpy"); err != nil {
		t.Skipf("skipped: the Debian 13 world has no python3-mpi4py or python3-numpy (scripts/mpi-world.sh build installs them): %v\n%s", err, errs)
	}
	m, dir := allImpls[0], worldTmp(t)
	r := worldSameAsNative(t, w, m, filepath.Join(dir, "mpi4py.json"),
		func(out string) bool { return lastLine(out) == "mpi4py_numpy: 2 ranks, 0 failures" },
		"python3", filepath.Join(repoRoot(), "tests", "py", "mpi4py_numpy.py"))
	for _, c := range []string{"allreduce", "bcast", "allgather", "alltoall"} {
		if r.Calls(c, "mpi") == 0 {
			t.Errorf("no %s call from mpi4py went through collmux", c)
		}
	}
}

// TestWorldABIMPI4Py: sid's mpi4py is built for Open MPI (it depends on
// libopenmpi40), not for the standard ABI: the test says "skipped" while
// that holds, and fails when the package changes, to be written then.
func TestWorldABIMPI4Py(t *testing.T) {
	w := openWorld(t, "--abi")
	deps, errs, err := w.run(t, "apt-cache", "depends", "python3-mpi4py")
	if err != nil {
		t.Fatalf("apt-cache depends python3-mpi4py: %v\n%s", err, errs)
	}
	if strings.Contains(deps, "libopenmpi") {
		t.Skip("skipped: sid's python3-mpi4py is built for Open MPI (depends on libopenmpi40), not for the standard ABI")
	}
	t.Fatalf("sid's python3-mpi4py no longer depends on Open MPI; test it against libmpi_abi:\n%s", deps)
}
