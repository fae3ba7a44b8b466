package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"collmux/dispatch"
	"collmux/trace"
	"collmux/tune"
)

// testdata holds the measurements the tune package's tests read too
// (recorded on 2 x H200).
var testdata = filepath.Join("..", "..", "tune", "testdata")

func execute(t *testing.T, args ...string) string {
	t.Helper()
	out, err := run(args...)
	if err != nil {
		t.Fatalf("collmux %v: %v\n%s", args, err, out)
	}
	return out
}

// run is the tool's output (stdout and stderr) and error for args.
func run(args ...string) (string, error) {
	c := root()
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&out)
	c.SetArgs(args)
	err := c.Execute()
	return out.String(), err
}

// tune on the sweeps recorded on 2 x H200 writes a loadable table whose
// rules pick fused for small all-reduces, and a plot per collective.
func TestTuneFromRecordedSweeps(t *testing.T) {
	dir := t.TempDir()
	table := filepath.Join(dir, "t.json")
	out := execute(t, "tune", "--from-csv", filepath.Join(testdata, "bench_collmux.csv")+","+filepath.Join(testdata, "bench_fused.csv")+","+
		filepath.Join(testdata, "bench_staged.csv"), "--gpu-key", "h200x2", "--out", table, "--plots", dir)
	tab, err := tune.Read(table)
	if err != nil {
		t.Fatal(err)
	}
	if tab.GPUKey != "h200x2" || !strings.Contains(tab.RuleString(), "allreduce:cuda:0-") {
		t.Errorf("table %+v", tab.Rules)
	}
	if !strings.HasPrefix(tab.Rules[0], "allgather:cuda:0-64:nccl") && !strings.Contains(out, "fused") {
		t.Errorf("fused never chosen:\n%s", out)
	}
	for _, c := range []string{"allreduce", "allgather", "alltoall", "bcast", "reduce_scatter"} {
		st, err := os.Stat(filepath.Join(dir, c+".png"))
		if err != nil || st.Size() < 1000 {
			t.Errorf("plot for %s: %v", c, err)
		}
	}
}

