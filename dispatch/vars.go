// SPDX-License-Identifier: Apache-2.0

package dispatch

import (
	"slices"
	"strconv"
	"strings"
)

// Var is one COLLMUX_* environment variable. Vars is the one list of them:
// LoadConfig takes choices and defaults from it, `collmux info` prints it
// and checks the environment against it, README's Variables table lists
// each (TestVarsMatchREADME keeps the two in step) and docs/usage.md,
// "Variables in full", explains each at length.
type Var struct {
	Name    string
	Default string   // what unset means, as `collmux info` shows it ("" where it is nothing, or said in Help)
	Values  []string // the choices, for a variable that takes one of a few words (the first is Default)
	Help    string   // one line
	Library bool     // read by the library; the others are read by the collmux tool and the tests
}

// DefaultTimeout is COLLMUX_TIMEOUT's default, in seconds: how long a
// device collective waits for its peers. Under MPI alone a rank waits
// forever, so the limit only turns a hang into an error; it must outlast
// the longest a healthy rank keeps its peers waiting, such as writing a
// checkpoint between two collectives (PyTorch's 10-minute NCCL default is
// often raised for that), and still free a job whose rank died within the
// half hour.
const DefaultTimeout = 1800

// Vars are collmux's variables, in README's order. Some are read in C
// (capi/init.c, capi/nvrtc.c) before Go is entered; they are here too, so
// that the list is whole.
var Vars = []Var{
	{Name: "COLLMUX_DISABLE", Default: "0", Library: true,
		Help: "1: pure forwarder, every call goes straight to MPI and nothing else is read"},
	{Name: "COLLMUX_STATS", Default: "0", Library: true,
		Help: "1: a statistics table at MPI_Finalize on stderr; file.json: as JSON; another path: the table to that file"},
	{Name: "COLLMUX_TRACE", Library: true,
		Help: "path: each rank writes a timeline of its routed calls to path.<rank>.json at MPI_Finalize (Perfetto; `collmux trace merge` joins them)"},
	choice("COLLMUX_LOG", "what collmux writes to stderr: warn, info, decisions (each distinct routing decision once) or debug",
		"warn", "info", "decisions", "debug"),
	{Name: "COLLMUX_RULES", Library: true,
		Help: "routing rules after the defaults and the tuning table, later ones winning: coll:mem:range:backend[:cond...]#..."},
	{Name: "COLLMUX_CHECK", Default: "0", Library: true,
		Help: "1: verify on every call that all ranks agree on memory kind, root, op and size (one allgather a call)"},
	{Name: "COLLMUX_TIMEOUT", Default: strconv.Itoa(DefaultTimeout), Library: true,
		Help: "seconds a device collective waits for its peers before failing"},
	{Name: "COLLMUX_OVERLAP", Default: "0", Library: true,
		Help: "1: every communicator's device collectives run beside computation (as the collmux_overlap info key says for one): paths that take the fewest SMs"},
	{Name: "COLLMUX_FUSED_LINGER", Default: strconv.Itoa(DefaultLingerUS), Library: true,
		Help: "idle microseconds before the resident fused kernel stops (0: after every call)"},
	choice("COLLMUX_FUSED_ALGO", "how the fused kernels all-reduce: auto (LL up to 256 KiB, then by ranks), oneshot or twoshot",
		"auto", "oneshot", "twoshot"),
	choice("COLLMUX_OPS_ALGO", "how the fused operations (collmux.h) compute: auto (as measured fastest per shape), fused (one kernel), cublas (cuBLAS, then collmux's sum kernel) or nccl (cuBLAS, then NCCL)",
		"auto", "fused", "cublas", "nccl"),
	choice("COLLMUX_STREAM_ORDER", "default: device calls wait for the legacy default stream; none: buffers are ready when a call is made",
		"default", "none"),
	{Name: "COLLMUX_NCCL_LIB", Default: "libnccl.so.2", Library: true,
		Help: "the NCCL library to load"},
	{Name: "COLLMUX_NVRTC_LIB", Library: true,
		Help: "the NVRTC library to load (unset: libnvrtc.so.13, .12, then CUDA's usual directories)"},
	{Name: "COLLMUX_TUNING", Library: true,
		Help: "the tuning table to apply (unset: the one installed for this machine's GPU key in the user's folder, else in COLLMUX_TUNING_DIR's, if any)"},
	{Name: "COLLMUX_TUNING_DIR", Default: DefaultSystemTuningDir, Library: true,
		Help: "the site's folder of tuning tables (absolute), searched after the user's; a table there another user could write is skipped"},
	{Name: "COLLMUX_TOPO_OVERRIDE", Library: true,
		Help: "tests: pretend each communicator's ranks sit on N nodes (turns the fused path off)"},
	{Name: "COLLMUX_LIB",
		Help: "the library `collmux version` and the tests look at (set by the modulefile; LD_PRELOAD it per launch)"},
	{Name: "COLLMUX_WORLD",
		Help: "tests: the folder of the Debian 13 MPI world scripts/mpi-world.sh builds and `make test-world` runs in (default /var/cache/collmux-trixie)"},
	{Name: "COLLMUX_ABI_WORLD",
		Help: "tests: the folder of the MPI-5 ABI world scripts/mpi-world.sh --abi builds and `make test-world` runs in (default /var/cache/collmux-sid-abi)"},
}

// choice is a library variable that takes one of values, the first by default.
func choice(name, help string, values ...string) Var {
	return Var{Name: name, Default: values[0], Values: values, Help: help, Library: true}
}

// LookupVar returns the variable called name; it panics on a name not in
// Vars, since every caller names one in the code.
func LookupVar(name string) Var {
	if i := slices.IndexFunc(Vars, func(v Var) bool { return v.Name == name }); i >= 0 {
		return Vars[i]
	}
	panic("dispatch: " + name + " is not in Vars")
}

// UnknownVars warns about each COLLMUX_* variable in environ (KEY=value
// entries, as os.Environ gives them) that collmux does not read: a typo
// there silently leaves the setting at its default. The warning names the
// closest known variable where one is close enough to be the likely intent.
func UnknownVars(environ []string) []string {
	var warns []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "COLLMUX_") || slices.ContainsFunc(Vars, func(v Var) bool { return v.Name == name }) {
			continue
		}
		w := name + " is not a collmux variable"
		if near := closestVar(name); near != "" {
			w += "; did you mean " + near + "?"
		}
		warns = append(warns, w)
	}
	return warns
}

// closestVar is the known variable nearest to name by edit distance
// (ignoring case, so that COLLMUX_log finds COLLMUX_LOG), or "" if even
// that one differs in more than a third of the characters after COLLMUX_
// (of the longer of the two, so that COLLMUX_NCCL_LIBRARY finds
// COLLMUX_NCCL_LIB): COLLMUX_DEBUG is then nobody's typo.
func closestVar(name string) string {
	best, bestD := "", 0
	for _, v := range Vars {
		if d := editDistance(strings.ToUpper(name), v.Name); best == "" || d < bestD {
			best, bestD = v.Name, d
		}
	}
	if bestD > max(1, (max(len(name), len(best))-len("COLLMUX_"))/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance: the fewest insertions,
// deletions and substitutions of single bytes that turn a into b.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
