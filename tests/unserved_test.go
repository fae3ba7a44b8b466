package tests

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// unservedFn is one line of capi/unserved.tab.
type unservedFn struct {
	name, category, params string
}

func unservedTable(t *testing.T) []unservedFn {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(), "capi", "unserved.tab"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []unservedFn
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		head, params, _ := strings.Cut(line, "(")
		fields := strings.Fields(head)
		out = append(out, unservedFn{fields[0], fields[1], strings.TrimSuffix(params, ")")})
	}
	if len(out) == 0 {
		t.Fatal("capi/unserved.tab lists no function")
	}
	return out
}

// exportedSymbols lists the dynamic symbols a shared library defines.
func exportedSymbols(t *testing.T, lib string) map[string]bool {
	t.Helper()
	out, err := exec.Command("nm", "-D", "--defined-only", lib).Output()
	if err != nil {
		t.Skipf("skipped: nm %s: %v", lib, err)
	}
	syms := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			syms[f[2]] = true
		}
	}
	return syms
}

// mpiLibrary is the MPI library a program built with m's mpicc loads.
func mpiLibrary(t *testing.T, m mpiImpl, prog string) string {
	t.Helper()
	out, err := exec.Command("ldd", prog).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", prog, err)
	}
	re := regexp.MustCompile(`(libmpi\.so[.0-9]*|libmpich\.so[.0-9]*|libmpi_abi\.so[.0-9]*) => (\S+)`)
	if mm := re.FindStringSubmatch(string(out)); mm != nil {
		return mm[2]
	}
	t.Fatalf("%s: no MPI library among\n%s", prog, out)
	return ""
}

// unservedEnv is what each MPI needs for the windows of unservedtest:
// Open MPI 4.1 picks a one-sided component that cannot create windows (with
// vader's single-copy mechanism off), so pt2pt is named; Open MPI 5 has no
// pt2pt (MPI_Init fails on it) and its default creates them.
func unservedEnv(m mpiImpl, env map[string]string) map[string]string {
	if env == nil {
		env = map[string]string{}
	}
	if m.name == "openmpi" && openMPIMajor(m) < 5 {
		env["OMPI_MCA_osc"] = "pt2pt"
	}
	return env
}

// The calls collmux does not serve on device memory: on host buffers the
// output is the MPI's own, with and without collmux; on device buffers
// (the CUDA stand-in, whose device memory faults when the host touches it)
// each fails with MPI_ERR_OTHER, changes nothing, and is reported once per
// function and rank, naming the call and the reason.
func TestUnservedOnDeviceMemory(t *testing.T) {
	refused := map[string]string{ // the lines of unservedtest, and the message of each call
		"pack":           "MPI_Pack: device memory is not supported for packing and unpacking (pack)",
		"unpack":         "MPI_Unpack: device memory is not supported for packing and unpacking (pack)",
		"win_create":     "MPI_Win_create: device memory is not supported for one-sided communication (rma)",
		"put":            "MPI_Put: device memory is not supported for one-sided communication (rma)",
		"get":            "MPI_Get: device memory is not supported for one-sided communication (rma)",
		"file_write_at":  "MPI_File_write_at: device memory is not supported for MPI-IO (io)",
		"file_iwrite_at": "MPI_File_iwrite_at: device memory is not supported for MPI-IO (io)",
		"file_write_all": "MPI_File_write_at_all: device memory is not supported for MPI-IO (io)",
		"file_read_at":   "MPI_File_read_at: device memory is not supported for MPI-IO (io)",
		"file_iread_at":  "MPI_File_iread_at: device memory is not supported for MPI-IO (io)",
		"buffer_attach":  "MPI_Buffer_attach: device memory is not supported for the buffer of buffered sends (bsend)",
	}
	for _, m := range impls(t) {
		dir := fakeCUDA(t)
		host := program(t, m, "unservedtest.c", "unservedtest", "-ldl")
		dev := deviceProgram(t, m, "unservedtest.c", "unservedtest")
		for np := 1; np <= 2; np++ {
			t.Run(fmt.Sprintf("%s/np%d", m.name, np), func(t *testing.T) {
				file := filepath.Join(t.TempDir(), "io")
				done := fmt.Sprintf("unservedtest: %d ranks, done", np)
				native, errs, err := run(t, m, np, unservedEnv(m, nil), host, file)
				if err != nil || lastLine(native) != done || !strings.Contains(native, "win_create             rc=ok") ||
					!strings.Contains(native, "file_write_at          rc=ok") {
					t.Fatalf("native host run: %v\n%s\n%s", err, native, errs)
				}
				env, _ := preloaded(t)
				got, errs, err := run(t, m, np, unservedEnv(m, env), host, file)
				if err != nil || got != native {
					t.Fatalf("host buffers under collmux differ from the native run: %v\n%s\n%s", err, diff(native, got), errs)
				}
				env, _ = preloaded(t, "LD_LIBRARY_PATH", dir)
				out, errs, err := run(t, m, np, unservedEnv(m, env), dev, file)
				if err != nil || lastLine(out) != done {
					t.Fatalf("device buffers under collmux: %v\n%s\n%s", err, out, errs)
				}
				errOther := regexp.MustCompile(`err_other=(\d+)`).FindStringSubmatch(out)
				if errOther == nil {
					t.Fatalf("no err_other line:\n%s", out)
				}
				lines := map[string]string{}
				for _, l := range strings.Split(out, "\n") {
					if f := strings.Fields(l); len(f) > 1 {
						lines[f[0]] = strings.Join(f[1:], " ")
					}
				}
				for call, msg := range refused {
					if want := "rc=error class=" + errOther[1]; lines[call] != want {
						t.Errorf("%s on device memory: %q, want %q", call, lines[call], want)
					}
					if n := strings.Count(errs, "collmux: "+msg); n != np {
						t.Errorf("%q reported %d times, want once per rank (%d)", msg, n, np)
					}
				}
				for _, want := range []string{"wait                   rc=ok class=-1", "file size              0",
					"after unpack           0 1 2 3", "window after put       -1 -1 -1 -1", "after file reads       0 1 2 3"} {
					if !strings.Contains(out, want+"\n") {
						t.Errorf("device run lacks %q:\n%s", want, out)
					}
				}
				if t.Failed() {
					t.Logf("device run:\n%s\n%s", out, errs)
				}
			})
		}
	}
}