// tune with the runs beside a GEMM stream recorded on 2 x H200 adds rules
// for overlap mode (overlap=yes) that the library loads: the all-gathers
// go to the copy engines there, while outside it the table's own rules
// hold. The recorded file's paths are relabelled as tune --overlap names
// them: its "overlap" policy's (the copy engines for all-gather and
// all-to-all, the lean fused kernels for the reductions) and NCCL's; the
// default policy's lines are left out.
func TestTuneOverlapFromRecorded(t *testing.T) {
	dir := t.TempDir()
	rec, err := os.ReadFile(filepath.Join(testdata, "overlap_h200x2.csv"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(rec)), "\n") {
		f := strings.Split(l, ",")
		switch {
		case f[0] == "coll":
		case f[1] == "nccl":
			f[1] = "via-nccl"
		case f[1] == "overlap" && (f[0] == "allgather" || f[0] == "alltoall"):
			f[1] = "via-copy"
		case f[1] == "overlap":
			f[1] = "via-fused"
		default:
			continue
		}
		lines = append(lines, strings.Join(f, ","))
	}
	ovl := filepath.Join(dir, "overlap.csv")
	if err := os.WriteFile(ovl, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	table := filepath.Join(dir, "t.json")
	out := execute(t, "tune", "--from-csv", filepath.Join(testdata, "bench_collmux.csv")+","+filepath.Join(testdata, "bench_fused.csv"),
		"--overlap-csv", ovl, "--gpu-key", "h200x2", "--out", table, "--plots", dir)
	tab, err := tune.Read(table)
	if err != nil {
		t.Fatal(err)
	}
	// 4 collectives x 5 sizes x 2 paths, less what the fused kernels do
	// not serve (reduce-scatter; all-reduces past their 8 MiB workspace),
	// whose lines measured a fallback
	if len(tab.OverlapSamples) != 40-5-2 || len(tab.OverlapRanges) == 0 || !strings.Contains(out, "J/GB") {
		t.Fatalf("%d samples beside the GEMMs, ranges %+v:\n%s", len(tab.OverlapSamples), tab.OverlapRanges, out)
	}
	rules, err := dispatch.ParseRules(tab.RuleString(), "table")
	if err != nil {
		t.Fatal(err)
	}
	beside := dispatch.CompileMode(rules, dispatch.Shape{Ranks: 2, Nodes: 1, RanksPerNode: 2}, dispatch.Mode{Overlap: dispatch.Beside})
	for _, n := range []uint64{64 << 10, 4 << 20, 256 << 20} {
		if r := beside.Pick(dispatch.Allgather, dispatch.Device, dispatch.DFloat, n); r.Backend != dispatch.Copy {
			t.Errorf("allgather of %d bytes beside computation: %v, want copy", n, r.Backend)
		}
	}
	if !strings.Contains(tab.RuleString(), "allgather:cuda:0-inf:copy:overlap=yes") {
		t.Errorf("rules %v", tab.Rules)
	}
}

// tune with the forms of the GEMV + all-reduce recorded on 2 x H200 (the
// unfused cuBLAS + NCCL contender standing for the nccl form) records the
// fastest per batch and m, which the library loads for COLLMUX_OPS_ALGO=auto
// and collmux info lists.
func TestTuneOpsFromRecorded(t *testing.T) {
	dir := t.TempDir()
	rec, err := os.ReadFile(filepath.Join(testdata, "fusedops_h200x2.csv"))
	if err != nil {
		t.Fatal(err)
	}
	ops := filepath.Join(dir, "fusedops.csv")
	if err := os.WriteFile(ops, []byte(strings.ReplaceAll(string(rec), ",a:cublas+nccl,", ",d:nccl,")), 0o644); err != nil {
		t.Fatal(err)
	}
	table := filepath.Join(dir, "t.json")
	execute(t, "tune", "--from-csv", filepath.Join(testdata, "bench_collmux.csv"), "--ops-csv", ops, "--gpu-key", "h200x2", "--out", table,
		"--plots", dir)
	tab, err := tune.Read(table)
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.OpsSamples) != 36 || len(tab.Ops) != 3 {
		t.Fatalf("%d samples, forms %+v", len(tab.OpsSamples), tab.Ops)
	}
	for i, want := range []tune.OpsRange{{Op: "gemv_allreduce", Ranks: 2, BatchLo: 1, BatchHi: 3, Lo: 0, Hi: math.MaxUint64, Form: "cublas"}, {Op: "gemv_allreduce", Ranks: 2, BatchLo: 4, BatchHi: 15, Lo: 0, Hi: math.MaxUint64, Form: "nccl"},
		{Op: "gemv_allreduce", Ranks: 2, BatchLo: 16, BatchHi: 16, Lo: 0, Hi: math.MaxUint64, Form: "nccl"}} {
		if tab.Ops[i] != want {
			t.Errorf("form %d: %+v, want %+v", i, tab.Ops[i], want)
		}
	}
	// a table of this machine's (no GPU here): the library would take its
	// forms; collmux info lists them
	execute(t, "tune", "--from-csv", filepath.Join(testdata, "bench_collmux.csv"), "--ops-csv", ops, "--gpu-key", "no-gpu", "--out", table,
		"--plots", dir)
	t.Setenv("COLLMUX_TUNING", table)
	out := execute(t, "info")
	if !strings.Contains(out, "Forms of the fused operations from the tuning table") ||
		!strings.Contains(out, "  gemv_allreduce, 2 ranks, batch 1-3, m 0-inf: cublas\n") || !strings.Contains(out, "batch 4-15, m 0-inf: nccl") {
		t.Errorf("collmux info:\n%s", out)
	}
}

