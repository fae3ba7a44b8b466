package tests

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"

	"collmux/dispatch"
)

// COLLMUX_STATS's JSON report names collmux's version and each rank's
// host, and has each rank's own figures: per cell they add up to the sums,
// and the cell's spread over ranks (min ≤ mean ≤ max, the slowest rank)
// agrees with them. COLLMUX_TOPO_OVERRIDE's simulated nodes show as hosts.
func TestStatsPerRank(t *testing.T) {
	for _, m := range impls(t) {
		prog := program(t, m, "colltest.c", "colltest")
		for _, tc := range []struct {
			np    int
			nodes string // COLLMUX_TOPO_OVERRIDE, "" for none
			hosts int    // distinct host names in the report
		}{
			{2, "", 1},
			{3, "2", 2},
		} {
			t.Run(fmt.Sprintf("%s/np%d/nodes%s", m.name, tc.np, tc.nodes), func(t *testing.T) {
				env, statsFile := preloaded(t)
				if tc.nodes != "" {
					env["COLLMUX_TOPO_OVERRIDE"] = tc.nodes
				}
				out, errs, err := run(t, m, tc.np, env, prog)
				if err != nil || !strings.Contains(out, fmt.Sprintf("colltest: %d ranks, 0 failures", tc.np)) {
					t.Fatalf("err %v\n%s\n%s", err, tail(out), errs)
				}
				r := readStats(t, statsFile)
				if v := projectVersion(t); r.Version != v {
					t.Errorf("report of version %q, want %q", r.Version, v)
				}
				seen := map[string]bool{}
				for _, h := range r.Hosts {
					seen[h] = h != ""
				}
				if len(r.Hosts) != tc.np || len(seen) != tc.hosts || seen[""] {
					t.Errorf("hosts %q: want %d names, %d distinct", r.Hosts, tc.np, tc.hosts)
				}
				if r.Calls("allreduce", "mpi") == 0 {
					t.Errorf("no allreduce counted: %+v", r.Rows)
				}
				type cell struct {
					coll, backend string
					lo            uint64
				}
				type sum struct {
					calls, bytes uint64
					sec, max     float64
					ranks        int
				}
				per := map[cell]*sum{}
				slowestTime := map[[2]any]float64{} // {cell, rank}: that rank's time
				for _, rr := range r.RankRows {
					if rr.Rank < 0 || rr.Rank >= tc.np || rr.Calls == 0 {
						t.Errorf("per-rank row %+v: rank out of range or no calls", rr)
					}
					k := cell{rr.Coll, rr.Backend, rr.MinSize}
					s := per[k]
					if s == nil {
						s = &sum{}
						per[k] = s
					}
					s.calls, s.bytes, s.sec, s.ranks = s.calls+rr.Calls, s.bytes+rr.Bytes, s.sec+rr.TimeSec, s.ranks+1
					s.max = math.Max(s.max, rr.TimeSec)
					slowestTime[[2]any{k, rr.Rank}] = rr.TimeSec
				}
				if len(per) != len(r.Rows) {
					t.Errorf("per-rank rows cover %d cells, the report has %d", len(per), len(r.Rows))
				}
				near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
				for _, row := range r.Rows {
					k := cell{row.Coll, row.Backend, row.MinSize}
					s := per[k]
					if s == nil {
						t.Errorf("%+v: no per-rank rows", row)
						continue
					}
					if s.calls != row.Calls || s.bytes != row.Bytes || !near(s.sec, row.TimeSec) || s.ranks != row.RanksIn {
						t.Errorf("%s/%s/%d: per-rank rows sum to %d calls, %d bytes, %g s over %d ranks; the row says %d, %d, %g, %d",
							row.Coll, row.Backend, row.MinSize, s.calls, s.bytes, s.sec, s.ranks, row.Calls, row.Bytes, row.TimeSec, row.RanksIn)
					}
					if !(row.MinSec <= row.MeanSec*(1+1e-12) && row.MeanSec <= row.MaxSec*(1+1e-12)) {
						t.Errorf("%s/%s/%d: min %g, mean %g, max %g out of order", row.Coll, row.Backend, row.MinSize, row.MinSec, row.MeanSec, row.MaxSec)
					}
					if row.Slowest < 0 || row.Slowest >= tc.np {
						t.Errorf("%s/%s/%d: slowest rank %d of %d", row.Coll, row.Backend, row.MinSize, row.Slowest, tc.np)
					} else if got, ok := slowestTime[[2]any{k, row.Slowest}]; !ok || got != row.MaxSec || s.max != row.MaxSec {
						t.Errorf("%s/%s/%d: slowest rank %d took %g s, max %g, per-rank max %g", row.Coll, row.Backend, row.MinSize, row.Slowest, got, row.MaxSec, s.max)
					}
				}
			})
		}
	}
}