// Every function of capi/unserved.tab is exported by collmux (the
// address-only ones are not: they pass through), and each exists in both
// MPIs' libraries or is handled where it is absent: a _c function runs its
// int-count twin where the values fit (MPI_ERR_COUNT otherwise), any other
// fails with MPI_ERR_OTHER naming it. unservedtest's twins mode calls
// three of them through dlsym, as programs that probe for them do.
func TestUnservedFunctionsExistOrAreHandled(t *testing.T) {
	fns := unservedTable(t)
	lib := exportedSymbols(t, libPath(t))
	// MPI-4.0 and 4.1 functions an MPI-3 library may lack; every other
	// int-count function of the table must exist in both MPIs
	newer := map[string]bool{"MPI_Isendrecv": true, "MPI_Isendrecv_replace": true, "MPI_Psend_init": true, "MPI_Precv_init": true,
		"MPI_Comm_attach_buffer": true, "MPI_Session_attach_buffer": true}
	for _, f := range fns {
		if exp := lib[f.name]; exp != (f.category != "address") {
			t.Errorf("%s (%s): exported=%v", f.name, f.category, exp)
		}
	}
	for _, m := range impls(t) {
		host := program(t, m, "unservedtest.c", "unservedtest", "-ldl")
		mpiLib := mpiLibrary(t, m, host)
		have := exportedSymbols(t, mpiLib)
		var absent []string
		for _, f := range fns {
			if have["PMPI_"+strings.TrimPrefix(f.name, "MPI_")] {
				continue
			}
			absent = append(absent, f.name)
			base, large := strings.CutSuffix(f.name, "_c")
			if !large && !newer[f.name] {
				t.Errorf("%s: %s lacks P%s, which every MPI-3 library has: is the table's name right?", m.name, mpiLib, f.name)
			}
			if large && !have["P"+base] && !newer[base] {
				t.Errorf("%s: %s lacks both P%s and P%s", m.name, mpiLib, f.name, base)
			}
		}
		t.Logf("%s (%s) lacks %d of the %d functions of capi/unserved.tab: %s", m.name, mpiLib, len(absent), len(fns), strings.Join(absent, " "))

		t.Run(m.name+"/twins", func(t *testing.T) {
			const np = 2
			file := filepath.Join(t.TempDir(), "io")
			args := []string{host, file, "twins"}
			if !have["PMPI_Pack_c"] {
				args = append(args, "overflow")
			}
			native, errs, err := run(t, m, np, unservedEnv(m, nil), args...)
			if err != nil {
				t.Fatalf("native: %v\n%s\n%s", err, native, errs)
			}
			env, _ := preloaded(t)
			got, errs, err := run(t, m, np, unservedEnv(m, env), args...)
			if err != nil {
				t.Fatalf("under collmux: %v\n%s\n%s", err, got, errs)
			}
			want := native
			// what collmux must print where the MPI lacks a function
			if !have["PMPI_Put_c"] {
				want = strings.Replace(want, "MPI_Put_c absent\n", "MPI_Put_c              rc=ok class=-1\nwindow after put_c     10 11 12 13\n", 1)
			}
			if !have["PMPI_Pack_c"] {
				want = strings.Replace(want, "MPI_Pack_c absent\n", "MPI_Pack_c             rc=ok class=-1\npack_c position        20\nMPI_Pack_c overflow    rc=error class=2\n", 1)
			}
			// MPI_Isendrecv, which collmux cannot narrow to anything, stays
			// absent where the MPI lacks it: dlsym finds none (mpi/unserved.c)
			if got != want {
				t.Errorf("under collmux:\n%s\nnative:\n%s", diff(want, got), native)
			}
		})
	}
}

