package dispatch

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"collmux/internal/units"
)

// Rule sends the calls it matches to a backend. Coll and Mem of -1 match
// any; a call of Lo <= bytes <= Hi matches.
type Rule struct {
	Coll    Coll
	Mem     Mem
	Lo, Hi  uint64
	Backend Backend
	Source  string // "default", a tuning file, or "COLLMUX_RULES"
	Text    string
}

func (r Rule) String() string { return fmt.Sprintf("%q from %s", r.Text, r.Source) }

// DefaultRules are the built-in policy: host buffers stay on MPI, device
// buffers go to NCCL (which falls back to staged for what it cannot
// express), managed memory stays on MPI (host-accessible), mixed
// host/device arguments are staged. Below the crossovers measured on 2 x
// H200 (docs/results/gpu-2026-11-29) device all-reduce, all-gather,
// all-to-all and bcast take the fused kernels, which fall back to NCCL
// where they cannot run.
func DefaultRules() []Rule {
	rules, err := ParseRules("*:host:*:mpi#*:cuda:*:nccl#*:managed:*:mpi#*:mixed:*:staged#"+
		"allreduce:cuda:0-4M:fused#allgather:cuda:0-8M:fused#alltoall:cuda:0-4M:fused#bcast:cuda:0-8M:fused", "default")
	if err != nil {
		panic(err)
	}
	return rules
}

// ParseRules reads rules in the compact syntax
//
//	coll:mem:range:backend[#coll:mem:range:backend...]
//
// coll is a collective name or *, mem is host, cuda, managed, mixed or *,
// range is lo-hi in bytes with K/M/G suffixes (hi may be inf) or *. Any bad
// token makes the whole string fail, naming the token and source.
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
	if len(f) != 4 {
		return Rule{}, fmt.Errorf("want coll:mem:range:backend, got %d fields", len(f))
	}
	r := Rule{Coll: -1, Mem: -1, Hi: math.MaxUint64}
	if f[0] != "*" {
		c, ok := ParseColl(strings.ToLower(f[0]))
		if !ok {
			return r, fmt.Errorf("unknown collective %q", f[0])
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
		return r, fmt.Errorf("unknown backend %q (want mpi, nccl, fused or staged)", f[3])
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

// Routes is the compiled rule list: for each collective and memory kind,
// disjoint size ranges covering every size, in order.
type Routes [NumColl][NumMem][]Route

// Compile turns an ordered rule list (later rules win) into Routes.
func Compile(rules []Rule) Routes {
	var rt Routes
	for c := Coll(0); c < NumColl; c++ {
		for m := Mem(0); m < NumMem; m++ {
			rt[c][m] = compileCell(rules, c, m)
		}
	}
	return rt
}

func compileCell(rules []Rule, c Coll, m Mem) []Route {
	// cut points: every rule boundary; each elementary interval takes the
	// last matching rule.
	cuts := map[uint64]bool{0: true}
	var match []int
	for i, r := range rules {
		if (r.Coll == -1 || r.Coll == c) && (r.Mem == -1 || r.Mem == m) {
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

// Pick finds the route of a call of the given size.
func (rt *Routes) Pick(c Coll, m Mem, bytes uint64) Route {
	for _, r := range rt[c][m] {
		if bytes >= r.Lo && bytes <= r.Hi {
			return r
		}
	}
	return Route{Backend: MPI, Rule: -1}
}
