package dispatch

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"collmux/internal/units"
	"collmux/topo/nvlink"
)

// Rule sends the calls it matches to a backend. Coll and Mem of -1 match
// any; a call of Lo <= bytes <= Hi matches, if the communicator's shape and
// the datatype class satisfy Cond.
type Rule struct {
	Coll    Coll
	Mem     Mem
	Lo, Hi  uint64
	Backend Backend
	Cond    Cond
	Source  string // "default", a tuning file, or "COLLMUX_RULES"
	Text    string
}

// Shape is what a communicator looks like to rules: its ranks, the nodes
// they span, the most ranks any one node holds, and how far NVLink joins
// the GPUs of its nodes (the least of them).
type Shape struct {
	Ranks, Nodes, RanksPerNode int
	NVLink                     nvlink.Class
}

// DClass is the class of a call's datatype; values match CMX_DCLASS_*.
type DClass int

const (
	DInt   DClass = iota // C integer types
	DFloat               // floating point
	DOther               // the rest: bool, byte, pairs, derived types
	NumDClass
)

var dclassNames = [...]string{"int", "float", "other"}

func (d DClass) String() string { return enumString(d, dclassNames[:], "dclass") }

// Form is how a call completes, as rules tell calls apart: blocking, or
// nonblocking (MPI_I… calls and the starts of persistent ones, which run
// as nonblocking calls). Values match the first two CMX_FORM_*.
type Form int

const (
	Blocking Form = iota
	Nonblocking
	NumForm
)

var formNames = [...]string{"blocking", "nonblocking"}

func (f Form) String() string { return enumString(f, formNames[:], "form") }

// Overlap is whether a communicator's collectives run beside computation
// (COLLMUX_OVERLAP, or the communicator's collmux_overlap info key): there
// the paths that take the fewest SMs from the program's kernels are
// preferred. Rules tell the two apart with overlap=no|yes.
type Overlap int

const (
	Alone Overlap = iota
	Beside
	NumOverlap
)

var overlapNames = [...]string{"no", "yes"}

func (o Overlap) String() string { return enumString(o, overlapNames[:], "overlap") }

// Mode is what a call's route depends on besides its collective, memory,
// datatype class and size. The C route table has one plane per mode, in
// the order of Index.
type Mode struct {
	Form    Form
	Overlap Overlap
}

// NumMode is the number of route table planes.
const NumMode = int(NumForm) * int(NumOverlap)

// Index is m's plane in the C route table: overlap, then form.
func (m Mode) Index() int { return int(m.Overlap)*int(NumForm) + int(m.Form) }

// Modes lists every mode in the order of Index.
func Modes() []Mode {
	var ms []Mode
	for o := Overlap(0); o < NumOverlap; o++ {
		for f := Form(0); f < NumForm; f++ {
			ms = append(ms, Mode{f, o})
		}
	}
	return ms
}

// Cond restricts a rule to communicator shapes, datatype classes, call
// forms and overlap; the zero Cond matches everything.
type Cond struct {
	Ranks, Nodes, RanksPerNode [2]int // inclusive bounds; {0, 0} matches any
	DClasses                   uint8  // bit per DClass; 0 matches any
	NVLinks                    uint8  // bit per nvlink.Class; 0 matches any
	Forms                      uint8  // bit per Form; 0 matches any
	Overlaps                   uint8  // bit per Overlap; 0 matches any
}

// ShapeDependent reports whether the rule looks at communicator shape.
func (c Cond) ShapeDependent() bool {
	return c.Ranks != [2]int{} || c.Nodes != [2]int{} || c.RanksPerNode != [2]int{} || c.NVLinks != 0
}

func (c Cond) holds(s Shape) bool {
	in := func(b [2]int, v int) bool { return b == [2]int{} || (v >= b[0] && v <= b[1]) }
	return in(c.Ranks, s.Ranks) && in(c.Nodes, s.Nodes) && in(c.RanksPerNode, s.RanksPerNode) &&
		(c.NVLinks == 0 || c.NVLinks&(1<<s.NVLink) != 0)
}

func (c Cond) covers(d DClass) bool { return c.DClasses == 0 || c.DClasses&(1<<d) != 0 }

func (c Cond) allows(m Mode) bool {
	return (c.Forms == 0 || c.Forms&(1<<m.Form) != 0) && (c.Overlaps == 0 || c.Overlaps&(1<<m.Overlap) != 0)
}

// nameBits sets in *bits the bit of each comma-separated name of val, its
// index in names; what and want word the error for a name not among them.
func nameBits(bits *uint8, val string, names []string, what, want string) error {
	for _, name := range strings.Split(val, ",") {
		i, ok := enumParse[int](name, names)
		if !ok {
			return fmt.Errorf("unknown %s %q (want %s)", what, name, want)
		}
		*bits |= 1 << i
	}
	return nil
}