// tune --overlap --dry-run prints the command of each backend's run beside
// the GEMMs: forced alone, in overlap mode, named via-B.
func TestTuneOverlapDryRun(t *testing.T) {
	out := execute(t, "tune", "--overlap", "--dry-run", "--np", "2", "--bench", "/bin/gpu_bench", "--overlap-bench", "/bin/overlap",
		"--lib", "/lib/libcollmux.so", "--launcher", "srun -n {np} {env} {prog}", "--overlap-backends", "copy,nccl", "--overlap-max-bytes", "4M")
	if out, err := run("tune", "--overlap", "--dry-run", "--np", "2", "--bench", "/bin/gpu_bench", "--overlap-bench", "/bin/overlap",
		"--lib", "/lib/libcollmux.so", "--overlap-max-bytes", "inf"); err == nil || !strings.Contains(err.Error(), "give a size") {
		t.Errorf("--overlap-max-bytes inf: %v\n%s", err, out)
	}
	ops := execute(t, "tune", "--ops", "--dry-run", "--np", "2", "--bench", "/bin/gpu_bench", "--ops-bench", "/bin/fusedops",
		"--lib", "/lib/libcollmux.so", "--launcher", "srun -n {np} {env} {prog}", "--ops-max-m", "8192")
	for _, f := range tune.OpsForms {
		if want := "COLLMUX_OPS_ALGO=" + f + " /bin/fusedops 8192 d d:" + f + "\n"; !strings.Contains(ops, want) {
			t.Errorf("tune --ops --dry-run: no line with %q:\n%s", want, ops)
		}
	}
	for _, b := range []string{"copy", "nccl"} {
		want := "COLLMUX_OVERLAP=1 'COLLMUX_RULES=*:cuda:*:" + b + "' /bin/overlap via-" + b + " 4194304 allreduce,allgather,alltoall,reduce_scatter"
		if !strings.Contains(out, want) {
			t.Errorf("no line with %q:\n%s", want, out)
		}
	}
}

// The sweep measures every backend in one gpu_bench run, each up to its
// own limit; the progress bar expects exactly the lines gpu_bench prints.
func TestSweepPolicies(t *testing.T) {
	cases := []struct {
		backends           []string
		max, staged, fused string
		np                 int
		wantMax            uint64
		wantPolicies       []string
		wantLines          int
		wantErr            string
	}{
		{backends: []string{"nccl"}, max: "64", staged: "64", fused: "64", wantMax: 64,
			wantPolicies: []string{"via-nccl=*:cuda:*:nccl@64"}, wantLines: 1 + 4*5*2}, // sizes 8..64
		{backends: []string{"nccl", "fused", "staged"}, max: "1K", staged: "16", fused: "256", wantMax: 1024,
			wantPolicies: []string{"via-nccl=*:cuda:*:nccl@1024", "via-fused=*:cuda:*:fused@256", "via-staged=*:cuda:*:staged@16"},
			// 8 sizes (8..1K): NCCL direct and nccl at each, fused at 6, staged at 2
			wantLines: 1 + 5*(8+8+6+2)},
		{backends: []string{"fused", "staged"}, max: "64M", staged: "128M", np: 2, wantMax: 64 << 20, // fused: 8 MiB a rank; each capped at --max-bytes
			wantPolicies: []string{"via-fused=*:cuda:*:fused@16777216", "via-staged=*:cuda:*:staged@67108864"}, wantLines: 1 + 5*(24+22+24)},
		{backends: []string{"warp"}, max: "1K", staged: "1K", fused: "1K", wantErr: "warp"},
		{backends: []string{"nccl"}, max: "lots", staged: "1K", fused: "1K", wantErr: "lots"},
	}
	for _, tc := range cases {
		o := tuneOpts{backends: tc.backends, maxBytes: tc.max, stgMax: tc.staged, fusedMax: tc.fused, np: tc.np}
		max, pol, err := sweepPolicies(o)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want one naming %q", tc.backends, err, tc.wantErr)
			}
			continue
		}
		var args []string
		for _, p := range pol {
			args = append(args, p.arg())
		}
		if err != nil || max != tc.wantMax || strings.Join(args, " ") != strings.Join(tc.wantPolicies, " ") {
			t.Errorf("%v: got %d %v %v, want %d %v", tc.backends, max, pol, err, tc.wantMax, tc.wantPolicies)
		}
		if got := expectedLines(max, pol); got != tc.wantLines {
			t.Errorf("%v: expectedLines %d, want %d", tc.backends, got, tc.wantLines)
		}
	}
	// check's tuned policy runs at every size: "tuned=@64" ("" restores the defaults and table)
	tuned := benchPolicy{"tuned", "", 64}
	if tuned.arg() != "tuned=@64" || expectedLines(64, []benchPolicy{tuned}) != 1+4*5*2 {
		t.Errorf("tuned policy %q: %d lines", tuned.arg(), expectedLines(64, []benchPolicy{tuned}))
	}
}