// At COLLMUX_LOG=info rank 0 alone says at MPI_Init what collmux found
// (its version, the MPI ABI and library, CUDA, where the rules came
// from); below info nothing. Every line names the rank: collmux sets up
// (reads its variables, loads the CUDA driver) inside MPI_Init once the
// MPI has initialised (internal/cmx/gostart.c says why), and learns the
// rank first; a misspelt variable's warning comes once, from rank 0.
func TestStartupLineAndRanks(t *testing.T) {
	version := projectVersion(t)
	lineRank := regexp.MustCompile(`^collmux\[rank (\d+)\]: `)
	for _, m := range impls(t) {
		prog := program(t, m, "errtest.c", "errtest")
		for _, tc := range []struct {
			log      string
			cuda     bool   // the CUDA stand-in on the library path
			rules    string // COLLMUX_RULES
			startups int    // start-up lines
			says     string // what the start-up line says of CUDA
			each     bool   // every rank writes lines after MPI_Init (decisions)
		}{
			{log: "warn"},
			{log: "info", startups: 1, says: "; CUDA driver not found: host buffers only, no NCCL or NVRTC;"},
			{log: "info", cuda: true, rules: "bcast:cuda:*:staged#bcast:cuda:1M-inf:mpi", startups: 1,
				says: fmt.Sprintf("; CUDA driver 13.0; NCCL and NVRTC loaded at first use; rules: %d default, 2 from COLLMUX_RULES;", len(dispatch.DefaultRules()))},
			{log: "decisions", startups: 1, says: "; CUDA driver not found: host buffers only, no NCCL or NVRTC;", each: true},
		} {
			name := m.name + "/" + tc.log
			if tc.cuda {
				name += "/cuda"
			}
			t.Run(name, func(t *testing.T) {
				const np = 2
				// statistics on: host calls then reach the dispatcher, which explains them at decisions
				env, statsFile := preloaded(t, "COLLMUX_LOG", tc.log, "COLLMUX_STATSS", "1")
				if tc.cuda {
					env["LD_LIBRARY_PATH"] = fakeCUDA(t)
				}
				if tc.rules != "" {
					env["COLLMUX_RULES"] = tc.rules
				}
				out, errs, err := run(t, m, np, env, prog)
				if err != nil || !strings.Contains(out, "sum=2") {
					t.Fatalf("err %v\n%s\n%s", err, out, errs)
				}
				startup := fmt.Sprintf("collmux[rank 0]: collmux %s on %d ranks; MPI ABI %s (/", version, np, m.name)
				var startups, warnings int
				ranks := map[string]bool{}
				for _, line := range strings.Split(errs, "\n") {
					if !strings.HasPrefix(line, "collmux") {
						continue
					}
					if strings.Contains(line, "MPI ABI") {
						startups++
						if !strings.HasPrefix(line, startup) || !strings.Contains(line, tc.says) ||
							!strings.Contains(line, "rules: ") || !strings.HasSuffix(line, "statistics to "+statsFile) {
							t.Errorf("start-up line %q: want it to begin %q, say %q and name the rules and statistics", line, startup, tc.says)
						}
					}
					if strings.Contains(line, "COLLMUX_STATSS is not a collmux variable") {
						warnings++
					}
					if mm := lineRank.FindStringSubmatch(line); mm != nil {
						ranks[mm[1]] = true
					} else {
						t.Errorf("a line names no rank: %q", line)
					}
				}
				if startups != tc.startups || warnings != 1 {
					t.Errorf("%d start-up lines, %d warnings; want %d and 1:\n%s", startups, warnings, tc.startups, errs)
				}
				if tc.each && len(ranks) != np {
					t.Errorf("lines name ranks %v, want all %d:\n%s", ranks, np, errs)
				}
			})
		}
	}
}

// A variable the program sets itself before MPI_Init is read: collmux
// reads its variables from C's environment in MPI_Init (capi/env.go).
func TestVariableSetBeforeInit(t *testing.T) {
	for _, m := range impls(t) {
		t.Run(m.name, func(t *testing.T) {
			prog := program(t, m, "setenvinit.c", "setenvinit")
			env := map[string]string{"LD_PRELOAD": libPath(t), "CUDA_VISIBLE_DEVICES": ""}
			out, errs, err := run(t, m, 2, env, prog)
			if err != nil || !strings.Contains(out, "sum=2") {
				t.Fatalf("err %v\n%s\n%s", err, out, errs)
			}
			if n := strings.Count(errs, "collmux[rank 0]: collmux "); n != 1 {
				t.Errorf("%d start-up lines, want the one COLLMUX_LOG=info set by the program asks for:\n%s", n, errs)
			}
		})
	}
}