// parseCond reads one key=value condition of a rule.
func parseCond(c *Cond, f string) error {
	key, val, ok := strings.Cut(f, "=")
	if !ok {
		return fmt.Errorf("bad condition %q (want key=value: ranks, nodes, rpn, nvlink, dtype, form or overlap)", f)
	}
	var bound *[2]int
	switch key {
	case "ranks":
		bound = &c.Ranks
	case "nodes":
		bound = &c.Nodes
	case "rpn":
		bound = &c.RanksPerNode
	case "dtype":
		return nameBits(&c.DClasses, val, dclassNames[:], "datatype class", "int, float or other")
	case "form":
		return nameBits(&c.Forms, val, formNames[:], "form", "blocking or nonblocking")
	case "overlap":
		return nameBits(&c.Overlaps, val, overlapNames[:], "overlap", "no or yes")
	case "nvlink":
		return nameBits(&c.NVLinks, val, nvlink.ClassNames[:], "NVLink class", "none, partial or full")
	default:
		return fmt.Errorf("unknown condition %q (want ranks, nodes, rpn, nvlink, dtype, form or overlap)", key)
	}
	lo, hi, isRange := strings.Cut(val, "-")
	if !isRange {
		hi = lo
	}
	a, err1 := strconv.Atoi(lo)
	b, err2 := strconv.Atoi(hi)
	if err1 != nil || err2 != nil || a < 1 || b < a {
		return fmt.Errorf("bad %s range %q", key, val)
	}
	*bound = [2]int{a, b}
	return nil
}

func (r Rule) String() string { return fmt.Sprintf("%q from %s", r.Text, r.Source) }

// DefaultRules are the built-in policy: host buffers stay on MPI, device
// buffers go to NCCL (which falls back to staged for what it cannot
// express), managed memory stays on MPI (host-accessible), mixed
// host/device arguments are staged. Device all-reduce, all-gather,
// all-to-all and bcast up to the fused kernels' 8 MiB workspace take them
// (faster than NCCL at every size up to there with the resident kernel on
// 2 x H200: docs/results/gpu-2026-11-29-resident); they fall back to NCCL
// where they cannot run. Beside computation (overlap=yes), the
// collectives that only move data go to the copy engines, which take no
// SM; the fused kernels run there on few blocks and do not linger.
func DefaultRules() []Rule {
	rules, err := ParseRules("*:host:*:mpi#*:cuda:*:nccl#*:managed:*:mpi#*:mixed:*:staged#"+
		"allreduce:cuda:0-8M:fused#allgather:cuda:0-8M:fused#alltoall:cuda:0-8M:fused#bcast:cuda:0-8M:fused#"+
		"allgather:cuda:*:copy:overlap=yes#allgatherv:cuda:*:copy:overlap=yes#alltoall:cuda:*:copy:overlap=yes#"+
		"bcast:cuda:*:copy:overlap=yes#gather:cuda:*:copy:overlap=yes#scatter:cuda:*:copy:overlap=yes", "default")
	if err != nil {
		panic(err)
	}
	return rules
}

// ParseRules reads rules in the compact syntax
//
//	coll:mem:range:backend[:cond...][#coll:mem:range:backend...]
//
// coll is a collective name or *, mem is host, cuda, managed, mixed or *,
// range is lo-hi in bytes with K/M/G suffixes (hi may be inf) or *. The
// optional conditions are ranks=N[-M], nodes=N[-M], rpn=N[-M] (ranks per
// node), nvlink=none|partial|full[,...] (how far NVLink joins the GPUs of
// every node the communicator spans), dtype=int|float|other[,...] and
// form=blocking|nonblocking and overlap=no|yes. Any bad token makes the whole string fail,
// naming the token and source.
func ParseRules(s, source string) ([]Rule, error) {
	var rules []Rule
	for _, tok := range strings.Split(s, "#") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		r, err := parseRule(tok)
		if err != nil {
			return nil, fmt.Errorf("%s: rule %q: %v", source, tok, err)
		}
		r.Source, r.Text = source, tok
		rules = append(rules, r)
	}
	return rules, nil
}

