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

	"collmux/mpi"
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
	lib := libPath(t)
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
				native, errs, err := w.run(t, append(worldLaunch(m, 2, nil), exe)...)
				if err != nil || lastLine(native) != p.want {
					t.Fatalf("native run: %v, ends %q, want %q\n%s\n%s", err, lastLine(native), p.want, tail(native), errs)
				}
				statsFile := filepath.Join(dir, m.name+"-"+p.src+".json")
				env := [][2]string{{"LD_PRELOAD", lib}, {"COLLMUX_STATS", statsFile}}
				got, errs, err := w.run(t, append(worldLaunch(m, 2, env), exe)...)
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
				if r.Calls(p.coll, "mpi") == 0 {
					t.Errorf("statistics show no %s call: not intercepted", p.coll)
				}
			})
		}
	}
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
	src.WriteString("#include <mpi.h>\n#include <stdint.h>\n#include <stdio.h>\n" +
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
		{"MPI_ERR_OTHER", int64(c.ErrOther)}, {"MPI_REQUEST_NULL", int64(c.RequestNull)},
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
