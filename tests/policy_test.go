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
	want := `allreduce on host memory, 4 B -> mpi (rule "allreduce:host:*:staged:overlap=no" from tuning table ` + table + `; staged declined the call)`
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
	// Open MPI 5.0.7's mpirun (Debian 13, distribution PMIx and PRRTE)
	// segfaults on every MPMD launch, collmux or not (open-mpi/ompi#13303)
	probe := exec.Command(mpirun, "--oversubscribe", "-np", "1", "true", ":", "-np", "1", "true")
	probe.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("skipped: %s cannot launch MPMD jobs here (`%s -np 1 true : -np 1 true`: %v)\n%s", mpirun, mpirun, err, out)
	}
	m := mpiImpl{"openmpi", "mpicc.openmpi", mpirun, nil}
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

// Rules on communicator shape: each communicator learns its shape (ranks,
// nodes, ranks per node) the first time it is used, and the decision log
// shows the rule that holds for it. COLLMUX_TOPO_OVERRIDE pretends the
// ranks sit on two nodes. The whole colltest runs alongside, with
// COLLMUX_CHECK on, to show that the per-communicator set-up neither hangs
// nor changes a result on hundreds of communicators.
func TestShapeRules(t *testing.T) {
	m := mpiImpl{"openmpi", "mpicc.openmpi", "mpirun.openmpi", nil}
	if _, err := exec.LookPath(m.mpirun); err != nil {
		t.Skip("skipped: Open MPI is not installed")
	}
	mod := program(t, m, "collmod.c", "libcollmod.so")
	host := program(t, m, "dlhost.c", "dlhost", "-ldl")
	rules := "allreduce:host:*:staged:ranks=3#bcast:host:*:staged:nodes=2"
	for _, tc := range []struct {
		np    int
		nodes string
		want  []string
	}{
		{2, "1", []string{`allreduce on host memory, 4 B -> mpi (rule "*:host:*:mpi" from default)`, `bcast on host memory, 4 B -> mpi (rule "*:host:*:mpi" from default)`}},
		{3, "1", []string{`rule "allreduce:host:*:staged:ranks=3" from COLLMUX_RULES; staged declined`}},
		{2, "2", []string{`rule "bcast:host:*:staged:nodes=2" from COLLMUX_RULES; staged declined`}},
	} {
		env := map[string]string{"LD_PRELOAD": libPath(t), "COLLMUX_RULES": rules, "COLLMUX_LOG": "decisions", "COLLMUX_TOPO_OVERRIDE": tc.nodes}
		out, errs, err := run(t, m, tc.np, env, host, mod)
		if err != nil || !strings.Contains(out, "ok") {
			t.Fatalf("np %d: err %v\n%s\n%s", tc.np, err, out, errs)
		}
		for _, w := range tc.want {
			if !strings.Contains(errs, w) {
				t.Errorf("np %d, %s node(s): decision log lacks %q:\n%s", tc.np, tc.nodes, w, errs)
			}
		}
	}
	// nvlink=: this machine has no NVIDIA driver, so its class is none
	env := map[string]string{"LD_PRELOAD": libPath(t), "COLLMUX_LOG": "decisions",
		"COLLMUX_RULES": "bcast:host:*:staged:nvlink=none#allreduce:host:*:staged:nvlink=partial,full"}
	out, errs, err := run(t, m, 2, env, host, mod)
	if err != nil || !strings.Contains(out, "ok") {
		t.Fatalf("nvlink rules: err %v\n%s\n%s", err, out, errs)
	}
	for _, w := range []string{`rule "bcast:host:*:staged:nvlink=none" from COLLMUX_RULES; staged declined`,
		`allreduce on host memory, 4 B -> mpi (rule "*:host:*:mpi" from default)`} {
		if !strings.Contains(errs, w) {
			t.Errorf("nvlink rules: decision log lacks %q:\n%s", w, errs)
		}
	}
	prog := program(t, m, "colltest.c", "colltest")
	native, _, err := run(t, m, 3, nil, prog)
	if err != nil {
		t.Fatal(err)
	}
	got, errs, err := run(t, m, 3, map[string]string{"LD_PRELOAD": libPath(t), "COLLMUX_RULES": rules, "COLLMUX_CHECK": "1"}, prog)
	if err != nil || got != native {
		t.Fatalf("colltest with shape rules and COLLMUX_CHECK: err %v\n%s\n%s", err, diff(native, got), errs)
	}
}