func parseRule(tok string) (Rule, error) {
	f := strings.Split(tok, ":")
	if len(f) < 4 {
		return Rule{}, fmt.Errorf("want coll:mem:range:backend[:cond...], got %d fields", len(f))
	}
	r := Rule{Coll: -1, Mem: -1, Hi: math.MaxUint64}
	for _, c := range f[4:] {
		if err := parseCond(&r.Cond, c); err != nil {
			return r, err
		}
	}
	if f[0] != "*" {
		c, ok := ParseColl(strings.ToLower(f[0]))
		if !ok {
			return r, fmt.Errorf("unknown collective %q", f[0])
		}
		if !c.Collective() {
			return r, fmt.Errorf("%s is not a collective: rules route collectives (point-to-point calls on device memory are staged; MPI_Reduce_local runs on collmux's kernel where it gives the MPI's answer, else staged)", f[0])
		}
		r.Coll = c
	}
	if f[1] != "*" {
		m, ok := enumParse[Mem](f[1], memNames[:])
		if !ok {
			return r, fmt.Errorf("unknown memory kind %q (want host, cuda, managed, mixed or *)", f[1])
		}
		r.Mem = m
	}
	if f[2] != "*" {
		lo, hi, ok := strings.Cut(f[2], "-")
		if !ok {
			return r, fmt.Errorf("bad range %q (want lo-hi)", f[2])
		}
		var err error
		if r.Lo, err = units.Parse(lo); err != nil {
			return r, err
		}
		if hi != "inf" {
			if r.Hi, err = units.Parse(hi); err != nil {
				return r, err
			}
		}
		if r.Lo > r.Hi {
			return r, fmt.Errorf("empty range %q", f[2])
		}
	}
	b, ok := ParseBackend(strings.ToLower(f[3]))
	if !ok {
		return r, fmt.Errorf("unknown backend %q (want mpi, nccl, fused, staged or copy)", f[3])
	}
	r.Backend = b
	return r, nil
}

// Route is one size range of a compiled (collective, memory) cell.
type Route struct {
	Lo, Hi  uint64
	Backend Backend
	Rule    int // index into the rule list
}

// Routes is the rule list compiled for one communicator shape: for each
// collective, memory kind and datatype class, disjoint size ranges
// covering every size, in order.
type Routes [NumColl][NumMem][NumDClass][]Route

// ShapeDependent reports whether any rule looks at communicator shape, so
// that routes must be compiled per communicator.
func ShapeDependent(rules []Rule) bool {
	for _, r := range rules {
		if r.Cond.ShapeDependent() {
			return true
		}
	}
	return false
}

// Compile turns an ordered rule list (later rules win) into Routes for
// blocking calls on communicators of the given shape, not in overlap mode.
func Compile(rules []Rule, shape Shape) Routes { return CompileMode(rules, shape, Mode{}) }

// CompileMode is Compile for calls of mode m.
func CompileMode(rules []Rule, shape Shape, m Mode) Routes {
	var rt Routes
	for c := Coll(0); c < NumColl; c++ {
		for mem := Mem(0); mem < NumMem; mem++ {
			for d := DClass(0); d < NumDClass; d++ {
				rt[c][mem][d] = compileCell(rules, shape, c, mem, d, m)
			}
		}
	}
	return rt
}

func compileCell(rules []Rule, shape Shape, c Coll, m Mem, d DClass, mode Mode) []Route {
	// cut points: every rule boundary; each elementary interval takes the
	// last matching rule.
	cuts := map[uint64]bool{0: true}
	var match []int
	for i, r := range rules {
		if (r.Coll == -1 || r.Coll == c) && (r.Mem == -1 || r.Mem == m) && r.Cond.holds(shape) && r.Cond.covers(d) && r.Cond.allows(mode) {
			match = append(match, i)
			cuts[r.Lo] = true
			if r.Hi != math.MaxUint64 {
				cuts[r.Hi+1] = true
			}
		}
	}
	starts := make([]uint64, 0, len(cuts))
	for k := range cuts {
		starts = append(starts, k)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	var out []Route
	for i, lo := range starts {
		hi := uint64(math.MaxUint64)
		if i+1 < len(starts) {
			hi = starts[i+1] - 1
		}
		rt := Route{lo, hi, MPI, -1}
		for _, j := range match {
			if rules[j].Lo <= lo && hi <= rules[j].Hi {
				rt.Backend, rt.Rule = rules[j].Backend, j
			}
		}
		if n := len(out); n > 0 && out[n-1].Backend == rt.Backend && out[n-1].Rule == rt.Rule {
			out[n-1].Hi = hi
			continue
		}
		out = append(out, rt)
	}
	return out
}

// Pick finds the route of a call.
func (rt *Routes) Pick(c Coll, m Mem, d DClass, bytes uint64) Route {
	for _, r := range rt[c][m][d] {
		if bytes >= r.Lo && bytes <= r.Hi {
			return r
		}
	}
	return Route{Backend: MPI, Rule: -1}
}
