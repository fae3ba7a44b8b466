package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// mallocDebug is glibc's libc_malloc_debug.so (glibc 2.34 and later), which
// implements mtrace; "" where this system has none.
func mallocDebug() string {
	for _, dir := range []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib/aarch64-linux-gnu"} {
		p := filepath.Join(dir, "libc_malloc_debug.so.0")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// collmux's start-up allocates nothing in the main thread's malloc arena,
// the one the MPI allocates from (internal/cmx/aside.c says why that
// matters): the failing symbol lookups of its start-up and the Go
// runtime's first look at a thread's stack happen on a thread of the Go
// runtime. glibc's malloc trace of a rank shows each allocation's caller
// and address (the main arena is where most of the program's own
// allocations fall); under collmux the main arena sees no more
// allocations by those callers than in either of two runs without
// collmux (the MPI makes some of its own, not always as many).
func TestStartupLeavesMainArena(t *testing.T) {
	dbg := mallocDebug()
	if dbg == "" {
		t.Skip("skipped: no libc_malloc_debug.so (glibc < 2.34) to trace allocations with")
	}
	if os.Getenv("MALLOC_ARENA_MAX") != "" || strings.Contains(os.Getenv("GLIBC_TUNABLES"), "arena") {
		t.Skip("skipped: MALLOC_ARENA_MAX or GLIBC_TUNABLES limits malloc's arenas, so every thread may share the main one")
	}
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			prog := program(t, m, "colltest.c", "colltest")
			tracer := program(t, m, "mtracer.c", "mtracer.so")
			native := mainArenaAllocs(t, m, prog, tracer+" "+dbg)
			for what, n := range mainArenaAllocs(t, m, prog, tracer+" "+dbg) {
				native[what] = max(native[what], n)
			}
			under := mainArenaAllocs(t, m, prog, libPath(t)+" "+tracer+" "+dbg)
			for _, what := range startupCallers {
				if under[what] > native[what] {
					t.Errorf("%d allocations by %s in the main arena under collmux, at most %d without", under[what], what, native[what])
				}
			}
		})
	}
}

// startupCallers are the callers whose allocations collmux's start-up
// once made on the main thread: a failing dlsym's message, cgo's stack
// probe and stdio's line reader (through which it reads /proc/self/maps).
var startupCallers = []string{"_dl_exception_create", "pthread_getattr_np", "__getdelim", "x_cgo_"}

// mainArenaAllocs runs prog on one rank with preload (which starts the
// malloc trace; no GPU, so that collmux sets up nothing per communicator)
// and counts the main arena's allocations by each of startupCallers.
func mainArenaAllocs(t *testing.T, m mpiImpl, prog, preload string) map[string]int {
	t.Helper()
	trace := filepath.Join(t.TempDir(), "trace")
	env := map[string]string{"LD_PRELOAD": preload, "MALLOC_TRACE": trace, "CUDA_VISIBLE_DEVICES": ""}
	if _, stderr, err := run(t, m, 1, env, prog); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatalf("no malloc trace: %v", err)
	}
	line := regexp.MustCompile(`^@ (.+) ([+<>]) 0x([0-9a-f]+) 0x[0-9a-f]+$`)
	type alloc struct {
		caller string
		addr   uint64
	}
	var all []alloc
	// where most of the program's own allocations fall (by the GiB): not
	// just its first one, which may be a chunk another thread's arena
	// lent through the main thread's cache (under Open MPI 5 colltest's
	// first is one freed by the MPI, from a progress thread's arena)
	var arena uint64
	byGiB := map[uint64]int{}
	for _, l := range strings.Split(string(b), "\n") {
		if mm := line.FindStringSubmatch(l); mm != nil {
			addr, _ := strconv.ParseUint(mm[3], 16, 64)
			if strings.Contains(mm[1], filepath.Base(prog)) {
				byGiB[addr>>30]++
				if byGiB[addr>>30] > byGiB[arena>>30] {
					arena = addr
				}
			}
			all = append(all, alloc{mm[1], addr})
		}
	}
	if arena == 0 || len(all) < 100 {
		t.Fatalf("the trace (%d allocations) has none by the program itself", len(all))
	}
	n := map[string]int{}
	for _, a := range all {
		if a.addr-arena >= 1<<30 && arena-a.addr >= 1<<30 {
			continue // another arena
		}
		for _, what := range startupCallers {
			if strings.Contains(a.caller, what) {
				n[what]++
			}
		}
	}
	return n
}

// collmux's Go runtime starts once the MPI has initialised, not as the
// library loads (internal/cmx/gostart.c says why): under collmux a rank has as many
// threads before MPI_Init as without it; with COLLMUX_DISABLE=1 no more
// after MPI_Init either (Go never starts); otherwise more after (the
// runtime did start, in MPI_Init), and the program's collective is right.
func TestGoStartsAfterMPIInit(t *testing.T) {
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			prog := program(t, m, "gostart.c", "gostart")
			line := regexp.MustCompile(`rank 0: before (\d+) after (\d+) sum 1\n`)
			threads := func(env map[string]string) (before, after int) {
				t.Helper()
				env["CUDA_VISIBLE_DEVICES"] = ""
				// UCX's VFS (under MPICH 4.2 and Open MPI 5) makes a thread
				// as it loads that may or may not still be there in main
				env["UCX_VFS_ENABLE"] = "n"
				stdout, stderr, err := run(t, m, 1, env, prog)
				mm := line.FindStringSubmatch(stdout)
				if err != nil || mm == nil {
					t.Fatalf("%v %v: %v\n%s%s", m.name, env, err, stdout, stderr)
				}
				before, _ = strconv.Atoi(mm[1])
				after, _ = strconv.Atoi(mm[2])
				return before, after
			}
			nb, na := threads(map[string]string{})
			cb, ca := threads(map[string]string{"LD_PRELOAD": libPath(t)})
			db, da := threads(map[string]string{"LD_PRELOAD": libPath(t), "COLLMUX_DISABLE": "1"})
			t.Logf("threads before/after MPI_Init: native %d/%d, collmux %d/%d, disabled %d/%d", nb, na, cb, ca, db, da)
			if cb != nb || db != nb {
				t.Errorf("threads before MPI_Init: %d under collmux, %d disabled, %d without: the Go runtime started as the library loaded", cb, db, nb)
			}
			if da > na {
				t.Errorf("threads after MPI_Init with COLLMUX_DISABLE=1: %d, %d without: the Go runtime started", da, na)
			}
			if ca <= na {
				t.Errorf("threads after MPI_Init under collmux: %d, %d without: the Go runtime did not start", ca, na)
			}
		})
	}
}
