package dispatch

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"collmux/topo/nvlink"
	"collmux/tune"
)

func TestLoadConfig(t *testing.T) {
	cases := []struct {
		env     map[string]string
		stats   StatsMode
		path    string
		log     LogLevel
		timeout int // 0: the default, DefaultTimeout
		linger  int // 0: the default, DefaultLingerUS; -1: 0
		unord   bool
		algo    FusedAlgo
		nodes   int // 0: the default, 1
		err     string
	}{
		{env: nil},
		{env: map[string]string{"COLLMUX_STATS": "1"}, stats: StatsText},
		{env: map[string]string{"COLLMUX_STATS": "off"}},
		{env: map[string]string{"COLLMUX_STATS": "out/s.json"}, stats: StatsJSON, path: "out/s.json"},
		{env: map[string]string{"COLLMUX_STATS": "report.txt"}, stats: StatsText, path: "report.txt"},
		{env: map[string]string{"COLLMUX_STATS": "TRUE"}, stats: StatsText},
		{env: map[string]string{"COLLMUX_STATS": "Yes"}, stats: StatsText},
		{env: map[string]string{"COLLMUX_STATS": "On"}, stats: StatsText},
		{env: map[string]string{"COLLMUX_STATS": "FALSE"}},
		{env: map[string]string{"COLLMUX_STATS": "No"}},
		{env: map[string]string{"COLLMUX_STATS": "0"}},
		{env: map[string]string{"COLLMUX_STATS": "stderr"}, stats: StatsText},
		{env: map[string]string{"COLLMUX_STATS": "-"}, stats: StatsText},
		{env: map[string]string{"COLLMUX_STATS": "./report"}, stats: StatsText, path: "./report"},
		{env: map[string]string{"COLLMUX_STATS": "/tmp/s.json"}, stats: StatsJSON, path: "/tmp/s.json"},
		{env: map[string]string{"COLLMUX_STATS": "stdout"}, err: "COLLMUX_STATS"}, // not a file named stdout
		{env: map[string]string{"COLLMUX_STATS": "enabled"}, err: "COLLMUX_STATS"},
		{env: map[string]string{"COLLMUX_LOG": "decisions"}, log: LogDecisions},
		{env: map[string]string{"COLLMUX_LOG": "loud"}, err: "COLLMUX_LOG"},
		{env: map[string]string{"COLLMUX_TIMEOUT": "5"}, timeout: 5},
		{env: map[string]string{"COLLMUX_TIMEOUT": "0"}, err: "COLLMUX_TIMEOUT"},
		{env: map[string]string{"COLLMUX_FUSED_LINGER": "0"}, linger: -1},
		{env: map[string]string{"COLLMUX_FUSED_LINGER": "1000"}, linger: 1000},
		{env: map[string]string{"COLLMUX_FUSED_LINGER": "-3"}, err: "COLLMUX_FUSED_LINGER"},
		{env: map[string]string{"COLLMUX_FUSED_LINGER": "1ms"}, err: "COLLMUX_FUSED_LINGER"},
		{env: map[string]string{"COLLMUX_STREAM_ORDER": "none"}, unord: true},
		{env: map[string]string{"COLLMUX_STREAM_ORDER": "default"}},
		{env: map[string]string{"COLLMUX_STREAM_ORDER": "per-thread"}, err: "COLLMUX_STREAM_ORDER"},
		{env: map[string]string{"COLLMUX_FUSED_ALGO": "auto"}},
		{env: map[string]string{"COLLMUX_FUSED_ALGO": "oneshot"}, algo: AlgoOneShot},
		{env: map[string]string{"COLLMUX_FUSED_ALGO": " twoshot "}, algo: AlgoTwoShot},
		{env: map[string]string{"COLLMUX_FUSED_ALGO": "ring"}, err: "COLLMUX_FUSED_ALGO"},
		{env: map[string]string{"COLLMUX_TOPO_OVERRIDE": "2"}, nodes: 2},
		{env: map[string]string{"COLLMUX_TOPO_OVERRIDE": "two"}, err: "COLLMUX_TOPO_OVERRIDE"},
		{env: map[string]string{"COLLMUX_TOPO_OVERRIDE": "0"}, err: "COLLMUX_TOPO_OVERRIDE"},
	}
	for _, tc := range cases {
		c, err := LoadConfig(func(k string) string { return tc.env[k] })
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want one naming %s", tc.env, err, tc.err)
			}
			continue
		}
		timeout, linger, nodes := DefaultTimeout, DefaultLingerUS, max(tc.nodes, 1)
		if tc.timeout != 0 {
			timeout = tc.timeout
		}
		if tc.linger != 0 {
			linger = max(tc.linger, 0)
		}
		if err != nil || c.Stats != tc.stats || c.StatsPath != tc.path || c.Log != tc.log || c.Timeout != timeout || c.LingerUS != linger || c.Unordered != tc.unord || c.FusedAlgo != tc.algo ||
			c.TopoNodes != nodes {
			t.Errorf("%v: got %+v, %v", tc.env, c, err)
		}
	}
}

