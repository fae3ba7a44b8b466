package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"collmux/tune"
)

// A tuning table for this machine (no GPU: key "no-gpu") is applied, and
// COLLMUX_LOG=decisions and the statistics name it as the rule's source.
func TestTuningTableApplied(t *testing.T) {
	m := impls(t)[0]
	mod := program(t, m, "collmod.c", "libcollmod.so")
	host := program(t, m, "dlhost.c", "dlhost", "-ldl")
	table := filepath.Join(t.TempDir(), "tuning.json")
	// staged declines host buffers, so the call still ends on MPI, but
	// the decision shows which rule chose staged
	err := tune.Table{Version: tune.TableVersion, GPUKey: "no-gpu", Rules: []string{"allreduce:host:*:staged"}}.Write(table)
	if err != nil {
		t.Fatal(err)
	}
	env, statsFile := preloaded(t, "COLLMUX_TUNING", table, "COLLMUX_LOG", "decisions")
	out, errs, err := run(t, m, 2, env, host, mod)
	if err != nil || !strings.Contains(out, "ok") {
		t.Fatalf("err %v\n%s\n%s", err, out, errs)
	}
	want := `allreduce on host memory, 4 B -> mpi (rule "allreduce:host:*:staged" from tuning table ` + table + `; staged declined the call)`
	if !strings.Contains(errs, want) {
		t.Errorf("decision log lacks %q:\n%s", want, errs)
	}
	found := false
	for _, row := range readStats(t, statsFile).Rows {
		found = found || (row.Coll == "allreduce" && strings.Contains(row.Rule, "tuning table"))
	}
	if !found {
		t.Error("statistics do not name the tuning table's rule")
	}
}

// Ranks started with different rules would route a collective apart and
// hang; collmux stops at MPI_Init instead, saying why.
func TestDifferentRulesAcrossRanksFail(t *testing.T) {
	const mpirun = "mpirun.openmpi"
	if _, err := exec.LookPath(mpirun); err != nil {
		t.Skip("skipped: needs Open MPI's MPMD launcher")
	}
	m := mpiImpl{"openmpi", "mpicc.openmpi", mpirun}
	mod := program(t, m, "collmod.c", "libcollmod.so")
	host := program(t, m, "dlhost.c", "dlhost", "-ldl")
	lib := libPath(t)
	args := []string{"--oversubscribe"}
	for _, rules := range []string{"bcast:cuda:*:nccl", "bcast:cuda:*:staged"} {
		if len(args) > 1 {
			args = append(args, ":")
		}
		args = append(args, "-np", "1", "-x", "LD_PRELOAD="+lib, "-x", "COLLMUX_STATS=1", "-x", "COLLMUX_RULES="+rules, host, mod)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirun, args...)
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatal("hung instead of failing")
	}
	if err == nil || !strings.Contains(string(out), "different routing rules") {
		t.Fatalf("want a failure naming the rule mismatch; err %v\n%s", err, out)
	}
}