// check on the run recorded with the table tuned on 2 x H200.
func TestCheckFromCSV(t *testing.T) {
	data := filepath.Join(testdata, "h200x2-resident")
	out := execute(t, "check", "--table", filepath.Join(data, "tuning.json"), "--from-csv", filepath.Join(data, "policies.csv"), "--np", "2")
	for _, want := range []string{"| allgather | 28 | 1.079 (16777216 B) | 21 of 28 | 27: 0.957–1.060 |", "| allreduce | 28 | 1.044 (512 B) | 25 of 28 | 28:",
		"at every size: NO"} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
}

func TestTopoJSON(t *testing.T) {
	var m map[string]any
	if err := json.Unmarshal([]byte(execute(t, "topo", "--json")), &m); err != nil {
		t.Fatal(err)
	}
	if m["gpu_key"] == "" || m["fingerprint"] == "" || m["cores"].(float64) < 1 {
		t.Errorf("topo: %v", m)
	}
}

func TestRoutes(t *testing.T) {
	t.Setenv("COLLMUX_RULES", "scan:cuda:*:nccl#alltoall:cuda:*:staged:nodes=2-8:dtype=int#bcast:cuda:*:staged:nvlink=partial")
	out := execute(t, "routes", "--ranks", "8", "--nodes", "2", "--nvlink", "partial")
	for _, want := range []string{
		`allreduce\s+cuda\s+\*\s+0-8M\s+fused\s+"allreduce:cuda:0-8M:fused" from default`,
		`allreduce\s+cuda\s+\*\s+8M\+1-inf\s+nccl`,
		`scan\s+cuda\s+\*\s+0-inf\s+nccl\s+"scan:cuda:\*:nccl" from COLLMUX_RULES`,
		`alltoall\s+cuda\s+int\s+0-inf\s+staged`,
		`alltoall\s+cuda\s+float\s+0-8M\s+fused`,
		`bcast\s+cuda\s+\*\s+0-inf\s+staged\s+"bcast:cuda:\*:staged:nvlink=partial"`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("routes output lacks %q:\n%s", want, out)
		}
	}
	if out := execute(t, "routes", "--ranks", "8", "--nodes", "2", "--nvlink", "none"); strings.Contains(out, "nvlink=partial") {
		t.Errorf("a rule for partial NVLink applied without NVLink:\n%s", out)
	}
}

// version reads the library's version from its ident without loading it,
// and says when it finds none; --version prints the same.
func TestVersion(t *testing.T) {
	dir := t.TempDir()
	lib := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	other, same, none := lib("other.so", "\x7fELF\x00"+libMarker+"9.8.7\x00rest"), lib("same.so", "x"+libMarker+version+"\x00"), lib("none.so", "\x7fELF")
	missing := filepath.Join(dir, "missing.so")
	cases := []struct{ lib, want string }{
		{other, "library  9.8.7 (" + other + "; not the tool's version)\n"},
		{same, "library  " + version + " (" + same + ")\n"},
		{none, "library  unknown: " + none + " has no collmux version string"},
		{missing, "library  not found (looked for " + missing + "; set COLLMUX_LIB)\n"},
	}
	for _, tc := range cases {
		t.Setenv("COLLMUX_LIB", tc.lib)
		out := execute(t, "version")
		for _, want := range []string{"collmux  " + version + "\n", tc.want, "go       " + runtime.Version() + " "} {
			if !strings.Contains(out, want) {
				t.Errorf("COLLMUX_LIB=%s: version lacks %q:\n%s", tc.lib, want, out)
			}
		}
		if flag := execute(t, "--version"); flag != out {
			t.Errorf("--version printed\n%s\nversion printed\n%s", flag, out)
		}
	}
}

