package tune

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
)

// Tuned is the policy name Check looks for: the defaults and the tuning
// table, measured in the same run as every backend alone ("via-B" in
// gpu_bench's output, read as backend B).
const Tuned = "tuned"

// CollCheck is how the tuned policy did on one collective against every
// backend alone, measured in one run.
type CollCheck struct {
	Coll       string
	Sizes      int     // sizes measured under the tuned policy and at least one backend alone
	Worst      float64 // the largest tuned / best-single ratio
	WorstBytes uint64
	Within     int // sizes where tuned <= (1 + tolerance) x the best backend alone
	// SamePath counts the sizes where the table takes the path that was
	// fastest alone: there tuned and the best backend run the same code,
	// and their ratio, in [SameLo, SameHi], is the run's noise.
	SamePath       int
	SameLo, SameHi float64
	Sum            float64        // tuned, over all Sizes
	Single         map[string]Sum // per backend alone, over the sizes it was measured
}

// Sum is a backend's summed time over the sizes it was measured at, and
// the tuned policy's over the same sizes.
type Sum struct{ Alone, Tuned float64 }

// Check compares the tuned policy with every backend alone. serves tells
// whether a backend runs a collective of n bytes itself; where it does
// not, it runs fallback, and the path the table takes is named so.
func Check(t Table, samples []Sample, tolerance float64, serves func(b, c string, n uint64) bool, fallback string) []CollCheck {
	times := bySize(samples)
	path := func(b, c string, n uint64) string {
		if serves(b, c, n) {
			return b
		}
		return fallback
	}
	var out []CollCheck
	for _, c := range slices.Sorted(maps.Keys(times)) {
		cc := CollCheck{Coll: c, SameLo: math.Inf(1), SameHi: math.Inf(-1), Single: map[string]Sum{}}
		for _, n := range slices.Sorted(maps.Keys(times[c])) {
			at := times[c][n]
			tuned, ok := at[Tuned]
			best, bt := "", math.Inf(1)
			for _, b := range slices.Sorted(maps.Keys(at)) {
				if b != Tuned && at[b] < bt {
					best, bt = b, at[b]
				}
			}
			if !ok || best == "" {
				continue
			}
			cc.Sizes++
			cc.Sum += tuned
			r := tuned / bt
			if r > cc.Worst {
				cc.Worst, cc.WorstBytes = r, n
			}
			if r <= 1+tolerance {
				cc.Within++
			}
			if path(t.Backend(c, n), c, n) == path(best, c, n) {
				cc.SamePath++
				cc.SameLo, cc.SameHi = min(cc.SameLo, r), max(cc.SameHi, r)
			}
			for b, us := range at {
				if b != Tuned {
					s := cc.Single[b]
					cc.Single[b] = Sum{s.Alone + us, s.Tuned + tuned}
				}
			}
		}
		if cc.Sizes > 0 {
			out = append(out, cc)
		}
	}
	return out
}

// Backend is the backend the table chose for collective c of n bytes ("" if
// none of its ranges covers it).
func (t Table) Backend(c string, n uint64) string {
	for _, r := range t.Ranges {
		if r.Coll == c && r.Lo <= n && n <= r.Hi {
			return r.Backend
		}
	}
	return ""
}

// WriteCheck prints a check as a Markdown table with the two verdicts the
// tuner is held to: within tolerance of the best backend alone at every
// size, and a summed time below every backend alone.
func WriteCheck(w io.Writer, cs []CollCheck, tolerance float64) {
	pct := fmt.Sprintf("%.0f%%", tolerance*100)
	fmt.Fprintf(w, "| collective | sizes | worst tuned/best alone (size) | sizes within %s | sizes where the table takes the fastest path (their ratio: noise) | sum tuned µs | sum alone µs per backend (tuned over the same sizes) |\n", pct)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	allWithin, allSums := true, true
	for _, c := range cs {
		var per []string
		for _, b := range slices.Sorted(maps.Keys(c.Single)) {
			s := c.Single[b]
			per = append(per, fmt.Sprintf("%s %.0f (%.0f)", b, s.Alone, s.Tuned))
			allSums = allSums && s.Tuned < s.Alone
		}
		same := "0"
		if c.SamePath > 0 {
			same = fmt.Sprintf("%d: %.3f–%.3f", c.SamePath, c.SameLo, c.SameHi)
		}
		allWithin = allWithin && c.Within == c.Sizes
		fmt.Fprintf(w, "| %s | %d | %.3f (%d B) | %d of %d | %s | %.0f | %s |\n", c.Coll, c.Sizes, c.Worst, c.WorstBytes, c.Within, c.Sizes,
			same, c.Sum, strings.Join(per, ", "))
	}
	yes := map[bool]string{true: "yes", false: "NO"}
	fmt.Fprintf(w, "\ntuned within %s of the best backend alone at every size: %s\n", pct, yes[allWithin])
	fmt.Fprintf(w, "tuned's summed time below every backend alone: %s\n", yes[allSums])
}