// TestAbsentFunctionsStayAbsent: a module loaded as Python loads mpi4py
// tests for MPI-4 functions with weak references, as mpi4py's builds for
// several MPIs do, and falls back to its own code where they are null.
// Under collmux it finds what it finds without collmux (collmux's exports
// of functions the MPI lacks resolve to null), except the _c twins
// collmux provides through their int-count functions. The same module
// built as a program linked with -z now has its references bound, and
// collmux's resolvers run, at start-up instead.
func TestAbsentFunctionsStayAbsent(t *testing.T) {
	for _, m := range impls(t) {
		forms := []struct {
			name string
			argv func() []string
		}{
			{"module loaded by dlopen", func() []string {
				return []string{program(t, m, "dlhost.c", "dlhost", "-ldl"), program(t, m, "weakmod.c", "libweakmod.so")}
			}},
			{"program bound at start-up", func() []string {
				return []string{program(t, m, "weakmod.c", "weakmain", "-DWEAKMOD_MAIN", "-Wl,-z,now")}
			}},
		}
		for _, f := range forms {
			t.Run(m.name+"/"+f.name, func(t *testing.T) {
				argv := f.argv()
				native, errs, err := run(t, m, 1, nil, argv...)
				if err != nil || !strings.Contains(native, "MPI_Pack                 present") {
					t.Fatalf("native: %v\n%s\n%s", err, native, errs)
				}
				env, _ := preloaded(t)
				got, errs, err := run(t, m, 1, env, argv...)
				if err != nil {
					t.Fatalf("under collmux: %v\n%s\n%s", err, got, errs)
				}
				want := strings.Replace(native, "MPI_Pack_c               absent", "MPI_Pack_c               present", 1)
				if got != want {
					t.Errorf("under collmux:\n%s", diff(want, got))
				}
				if m.name == "openmpi" && !strings.Contains(native, "MPI_Isendrecv            absent") {
					t.Errorf("Open MPI 4.1 has MPI_Isendrecv? The test no longer tests an absent function:\n%s", native)
				}
			})
		}
	}
}

// The table's C parameter lists are the standard's prototypes: declared
// again after each MPI's mpi.h, none conflicts with the MPI's own (MPICH
// 4.0 declares every MPI-4.0 function, Open MPI 4.1 those of MPI-3.1).
func TestUnservedTableMatchesHeaders(t *testing.T) {
	var src strings.Builder
	src.WriteString("#include <mpi.h>\n")
	for _, f := range unservedTable(t) {
		decl := fmt.Sprintf("int %s(%s);\n", f.name, f.params)
		if strings.Contains(f.params, "MPI_Session") {
			decl = "#ifdef MPI_SESSION_NULL\n" + decl + "#endif\n"
		}
		src.WriteString(decl)
	}
	file := filepath.Join(t.TempDir(), "prototypes.c")
	if err := os.WriteFile(file, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range impls(t) {
		if out, err := exec.Command(m.mpicc, append(append([]string{}, m.cflags...), "-fsyntax-only", "-Werror", file)...).CombinedOutput(); err != nil {
			t.Errorf("%s: the table's prototypes conflict with mpi.h: %v\n%s", m.name, err, out)
		}
	}
}
