//go:build collmux_lib

// Command capi is libcollmux.so: built with -buildmode=c-shared, preloaded
// into (or linked with) an MPI program. Its exported MPI_* entry points are
// C (generated from collectives.tab into zwrappers.c); Go is entered only
// to set up (configuration, policy), never on a call that stays on MPI.
package main

/*
#cgo CFLAGS: -O2 -fvisibility=hidden -Wall -Wno-unused-function -I${SRCDIR}/../internal/cmx -I${SRCDIR}/../include
#cgo LDFLAGS: -ldl -lpthread
#include <stdlib.h>
#include "cmx.h"
#include "collmux.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	_ "collmux/copy"
	_ "collmux/cuda" // the C of the library's components, linked in
	"collmux/dispatch"
	"collmux/fused"
	_ "collmux/gate"
	_ "collmux/internal/cmx"
	"collmux/internal/units"
	"collmux/mpi"
	_ "collmux/nccl"
	_ "collmux/staged"
	"collmux/stats"
	"collmux/topo/nvlink"
	"collmux/trace"
	"collmux/tune"
)

//go:generate go run ../internal/genwrap -root ..

func init() {
	// The Go runtime shares cores with MPI ranks that busy-poll; it only
	// ever runs set-up work, so it gets few threads unless told otherwise.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(2)
	}
	fused.Warn = func(msg string) { logf("warning: %s", msg) }
	// The thread that runs collmux's start-up and its C's calls into Go
	// (internal/cmx/aside.c says why): a goroutine that enters C and stays
	// there. Started last, here: what it runs calls into every package,
	// and a call into Go from a Go thread does not wait, as one from a
	// foreign thread does, for the packages to be initialised (this is
	// package main's only init, so every other has run).
	go func() { C.cmx_aside_serve() }()
}

var (
	config dispatch.Config
	abi    mpi.ABI
)

//export collmux_go_init
func collmux_go_init(cfg *C.cmx_config, abiC C.int, table *C.cmx_routes) {
	abi = mpi.ABI(abiC)
	dispatch.GPUKey = systemGPUKey
	c, err := dispatch.LoadConfig(getenv)
	if err != nil {
		fatalf("%v", err)
	}
	config = c
	cfg.stats = boolC(c.Stats != dispatch.StatsOff)
	cfg.trace = boolC(c.Trace != "")
	cfg.log = C.int(c.Log)
	cfg.check = boolC(c.Check)
	cfg.timeout = C.int(c.Timeout)
	cfg.linger_us = C.int(c.LingerUS)
	cfg.overlap = boolC(c.Overlap)
	cfg.order_default_stream = boolC(!c.Unordered)
	cfg.fused_algo = map[dispatch.FusedAlgo]C.int{
		dispatch.AlgoAuto: C.CMX_ALGO_AUTO, dispatch.AlgoOneShot: C.CMX_ALGO_ONESHOT, dispatch.AlgoTwoShot: C.CMX_ALGO_TWOSHOT,
	}[c.FusedAlgo]
	cfg.ops_algo = C.int(c.OpsAlgo)
	for i, r := range c.Ops { // at most dispatch.MaxOpsRanges, which is CMX_OPS_TUNED (below)
		t := &cfg.ops_tuned[i]
		t.ranks, t.batch_lo, t.batch_hi = C.int(r.Ranks), C.int(r.BatchLo), C.int(r.BatchHi)
		t.form = C.int(1 + slices.Index(tune.OpsForms, r.Form))
		t.lo, t.hi = C.uint64_t(r.Lo), C.uint64_t(r.Hi)
	}
	cfg.ops_tuned_n, cfg.ops_tuned_hash = C.int(len(c.Ops)), C.uint32_t(c.OpsHash())
	for _, w := range c.Warnings {
		logf("warning: %s", w)
	}
	if firstRank() { // a misspelt variable is the same on every rank: say it once
		for _, w := range dispatch.UnknownVars(environ()) {
			logf("warning: %s", w)
		}
	}
	cfg.topo_nodes = C.int(c.TopoNodes)
	cString("COLLMUX_NCCL_LIB", c.NCCLLib, cfg.nccl_lib[:])
	cString("COLLMUX_NVRTC_LIB", c.NVRTCLib, cfg.nvrtc_lib[:])
	applyRules(c.Rules, cfg, table)
}

// cString copies variable name's value s into the C array dst, NUL-terminated.
func cString(name, s string, dst []C.char) {
	if len(s) >= len(dst) {
		fatalf("%s is longer than %d bytes", name, len(dst)-1)
	}
	for i := 0; i < len(s); i++ {
		dst[i] = C.char(s[i])
	}
}

// Rules in force can change (collmux_set_rules), but statistics and the
// decision log name rules by index long after: every rule list applied is
// appended to ruleLog, and C tables carry indices into it.
var (
	ruleLog    []dispatch.Rule
	activeFrom int // where config.Rules starts in ruleLog
	pending    []dispatch.Rule
)

func logged(i int) string {
	if i >= 0 && i < len(ruleLog) {
		return ruleLog[i].String()
	}
	return ""
}

// This fails to compile unless the library's table of the fused
// operations' forms (CMX_OPS_TUNED) holds exactly what dispatch lets a
// tuning table have.
var _ = [1]struct{}{}[C.CMX_OPS_TUNED-dispatch.MaxOpsRanges]

// applyRules makes rules the rule list in force: the global route table,
// the per-shape tables (compiled again on demand), the hash ranks compare.
func applyRules(rules []dispatch.Rule, cfg *C.cmx_config, table *C.cmx_routes) {
	shapeMu.Lock()
	defer shapeMu.Unlock()
	activeFrom = len(ruleLog)
	ruleLog = append(ruleLog, rules...)
	config.Rules = rules
	shapeTables = map[dispatch.Shape]*C.cmx_routes{} // older tables stay valid for comms still holding them
	cfg.rules_hash = C.uint32_t(dispatch.RulesHash(rules))
	cfg.shape_rules = boolC(dispatch.ShapeDependent(rules))
	cfg.nvlink_rules = boolC(slices.ContainsFunc(rules, func(r dispatch.Rule) bool { return r.Cond.NVLinks != 0 }))
	fillRoutes(table, rules, dispatch.Shape{})
}

// collmux_go_stage_rules parses the rules given to collmux_set_rules and
// keeps them, with the defaults and tuning table in front, until every
// rank has agreed; it returns 0 and the staged set's hash, or -1.
//
// firstRank reports whether the launcher says this process is rank 0 of
// the job (or says nothing): start-up runs before MPI can tell.
func firstRank() bool {
	for _, v := range []string{"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"} {
		if r := getenv(v); r != "" {
			return r == "0"
		}
	}
	return true
}

//export collmux_go_stage_rules
func collmux_go_stage_rules(s *C.char, hash *C.uint32_t) C.int {
	user, err := dispatch.ParseRules(C.GoString(s), "collmux_set_rules")
	if err != nil {
		logf("collmux_set_rules: %v", err)
		return -1
	}
	pending = append(append([]dispatch.Rule(nil), config.Rules[:config.UserFrom]...), user...)
	*hash = C.uint32_t(dispatch.RulesHash(pending))
	return 0
}

// collmux_go_commit_rules applies the staged rules (commit != 0) or drops them.
//
//export collmux_go_commit_rules
func collmux_go_commit_rules(commit C.int, cfg *C.cmx_config, table *C.cmx_routes) {
	if commit != 0 && pending != nil {
		applyRules(pending, cfg, table)
	}
	pending = nil
}

// The C route table has the dimensions of Go's: each array's length is
// negative, and the build fails, if one is larger than the other.
const (
	routeCells = uintptr(dispatch.NumMode) * uintptr(dispatch.NumColl) * uintptr(dispatch.NumMem) * uintptr(dispatch.NumDClass)
	cTable     = unsafe.Sizeof(C.cmx_route_table_t{})
	goTable    = routeCells * unsafe.Sizeof(C.cmx_routes{})
)

var (
	_ [cTable - goTable]struct{}
	_ [goTable - cTable]struct{}
)

// fillRoutes compiles the rules for a shape into a C route table
// (cmx_route_table_t: [mode][coll][mem][dclass]).
func fillRoutes(table *C.cmx_routes, rules []dispatch.Rule, shape dispatch.Shape) {
	per := int(dispatch.NumColl) * int(dispatch.NumMem) * int(dispatch.NumDClass)
	cells := unsafe.Slice(table, dispatch.NumMode*per)
	for _, mode := range dispatch.Modes() {
		plane := mode.Index()
		rt := dispatch.CompileMode(rules, shape, mode)
		for co := dispatch.Coll(0); co < dispatch.NumColl; co++ {
			for m := dispatch.Mem(0); m < dispatch.NumMem; m++ {
				for d := dispatch.DClass(0); d < dispatch.NumDClass; d++ {
					cell := &cells[plane*per+(int(co)*int(dispatch.NumMem)+int(m))*int(dispatch.NumDClass)+int(d)]
					rs := rt[co][m][d]
					if len(rs) > len(cell.r) {
						fatalf("the rules split %v on %v memory into %d size ranges; at most %d are supported", co, m, len(rs), len(cell.r))
					}
					cell.n = C.int32_t(len(rs))
					for i, r := range rs {
						rule := -1
						if r.Rule >= 0 {
							rule = activeFrom + r.Rule
						}
						cell.r[i] = C.cmx_route{lo: C.uint64_t(r.Lo), hi: C.uint64_t(r.Hi), backend: C.int32_t(r.Backend), rule: C.int32_t(rule)}
					}
				}
			}
		}
	}
}

var (
	shapeMu     sync.Mutex
	shapeTables = map[dispatch.Shape]*C.cmx_routes{}
)

// collmux_go_routes_for compiles the rules for one communicator shape,
// once per distinct shape; the tables live as long as the process.
//
//export collmux_go_routes_for
func collmux_go_routes_for(ranks, nodes, rpn, nvl C.int) *C.cmx_routes {
	shape := dispatch.Shape{Ranks: int(ranks), Nodes: int(nodes), RanksPerNode: int(rpn), NVLink: nvlink.Class(nvl)}
	shapeMu.Lock()
	defer shapeMu.Unlock()
	if t, ok := shapeTables[shape]; ok {
		return t
	}
	t := (*C.cmx_routes)(C.calloc(1, C.size_t(unsafe.Sizeof(C.cmx_route_table_t{}))))
	fillRoutes(t, config.Rules, shape)
	shapeTables[shape] = t
	return t
}

// served is the image collmux_go_fused_module gave C last, and where it
// came from, so that one the driver refuses can be set aside.
var served struct {
	img      []byte
	aot      bool   // from the ahead-of-time folder
	dir, key string // in the cache (dir != "")
	fresh    bool   // compiled just now: compiling again gives the same
}

// skipAOT is set once the driver has refused the ahead-of-time image.
var skipAOT bool

// collmux_go_fused_module gives C the compiled fused kernels for this GPU:
// the ahead-of-time image beside the library (lib, its path as dladdr
// gives it), or from the cache, or compiled now with NVRTC; the image is
// malloc'd.
//
//export collmux_go_fused_module
func collmux_go_fused_module(arch, driver C.int, lib *C.char, image **C.char, size *C.size_t) C.int {
	served.img, served.aot, served.dir, served.key, served.fresh = nil, false, "", "", false
	if dir := fused.AOTDirFor(C.GoString(lib), loadDir()); dir != "" && !skipAOT {
		if img, path := fused.LoadAOT([]string{dir}, int(arch)); img != nil {
			if config.Log >= dispatch.LogInfo {
				logf("fused kernels from %s (compiled ahead of time)", path)
			}
			served.img, served.aot = img, true
			*image = (*C.char)(C.CBytes(img))
			*size = C.size_t(len(img))
			return 1
		}
	}
	var took time.Duration
	dir, key := fused.CacheDir(getenv), fused.CacheKey(int(arch), int(driver))
	img, how, err := fused.Load(dir, key, func() ([]byte, error) {
		src := C.CString(fused.Source)
		defer C.free(unsafe.Pointer(src))
		var cubin, log *C.char
		var n C.size_t
		t0 := time.Now()
		ok := C.cmx_nvrtc_compile(src, arch, &cubin, &n, &log)
		defer C.free(unsafe.Pointer(cubin))
		defer C.free(unsafe.Pointer(log))
		if ok == 0 {
			msg := "NVRTC not found"
			if log != nil {
				msg = C.GoString(log)
			}
			return nil, fmt.Errorf("compiling the fused kernels for sm_%d: %s", int(arch), msg)
		}
		took = time.Since(t0)
		return C.GoBytes(unsafe.Pointer(cubin), C.int(n)), nil
	})
	if err != nil {
		if config.Log >= dispatch.LogInfo {
			logf("%v", err)
		}
		return 0
	}
	if config.Log >= dispatch.LogInfo && how != fused.FromCache {
		// only an image actually written is claimed to be cached
		where := "cached in " + dir + " for next time"
		if how == fused.Private {
			where = "not cached"
		}
		logf("fused kernels compiled by NVRTC for sm_%d in %.1f s (%s)", int(arch), took.Seconds(), where)
	}
	served.img, served.fresh = img, how != fused.FromCache
	if how != fused.Private {
		served.dir, served.key = dir, key
	}
	*image = (*C.char)(C.CBytes(img))
	*size = C.size_t(len(img))
	return 1
}

// collmux_go_fused_rejected is told that the driver refused the image
// collmux_go_fused_module gave last: a cached one is deleted, so that no
// later process loads it, and the ahead-of-time one passed over. It
// returns 1 where asking collmux_go_fused_module again gives another
// image (compiled anew), 0 where it would give the same.
//
//export collmux_go_fused_rejected
func collmux_go_fused_rejected() C.int {
	switch {
	case served.aot:
		logf("warning: the driver refused the fused kernels compiled ahead of time; compiling them")
		skipAOT = true
		return 1
	case served.dir != "":
		fused.Reject(served.dir, served.key, served.img)
		if !served.fresh {
			logf("warning: the driver refused the cached fused kernels; deleted, compiling them again")
			return 1
		}
	}
	return 0
}

//export collmux_go_explain
func collmux_go_explain(coll, mem C.int, bytes C.uint64_t, used, rule, wanted C.int) {
	why := "no rule"
	if r := logged(int(rule)); r != "" {
		why = "rule " + r
	}
	if used != wanted {
		why += fmt.Sprintf("; %v declined the call", dispatch.Backend(wanted))
	}
	size := "any size"
	if uint64(bytes) != ^uint64(0) {
		size = units.Bytes(uint64(bytes)) + " B"
	}
	logf("%v on %v memory, %s -> %v (%s)", dispatch.Coll(coll), dispatch.Mem(mem), size, dispatch.Backend(used), why)
}

// collmux_go_report writes the statistics on rank 0: counters and rules
// are the sums over ranks (cmx_stats' layout), perRank what each rank sent:
// its host name (CMX_HOSTLEN bytes), then {calls, bytes, ns} of each of
// the cells that saw calls on any rank, in the order of the sums.
//
//export collmux_go_report
func collmux_go_report(counters *C.uint64_t, rules *C.int32_t, ranks C.int, perRank *C.uint64_t, cells C.int) {
	n := int(C.CMX_NCOLL) * int(C.CMX_NBACKEND) * int(C.CMX_NBUCKET)
	raw := unsafe.Slice((*uint64)(unsafe.Pointer(counters)), n*4)
	ruleOf := unsafe.Slice((*int32)(unsafe.Pointer(rules)), n)
	r := stats.FromCounters(raw, int(C.CMX_NBUCKET), int(ranks), abi.String(), func(cell int) string {
		return logged(int(ruleOf[cell]) - 1)
	})
	r.Version = C.GoString(C.collmux_version())
	hostWords := int(C.CMX_HOSTLEN) / 8
	per := unsafe.Slice((*uint64)(unsafe.Pointer(perRank)), int(ranks)*(hostWords+3*int(cells)))
	if err := r.AddRanks(per, hostWords); err != nil {
		logf("statistics: %v", err)
	}
	if err := r.Write(config.Stats == dispatch.StatsJSON, config.StatsPath); err != nil {
		logf("statistics: %v", err)
	}
}

// collmux_go_trace writes this rank's timeline (COLLMUX_TRACE) at
// finalize: n events of the buffer ev, their times made relative to
// epoch, the CLOCK_MONOTONIC reading of the instant every rank shares.
//
//export collmux_go_trace
func collmux_go_trace(ev *C.cmx_trace_ev, n, dropped C.uint64_t, rank, ranks C.int, host *C.char, epochReal C.int64_t, epoch C.uint64_t) {
	forms := [...]string{"blocking", "nonblocking", "persistent"}
	name := func(names []string, i int) string {
		if i >= 0 && i < len(names) {
			return names[i]
		}
		return strconv.Itoa(i)
	}
	evs := unsafe.Slice(ev, int(n))
	calls := make([]trace.Call, len(evs))
	fnNames := unsafe.Slice(&C.cmx_fn_names[0], int(C.CMX_NFN))
	for i, e := range evs {
		c := &calls[i]
		if fn := int(e.fn); fn >= 0 && fn < len(fnNames) {
			c.Name = C.GoString(fnNames[fn])
		}
		c.Family = dispatch.Coll(e.coll).String()
		c.StartNS, c.DurNS = uint64(e.t0)-uint64(epoch), uint64(e.dur)
		if uint64(e.t0) < uint64(epoch) {
			c.StartNS = 0
		}
		c.TID, c.RC, c.Bytes = int(e.tid), int(e.rc), uint64(e.bytes)
		c.Backend, c.Mem = dispatch.Backend(e.backend).String(), dispatch.Mem(e.mem).String()
		c.Form = name(forms[:], int(e.form))
	}
	m := trace.Meta{Tool: "collmux", Version: C.GoString(C.collmux_version()), Rank: int(rank), Ranks: int(ranks),
		Host: C.GoString(host), Clock: trace.Clock, EpochUTC: int64(epochReal), Dropped: uint64(dropped)}
	path := fmt.Sprintf("%s.%d.json", config.Trace, int(rank))
	if err := trace.WriteFile(path, m, calls); err != nil {
		logf("trace: %v", err)
	}
	if dropped > 0 {
		logf("trace: the buffer held %d calls: %d later ones are not in %s", int(n), uint64(dropped), path)
	}
}

// collmux_go_started says, on rank 0 at COLLMUX_LOG=info, what collmux
// found at MPI_Init. It loads nothing: NCCL and NVRTC are looked for at
// first use.
//
//export collmux_go_started
func collmux_go_started(ranks C.int) {
	lib := "library not found"
	if C.cmx_abi.lib != nil {
		lib = C.GoString(C.cmx_abi.lib)
	}
	gpu := "CUDA driver not found: host buffers only, no NCCL or NVRTC"
	if C.cmx_cuda_present != 0 {
		v := int(C.cmx_cuda_driver_version())
		gpu = fmt.Sprintf("CUDA driver %d.%d; NCCL and NVRTC loaded at first use", v/1000, v%1000/10)
		if config.NCCLLib != "" {
			gpu += " (NCCL: " + config.NCCLLib + ")"
		}
	}
	out := "statistics off"
	switch {
	case config.Stats != dispatch.StatsOff && config.StatsPath == "":
		out = "statistics to stderr"
	case config.Stats != dispatch.StatsOff:
		out = "statistics to " + config.StatsPath
	}
	if config.Trace != "" {
		out += "; timelines to " + config.Trace + ".<rank>.json"
	}
	if C.cmx_nvtx_on != 0 {
		out += "; NVTX ranges to " + getenv("NVTX_INJECTION64_PATH")
	}
	logf("collmux %s on %d ranks; MPI ABI %v (%s); %s; rules: %s; %s",
		C.GoString(C.collmux_version()), int(ranks), abi, lib, gpu, config.RulesOrigin(), out)
}

// logf writes one line of collmux's to stderr, led by the rank once MPI is
// initialised (the C side's cmx_log does the same) and the pid before.
func logf(format string, args ...any) {
	tag := fmt.Sprint(os.Getpid())
	if r := int(C.cmx_log_rank()); r >= 0 {
		tag = fmt.Sprintf("rank %d", r)
	}
	fmt.Fprintf(os.Stderr, "collmux[%s]: %s\n", tag, fmt.Sprintf(format, args...))
}

func boolC(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// fatalf stops the job on a configuration error, as C's cmx_config_error
// does (through MPI_Abort once MPI is up); it does not return.
func fatalf(format string, args ...any) {
	C.cmx_go_fatal(C.CString(fmt.Sprintf(format, args...)))
}

func main() {}
