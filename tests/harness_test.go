// Package tests runs real MPI programs (built with each installed mpicc,
// launched with that MPI's mpirun) with and without libcollmux.so preloaded,
// and checks that collmux is transparent: same output, same errors, and
// proof in its statistics that every call went through it.
package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"collmux/stats"
)

// mpiImpl is one MPI implementation on this machine.
type mpiImpl struct {
	name   string // "openmpi", "mpich", "mpi-abi"; what collmux's statistics call its ABI
	mpicc  string
	mpirun string
	cflags []string // what mpicc needs besides the program's own flags, and what the programs must know of the MPI
}

var allImpls = []mpiImpl{
	{"openmpi", "mpicc.openmpi", "mpirun.openmpi", nil},
	{"mpich", "mpicc.mpich", "mpirun.mpich", nil},
}

// abiMPI is MPICH 5.0 compiling for the MPI-5 standard ABI (Debian sid's
// packages, the world of scripts/mpi-world.sh --abi): its mpicc with
// -mpi-abi includes the MPI-5 mpi.h and links libmpi_abi.so.1 (Debian's
// mpicc_abi wrapper is a dangling link); launched by its Hydra. Natively it
// aborts on an MPI_Allreduce of MPI_DATATYPE_NULL instead of returning an
// error, so errtest leaves that call out.
var abiMPI = mpiImpl{"mpi-abi", "mpicc.mpich", "mpirun.mpich", []string{"-mpi-abi", "-DERRTEST_DATATYPE_NULL_ABORTS"}}

// impls returns the MPIs installed here; a test with none says "skipped".
// TESTS_MPIS (names, comma-separated: openmpi, mpich, mpi-abi)
// chooses others than this machine's two, so the suite can run in the ABI
// world (TESTS_MPIS=mpi-abi), where mpicc.mpich compiles for libmpich
// unless told -mpi-abi; a name it lists must be installed. (Not COLLMUX_*:
// collmux warns of a COLLMUX_ variable it does not know.)
func impls(t *testing.T) []mpiImpl {
	want := os.Getenv("TESTS_MPIS")
	if want == "" {
		want = "openmpi,mpich"
	}
	var out []mpiImpl
	for _, name := range strings.Split(want, ",") {
		var m mpiImpl
		for _, c := range append(allImpls, abiMPI) {
			if c.name == name {
				m = c
			}
		}
		if m.name == "" {
			t.Fatalf("TESTS_MPIS names %q: not openmpi, mpich or mpi-abi", name)
		}
		_, e1 := exec.LookPath(m.mpicc)
		_, e2 := exec.LookPath(m.mpirun)
		if e1 == nil && e2 == nil {
			out = append(out, m)
		} else if os.Getenv("TESTS_MPIS") != "" {
			t.Fatalf("TESTS_MPIS names %s, but %s or %s is missing", name, m.mpicc, m.mpirun)
		}
	}
	if len(out) == 0 {
		t.Skip("skipped: neither Open MPI nor MPICH is installed (mpicc.openmpi / mpicc.mpich)")
	}
	return out
}

// mpichBased: MPICH underneath, with its busy polling (mpi-abi is MPICH's
// libmpi_abi).
func (m mpiImpl) mpichBased() bool { return m.name == "mpich" || m.name == "mpi-abi" }

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// libPath is the library under test: $COLLMUX_LIB or build/libcollmux.so.
func libPath(t *testing.T) string {
	p := os.Getenv("COLLMUX_LIB")
	if p == "" {
		p = filepath.Join(repoRoot(), "build", "libcollmux.so")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s not found: run `make build` first (or set COLLMUX_LIB)", p)
	}
	return p
}

var (
	buildMu  sync.Mutex
	buildDir string
	built    = map[string]string{}
)

