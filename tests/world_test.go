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
)

// The second real-MPI world: Debian 13's Open MPI 5.0 and MPICH 4.2 in the
// chroot scripts/mpi-world.sh builds (make test-world). The library built
// here, on Debian 12, is preloaded into programs compiled and run there.

// worldScript is scripts/mpi-world.sh; world reports whether its world is
// built and usable (it needs root), skipping the test otherwise.
func worldScript(t *testing.T) string {
	t.Helper()
	script := filepath.Join(repoRoot(), "scripts", "mpi-world.sh")
	if os.Geteuid() != 0 || exec.Command(script, "path").Run() != nil {
		t.Skip("skipped: no Debian 13 MPI world (scripts/mpi-world.sh)")
	}
	return script
}

// inWorld runs argv inside the world and returns its stdout and stderr.
func inWorld(t *testing.T, script string, argv ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, append([]string{"run", "--"}, argv...)...)
	cmd.Dir = repoRoot()
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out: %v", err)
	}
	return o.String(), e.String(), err
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
	script := worldScript(t)
	lib := libPath(t)
	// the world sees the host's /tmp and the repository, nothing else
	dir, err := os.MkdirTemp("/tmp", "collmux-world-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, m := range allImpls {
		for _, p := range []struct{ src, want, coll string }{
			{"colltest", "colltest: 2 ranks, 0 failures", "allreduce"},
			{"nbtest", "nbtest: 2 ranks, 0 failures", "allreduce"},
			{"p2ptest", "p2ptest: 2 ranks, 0 failures", "send"},
		} {
			t.Run(m.name+"/"+p.src, func(t *testing.T) {
				exe := filepath.Join(dir, m.name+"-"+p.src)
				if _, errs, err := inWorld(t, script, m.mpicc, "-O1", "-Wall", "-pthread", "-o", exe,
					filepath.Join(repoRoot(), "tests", "c", p.src+".c")); err != nil {
					t.Fatalf("%s: %v\n%s", m.mpicc, err, errs)
				}
				native, errs, err := inWorld(t, script, append(worldLaunch(m, 2, nil), exe)...)
				if err != nil || lastLine(native) != p.want {
					t.Fatalf("native run: %v, ends %q, want %q\n%s\n%s", err, lastLine(native), p.want, tail(native), errs)
				}
				statsFile := filepath.Join(dir, m.name+"-"+p.src+".json")
				env := [][2]string{{"LD_PRELOAD", lib}, {"COLLMUX_STATS", statsFile}}
				got, errs, err := inWorld(t, script, append(worldLaunch(m, 2, env), exe)...)
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