func TestNamesRoundTrip(t *testing.T) {
	for c := Coll(0); c < NumColl; c++ {
		if got, ok := ParseColl(c.String()); !ok || got != c {
			t.Errorf("collective %v does not round-trip", c)
		}
	}
	for b := Backend(0); b < NumBackend; b++ {
		if got, ok := ParseBackend(b.String()); !ok || got != b {
			t.Errorf("backend %v does not round-trip", b)
		}
	}
	if _, ok := ParseColl("allreduce_c"); ok {
		t.Error("ParseColl accepted an unknown name")
	}
}

func TestTuningTable(t *testing.T) {
	GPUKey = func() string { return "key-here" }
	defer func() { GPUKey = nil }()
	dir := t.TempDir()
	write := func(name, key string, rules ...string) string {
		p := filepath.Join(dir, name)
		if err := (tune.Table{Version: tune.TableVersion, GPUKey: key, Rules: rules}).Write(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", "key-here", "allreduce:cuda:0-64K:fused", "allreduce:cuda:64K-inf:nccl")
	other := write("other.json", "key-elsewhere", "allreduce:cuda:*:staged")
	bad := write("bad.json", "key-here", "allreduce:cuda:*:warp")
	env := map[string]string{"COLLMUX_TUNING": good, "COLLMUX_RULES": "bcast:cuda:*:staged"}
	get := func(k string) string { return env[k] }

	c, err := LoadConfig(get)
	if err != nil || c.Tuning != good {
		t.Fatalf("%v, tuning %q", err, c.Tuning)
	}
	rt := Compile(c.Rules, Shape{2, 1, 2, nvlink.None})
	if r := rt.Pick(Allreduce, Device, DFloat, 1<<20); r.Backend != NCCL || !strings.Contains(c.Rules[r.Rule].Source, "tuning table") ||
		c.Rules[r.Rule].Text != "allreduce:cuda:64K-inf:nccl:overlap=no" {
		t.Errorf("1 MiB allreduce: %v from %s", r.Backend, c.Rules[r.Rule])
	}
	if r := rt.Pick(Bcast, Device, DFloat, 8); r.Backend != Staged || c.Rules[r.Rule].Source != "COLLMUX_RULES" {
		t.Error("COLLMUX_RULES must come after the tuning table")
	}
	// beside computation the table's rules (measured alone) give way to the
	// defaults' overlap rules, unless they say overlap=yes themselves
	beside := CompileMode(c.Rules, Shape{2, 1, 2, nvlink.None}, Mode{Blocking, Beside})
	if r := beside.Pick(Allreduce, Device, DFloat, 1<<20); r.Backend == NCCL && strings.Contains(c.Rules[r.Rule].Source, "tuning table") {
		t.Error("a tuning table's rule without overlap=yes chose a call in overlap mode")
	}
	lean := write("lean.json", "key-here", "allgather:cuda:*:nccl", "allgather:cuda:0-1M:fused:overlap=yes")
	env["COLLMUX_TUNING"] = lean
	if c, err := LoadConfig(get); err != nil {
		t.Fatal(err)
	} else {
		beside := CompileMode(c.Rules, Shape{2, 1, 2, nvlink.None}, Mode{Blocking, Beside})
		for _, tc := range []struct {
			bytes uint64
			want  Backend
		}{{1 << 10, Fused}, {1 << 24, Copy}} {
			if r := beside.Pick(Allgather, Device, DFloat, tc.bytes); r.Backend != tc.want {
				t.Errorf("allgather of %d bytes beside computation: %v, want %v", tc.bytes, r.Backend, tc.want)
			}
		}
		alone := Compile(c.Rules, Shape{2, 1, 2, nvlink.None})
		if r := alone.Pick(Allgather, Device, DFloat, 1<<10); r.Backend != NCCL {
			t.Errorf("allgather alone: %v, want the table's nccl", r.Backend)
		}
	}
	env["COLLMUX_TUNING"] = other
	if c, err := LoadConfig(get); err != nil || c.Tuning != "" || len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "another machine") {
		t.Errorf("a foreign table must be refused with a warning: %+v %v", c.Warnings, err)
	}
	env["COLLMUX_TUNING"] = bad
	if _, err := LoadConfig(get); err == nil || !strings.Contains(err.Error(), `"warp"`) {
		t.Errorf("a bad rule in a table must fail, naming it: %v", err)
	}
	// installed tables are found by GPU key
	delete(env, "COLLMUX_TUNING")
	env["XDG_CONFIG_HOME"] = dir
	os.MkdirAll(filepath.Join(dir, "collmux"), 0o755)
	os.Rename(good, filepath.Join(dir, "collmux", "tuning-key-here.json"))
	if c, err := LoadConfig(get); err != nil || !strings.HasSuffix(c.Tuning, "tuning-key-here.json") {
		t.Errorf("installed table not found: %q %v", c.Tuning, err)
	}
}

// A table's forms of the fused operations reach the configuration (and its
// hash, which the ranks compare); a form COLLMUX_OPS_ALGO does not name, or
// batches past the operation's, fail the start naming the table.
func TestTuningTableOps(t *testing.T) {
	GPUKey = func() string { return "key-here" }
	defer func() { GPUKey = nil }()
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		ops     []tune.OpsRange
		wantErr string
	}{
		{"forms", []tune.OpsRange{{Op: "gemv_allreduce", Ranks: 2, BatchLo: 1, BatchHi: 3, Lo: 0, Hi: math.MaxUint64, Form: "cublas"}, {Op: "gemv_allreduce", Ranks: 2, BatchLo: 4, BatchHi: 16, Lo: 0, Hi: math.MaxUint64, Form: "nccl"}}, ""},
		{"unknown form", []tune.OpsRange{{Op: "gemv_allreduce", Ranks: 2, BatchLo: 1, BatchHi: 3, Lo: 0, Hi: 10, Form: "warp"}}, "bad form"},
		{"batch past 16", []tune.OpsRange{{Op: "gemv_allreduce", Ranks: 2, BatchLo: 1, BatchHi: 17, Lo: 0, Hi: 10, Form: "fused"}}, "bad form"},
		{"no ranks", []tune.OpsRange{{Op: "gemv_allreduce", BatchLo: 1, BatchHi: 3, Lo: 0, Hi: 10, Form: "fused"}}, "bad form"},
		{"unknown op", []tune.OpsRange{{Op: "gemm_alltoall", Ranks: 2, BatchLo: 1, BatchHi: 1, Lo: 0, Hi: 10, Form: "fused"}}, "bad form"},
		{"too many", slices.Repeat([]tune.OpsRange{{Op: "gemv_allreduce", Ranks: 2, BatchLo: 1, BatchHi: 1, Lo: 0, Hi: 10, Form: "fused"}}, MaxOpsRanges+1), "at most"},
	} {
		p := filepath.Join(dir, tc.name+".json")
		if err := (tune.Table{Version: tune.TableVersion, GPUKey: "key-here", Ops: tc.ops}).Write(p); err != nil {
			t.Fatal(err)
		}
		c, err := LoadConfig(func(k string) string { return map[string]string{"COLLMUX_TUNING": p}[k] })
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), p) {
				t.Errorf("%s: %v, want an error naming %q and the table", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(c.Ops, tc.ops) || c.OpsHash() == (Config{}).OpsHash() {
			t.Errorf("%s: %v, forms %+v", tc.name, err, c.Ops)
		}
	}
}