// program compiles tests/c/<src> (or tests/f/<src>, Fortran, for .f90)
// with the MPI's compiler once per run. A name ending in .so is built as
// a shared module.
func program(t *testing.T, m mpiImpl, src, out string, extra ...string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	key := m.name + "/" + out
	if p, ok := built[key]; ok {
		return p
	}
	if buildDir == "" {
		d, err := os.MkdirTemp("", "collmux-tests-")
		if err != nil {
			t.Fatal(err)
		}
		buildDir = d
	}
	dst := filepath.Join(buildDir, m.name+"-"+out)
	dir, compiler, flags := "c", m.mpicc, m.cflags
	if strings.HasSuffix(strings.ToLower(src), ".f90") { // .F90: preprocessed
		dir, compiler, flags = "f", fortranCompiler(m), nil
	}
	args := append(append([]string{}, flags...), "-O1", "-Wall", "-o", dst, filepath.Join(repoRoot(), "tests", dir, src))
	if strings.HasSuffix(out, ".so") {
		args = append([]string{"-shared", "-fPIC"}, args...)
	}
	if strings.HasPrefix(src, "dlhost") { // the host must not link MPI (nor take mpicc's flags)
		compiler = "cc"
		args = args[len(flags):]
	}
	cmd := exec.Command(compiler, append(args, extra...)...)
	if outb, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", compiler, args, err, outb)
	}
	built[key] = dst
	return dst
}

// fortranCompiler is the MPI's Fortran compiler wrapper (mpifort.openmpi).
func fortranCompiler(m mpiImpl) string { return strings.Replace(m.mpicc, "mpicc", "mpifort", 1) }

// noFortran says why m has no Fortran compiler to test with, or "".
// MPICH 5.0's mpifort has no -mpi-abi (it hands the flag to gfortran and
// links libmpich): there is no Fortran binding of the standard ABI.
func noFortran(m mpiImpl) string {
	if m.name == abiMPI.name {
		return "no Fortran binding for the standard ABI (mpifort.mpich has no -mpi-abi)"
	}
	if _, err := exec.LookPath(fortranCompiler(m)); err != nil {
		return "no " + fortranCompiler(m)
	}
	return ""
}

var ompiMajor = map[string]int{} // by launcher; guarded by buildMu

// openMPIMajor is the major version `mpirun --version` names (4 for
// "mpirun (OpenRTE) 4.1.4", 5 for "mpirun (Open MPI) 5.0.7"); 0 if none.
func openMPIMajor(m mpiImpl) int {
	buildMu.Lock()
	defer buildMu.Unlock()
	if v, ok := ompiMajor[m.mpirun]; ok {
		return v
	}
	out, _ := exec.Command(m.mpirun, "--version").Output()
	v := 0
	if mm := regexp.MustCompile(`\((?:Open MPI|OpenRTE)\) (\d+)\.`).FindSubmatch(out); mm != nil {
		fmt.Sscan(string(mm[1]), &v)
	}
	ompiMajor[m.mpirun] = v
	return v
}

// run launches prog on np ranks with env passed to every rank.
func run(t *testing.T, m mpiImpl, np int, env map[string]string, prog ...string) (stdout, stderr string, err error) {
	t.Helper()
	args := []string{}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	switch m.name {
	case "openmpi":
		args = append(args, "--oversubscribe", "-np", fmt.Sprint(np))
		if openMPIMajor(m) >= 5 {
			// Open MPI 5's launcher reassembles forwarded output into
			// lines and, on a loaded machine, now and then sends the start
			// of a stdout line out on stderr (open-mpi/ompi#12594 is about
			// that reassembly); raw forwarding keeps the streams apart
			args = append(args, "--output", ":raw")
		}
		for _, k := range keys {
			args = append(args, "-x", k+"="+env[k])
		}
	default:
		args = append(args, "-n", fmt.Sprint(np))
		for _, k := range keys {
			args = append(args, "-genv", k, env[k])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, m.mpirun, append(args, prog...)...)
	// a launcher killed on its own leaves its ranks running (a hung test
	// once left three spinning for half an hour): the timeout kills the
	// launcher's whole process group
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
		"OMPI_MCA_btl_vader_single_copy_mechanism=none", "OMPI_MCA_rmaps_base_oversubscribe=1")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out: %v", err)
	}
	return o.String(), e.String(), err
}

// preloaded is the environment that loads collmux and writes its
// statistics as JSON to a fresh file, returned for readStats.
func preloaded(t *testing.T, extra ...string) (map[string]string, string) {
	statsFile := filepath.Join(t.TempDir(), "stats.json")
	env := map[string]string{"LD_PRELOAD": libPath(t), "COLLMUX_STATS": statsFile}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env, statsFile
}

func readStats(t *testing.T, path string) stats.Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("collmux wrote no statistics: %v", err)
	}
	var r stats.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("statistics %s: %v", path, err)
	}
	return r
}