// info lists every variable with its value and source, the rules with
// theirs, and warns about unknown variables and refused tables; a value the
// library would refuse is an error after the listing.
func TestInfo(t *testing.T) {
	table := filepath.Join(testdata, "h200x2-resident", "tuning.json") // measured on another machine
	cases := []struct {
		name    string
		env     map[string]string
		want    []string // regular expressions
		wantErr string
	}{
		{name: "set and unknown", env: map[string]string{"COLLMUX_LOG": "decisions", "COLLMUX_RULES": "scan:cuda:*:nccl", "COLLMUX_LOGG": "1", "COLLMUX_LIB": "/x/lib.so"},
			want: []string{`(?m)^COLLMUX_LOG\s+decisions\s+environment\s+what collmux`, `(?m)^COLLMUX_TIMEOUT\s+1800\s+default\s`,
				`(?m)^COLLMUX_NVRTC_LIB\s+-\s+default\s`, `(?m)^COLLMUX_LIB\s+/x/lib.so\s+environment, not read by the library\s`,
				`(?m)^COLLMUX_RULES\s+scan:cuda:\*:nccl\s+environment\s`, `Tuning table: none: COLLMUX_TUNING is unset`,
				`14 built-in, 0 from the tuning table, 1 from COLLMUX_RULES\n`, `(?m)^  \*:host:\*:mpi\s+default$`, `(?m)^  scan:cuda:\*:nccl\s+COLLMUX_RULES$`,
				`Warnings:\n  COLLMUX_LOGG is not a collmux variable; did you mean COLLMUX_LOG\?\n`}},
		{name: "empty", env: map[string]string{"COLLMUX_TIMEOUT": ""}, want: []string{`(?m)^COLLMUX_TIMEOUT\s+1800\s+default\s`}}, // empty reads as unset
		{name: "foreign table", env: map[string]string{"COLLMUX_TUNING": table},
			want: []string{`Tuning table: none: COLLMUX_TUNING's table is not used`, `  tuning table .* was measured on another machine`}},
		{name: "refused value", env: map[string]string{"COLLMUX_TIMEOUT": "0"}, want: []string{`(?m)^COLLMUX_TIMEOUT\s+0\s+environment\s`}, wantErr: "COLLMUX_TIMEOUT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // no installed tuning table
			for _, v := range dispatch.Vars {
				t.Setenv(v.Name, "")
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			out, err := run("info")
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("%v: error %v, want %q", tc.env, err, tc.wantErr)
			}
			for _, want := range tc.want {
				if !regexp.MustCompile(want).MatchString(out) {
					t.Errorf("%v: info lacks %q:\n%s", tc.env, want, out)
				}
			}
		})
	}
}

// trace merge joins two ranks' files into one.
func TestTraceMerge(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for r := 0; r < 2; r++ {
		p := filepath.Join(dir, "t."+string(rune('0'+r))+".json")
		m := trace.Meta{Tool: "collmux", Rank: r, Ranks: 2, Clock: trace.Clock}
		if err := trace.WriteFile(p, m, []trace.Call{{Name: "MPI_Barrier", Family: "barrier", StartNS: uint64(10 - r), TID: 1, Backend: "mpi", Mem: "host", Form: "blocking"}}); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	out := filepath.Join(dir, "all.json")
	if msg := execute(t, append([]string{"trace", "merge", out}, files...)...); !strings.Contains(msg, "of 2 ranks") {
		t.Errorf("merge said %q", msg)
	}
	f, err := trace.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	last := f.TraceEvents[len(f.TraceEvents)-1]
	if last.Ph != "X" || last.PID != 0 {
		t.Errorf("last event %+v: want rank 0's barrier, the later one", last)
	}
}