// Installed tuning tables come only from the user's configuration folder:
// without HOME or XDG_CONFIG_HOME there is none (not .config/collmux under
// the current directory), and a broken installed table is blamed for
// itself, not on COLLMUX_TUNING, which was not set.
func TestTuningDirWithoutHome(t *testing.T) {
	GPUKey = func() string { return "key-here" }
	defer func() { GPUKey = nil }()
	home := t.TempDir()
	t.Chdir(home)
	installed := filepath.Join(home, ".config", "collmux")
	os.MkdirAll(installed, 0o755)
	os.WriteFile(filepath.Join(installed, "tuning-key-here.json"), []byte("{broken"), 0o644)
	for _, tc := range []struct {
		env  map[string]string
		dir  string
		err  string // "" for none
		none string // an error must not say this
	}{
		{env: nil, dir: ""},
		{env: map[string]string{"HOME": "."}, dir: ""},
		{env: map[string]string{"XDG_CONFIG_HOME": ".config"}, dir: ""},
		{env: map[string]string{"HOME": home}, dir: installed, err: "installed tuning table", none: "COLLMUX_TUNING"},
		{env: map[string]string{"COLLMUX_TUNING": filepath.Join(installed, "tuning-key-here.json")}, dir: "", err: "COLLMUX_TUNING"},
	} {
		get := func(k string) string { return tc.env[k] }
		if got := TuningDir(get); got != tc.dir {
			t.Errorf("%v: TuningDir %q, want %q", tc.env, got, tc.dir)
		}
		c, err := LoadConfig(get)
		switch {
		case tc.err == "" && (err != nil || c.Tuning != ""):
			t.Errorf("%v: tuning %q, %v; want none", tc.env, c.Tuning, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: error %v, want one naming %s", tc.env, err, tc.err)
		case tc.none != "" && err != nil && strings.Contains(err.Error(), tc.none):
			t.Errorf("%v: error %v blames %s", tc.env, err, tc.none)
		}
	}
}

func TestRulesHashDiffers(t *testing.T) {
	a, _ := LoadConfig(func(string) string { return "" })
	b, _ := LoadConfig(func(k string) string {
		if k == "COLLMUX_RULES" {
			return "bcast:cuda:*:nccl"
		}
		return ""
	})
	if a.RulesHash() == b.RulesHash() {
		t.Error("different rule sets hash alike")
	}
}

// The start-up line says where the rules came from, source by source.
func TestRulesOrigin(t *testing.T) {
	GPUKey = func() string { return "key-here" }
	defer func() { GPUKey = nil }()
	table := filepath.Join(t.TempDir(), "t.json")
	if err := (tune.Table{Version: tune.TableVersion, GPUKey: "key-here", Rules: []string{"allreduce:cuda:0-64K:fused", "bcast:cuda:*:nccl"}}).Write(table); err != nil {
		t.Fatal(err)
	}
	nd := len(DefaultRules())
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"defaults", nil, fmt.Sprintf("%d default", nd)},
		{"COLLMUX_RULES", map[string]string{"COLLMUX_RULES": "bcast:cuda:*:staged"}, fmt.Sprintf("%d default, 1 from COLLMUX_RULES", nd)},
		{"tuning table", map[string]string{"COLLMUX_TUNING": table, "COLLMUX_RULES": "bcast:cuda:*:staged#allreduce:host:*:mpi"},
			fmt.Sprintf("%d default, 2 from tuning table %s (COLLMUX_TUNING), 2 from COLLMUX_RULES", nd, table)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadConfig(func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if got := c.RulesOrigin(); got != tc.want {
				t.Errorf("RulesOrigin() = %q, want %q", got, tc.want)
			}
		})
	}
	if got := (Config{}).RulesOrigin(); got != "none" {
		t.Errorf("no rules: %q", got)
	}
}