// collmux_set_rules changes the rules mid-run on every rank, refuses
// malformed or differing rule sets everywhere (no hang), and the decision
// log and statistics name each rule by the set it came from.
func TestSetRulesAtRunTime(t *testing.T) {
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			prog := program(t, m, "setrules.c", "setrules")
			env, statsFile := preloaded(t, "COLLMUX_LOG", "decisions")
			out, errs, err := run(t, m, 2, env, prog)
			if err != nil {
				t.Fatalf("%v\n%s\n%s", err, out, errs)
			}
			if !strings.Contains(out, "setrules: good 0, malformed -1, different -1, shape 0, sums ok") {
				t.Errorf("answers:\n%s", out)
			}
			for _, want := range []string{
				`allreduce on host memory, 4 B -> mpi (rule "*:host:*:mpi" from default)`,
				`rule "allreduce:host:*:staged" from collmux_set_rules; staged declined the call`,
				`rule "allreduce:host:*:nccl:ranks=1-64" from collmux_set_rules; nccl declined the call`,
				`collmux_set_rules: rule "allreduce:host:*:warp": unknown backend "warp"`,
				`collmux_set_rules: the ranks passed different rules`,
			} {
				if !strings.Contains(errs, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errs)
				}
			}
			// a statistics cell names the rule that routed its last call:
			// here the one from the second successful collmux_set_rules
			found := false
			for _, row := range readStats(t, statsFile).Rows {
				found = found || (row.Coll == "allreduce" && row.Rule == `"allreduce:host:*:nccl:ranks=1-64" from collmux_set_rules`)
			}
			if !found {
				t.Errorf("statistics do not name the rule in force at the last allreduce: %+v", readStats(t, statsFile).Rows)
			}
		})
	}
}

// form= rules tell blocking calls from nonblocking ones (MPI_I… and the
// starts of persistent calls): a rule for nonblocking all-reduces decides
// nbtest's MPI_Iallreduce and leaves colltest's MPI_Allreduce to the
// defaults.
func TestFormRules(t *testing.T) {
	rules := "allreduce:host:*:staged:form=nonblocking"
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			for _, tc := range []struct {
				src, want, not string
			}{
				{"nbtest.c", `rule "allreduce:host:*:staged:form=nonblocking" from COLLMUX_RULES; staged declined`, "\x00"},
				{"colltest.c", `-> mpi (rule "*:host:*:mpi" from default)`, `"allreduce:host:*:staged:form=nonblocking" from COLLMUX_RULES; staged declined`},
			} {
				prog := program(t, m, tc.src, strings.TrimSuffix(tc.src, ".c"), "-pthread", "-ldl")
				// statistics on: every call reaches the router (host calls pass straight through otherwise)
				env, _ := preloaded(t, "COLLMUX_RULES", rules, "COLLMUX_LOG", "decisions")
				out, errs, err := run(t, m, 2, env, prog)
				if err != nil || !strings.Contains(out, "0 failures") {
					t.Fatalf("%s: %v\n%s\n%s", tc.src, err, tail(out), errs)
				}
				if !strings.Contains(errs, tc.want) || strings.Contains(errs, tc.not) {
					t.Errorf("%s: decision log lacks %q or has %q:\n%s", tc.src, tc.want, tc.not, errs)
				}
			}
		})
	}
}

// COLLMUX_CHECK compares the ranks' message sizes; on host memory, where
// routing leaves derived datatypes to MPI, it asks MPI their sizes, so a
// valid program passing one signature through a contiguous type on one
// rank and basic elements on another (typemix) is not called erroneous.
func TestCheckAcceptsMixedDatatypes(t *testing.T) {
	for _, m := range impls(t) {
		prog := program(t, m, "typemix.c", "typemix")
		for _, np := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/np%d", m.name, np), func(t *testing.T) {
				native, errs, err := run(t, m, np, nil, prog)
				if err != nil || lastLine(native) != fmt.Sprintf("typemix: %d ranks", np) {
					t.Fatalf("native: %v\n%s\n%s", err, native, errs)
				}
				got, errs, err := run(t, m, np, map[string]string{"LD_PRELOAD": libPath(t), "COLLMUX_CHECK": "1"}, prog)
				if err != nil || got != native || strings.Contains(errs, "COLLMUX_CHECK") {
					t.Fatalf("under COLLMUX_CHECK: %v\n%s\n%s", err, diff(native, got), errs)
				}
			})
		}
	}
}