// COLLMUX_TRACE is a path prefix; a boolean that turns it on is refused
// (it would become files named 1.<rank>.json), one that turns it off is off.
func TestTraceVar(t *testing.T) {
	for v, want := range map[string]string{"": "", "0": "", "off": "", "tl": "tl", " /tmp/run/tl ": "/tmp/run/tl", "1": "error", "yes": "error"} {
		c, err := LoadConfig(func(k string) string { return map[string]string{"COLLMUX_TRACE": v}[k] })
		if got := c.Trace; (err != nil) != (want == "error") || (err == nil && got != want) {
			t.Errorf("COLLMUX_TRACE=%q: %q, %v; want %q", v, got, err, want)
		}
	}
}

// Tests never read this machine's /etc/collmux.
func init() { systemTuningDefault = "/nonexistent/collmux-test-system" }

// The system folder (COLLMUX_TUNING_DIR, else /etc/collmux) is searched
// after the user's, and its table is used only if no other user could have
// written it: the table and its folder owned by root or this user, not
// writable by group or others, not symbolic links.
func TestSystemTuningTable(t *testing.T) {
	GPUKey = func() string { return "key-here" }
	defer func() { GPUKey = nil }()
	table := func(dir string, rules ...string) string {
		os.MkdirAll(dir, 0o755)
		os.Chmod(dir, 0o755)
		p := filepath.Join(dir, "tuning-key-here.json")
		if err := (tune.Table{Version: tune.TableVersion, GPUKey: "key-here", Rules: rules}).Write(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name     string
		setup    func(sys, user string) // sys holds a good table to begin with
		env      map[string]string      // COLLMUX_TUNING_DIR is sys unless set here
		wantFrom string                 // "" for no table
		wantWarn string
		wantErr  string
	}{
		{name: "system", wantFrom: "the system folder (COLLMUX_TUNING_DIR)"},
		{name: "default system folder", env: map[string]string{"COLLMUX_TUNING_DIR": ""}, wantFrom: "the system folder"},
		{name: "user first", setup: func(sys, user string) { table(user, "bcast:cuda:*:nccl") }, wantFrom: "the user's folder"},
		{name: "user's other keys", setup: func(sys, user string) {
			os.MkdirAll(user, 0o755)
			os.WriteFile(filepath.Join(user, "tuning-other.json"), []byte("{}"), 0o644)
		}, wantFrom: "the system folder (COLLMUX_TUNING_DIR)"},
		{name: "folder writable by group", setup: func(sys, user string) { os.Chmod(sys, 0o775) }, wantWarn: "writable by its group or others (mode 0775)"},
		{name: "file writable by others", setup: func(sys, user string) { os.Chmod(filepath.Join(sys, "tuning-key-here.json"), 0o666) }, wantWarn: "file"},
		{name: "file a link", setup: func(sys, user string) {
			p := filepath.Join(sys, "tuning-key-here.json")
			os.Rename(p, filepath.Join(sys, "real.json"))
			os.Symlink("real.json", p)
		}, wantWarn: "is a symbolic link"},
		{name: "folder a link", setup: func(sys, user string) { os.Symlink(sys, sys+"-link") },
			env: map[string]string{"COLLMUX_TUNING_DIR": "LINK"}, wantWarn: "is a symbolic link"},
		{name: "another user's", setup: func(sys, user string) {
			if os.Getuid() != 0 {
				t.Skip("needs root to give a file away")
			}
			os.Chown(filepath.Join(sys, "tuning-key-here.json"), 65534, 65534)
		}, wantWarn: "owned by uid 65534"},
		{name: "untrusted but no table for this key", setup: func(sys, user string) {
			os.Rename(filepath.Join(sys, "tuning-key-here.json"), filepath.Join(sys, "tuning-other.json"))
			os.Chmod(sys, 0o777)
		}},
		{name: "relative folder", env: map[string]string{"COLLMUX_TUNING_DIR": "etc/collmux"}, wantErr: "COLLMUX_TUNING_DIR"},
		{name: "broken", setup: func(sys, user string) { os.WriteFile(filepath.Join(sys, "tuning-key-here.json"), []byte("{"), 0o644) },
			wantErr: "the system tuning table"},
		{name: "COLLMUX_TUNING first", env: map[string]string{"COLLMUX_TUNING": "SYS/tuning-key-here.json"}, wantFrom: "COLLMUX_TUNING"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			sys, user := filepath.Join(root, "etc", "collmux"), filepath.Join(root, "home", "collmux")
			table(sys, "allreduce:cuda:*:staged")
			defer func(d string) { systemTuningDefault = d }(systemTuningDefault)
			systemTuningDefault = sys
			if tc.setup != nil {
				tc.setup(sys, user)
			}
			env := map[string]string{"XDG_CONFIG_HOME": filepath.Join(root, "home"), "COLLMUX_TUNING_DIR": sys}
			for k, v := range tc.env {
				env[k] = strings.ReplaceAll(strings.ReplaceAll(v, "LINK", sys+"-link"), "SYS", sys)
			}
			c, err := LoadConfig(func(k string) string { return env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			warns := strings.Join(c.Warnings, "\n")
			if c.TuningFrom != tc.wantFrom || (c.Tuning == "") != (tc.wantFrom == "") {
				t.Errorf("table %q from %q, want from %q (warnings %q)", c.Tuning, c.TuningFrom, tc.wantFrom, warns)
			}
			if tc.wantWarn == "" && warns != "" || tc.wantWarn != "" && !strings.Contains(warns, tc.wantWarn) {
				t.Errorf("warnings %q, want %q", warns, tc.wantWarn)
			}
			if tc.wantFrom != "" {
				want := map[string]string{"the user's folder": "tuning table " + filepath.Join(user, "tuning-key-here.json")}[tc.wantFrom]
				if want == "" {
					want = "tuning table " + filepath.Join(sys, "tuning-key-here.json")
				}
				if src := c.Rules[len(c.Rules)-1].Source; src != want {
					t.Errorf("last rule from %q, want %q", src, want)
				}
				if o := c.RulesOrigin(); !strings.Contains(o, want+" ("+tc.wantFrom+")") {
					t.Errorf("RulesOrigin %q does not say where the table came from", o)
				}
			}
		})
	}
}
