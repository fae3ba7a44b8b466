package tune

import (
	"encoding/csv"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
)

// OverlapSample is one path of one collective and size measured beside a
// reference GEMM stream (bench/overlap.c), the slowest rank's figures:
// how much the GEMMs slowed down (0.05: 5 %, measured against the GEMMs
// alone in the same process; clock drift can make it negative), the
// collective's time per call alone and beside them, and its energy alone.
type OverlapSample struct {
	Coll         string  `json:"collective"`
	Backend      string  `json:"backend"`
	Bytes        uint64  `json:"bytes"`
	GEMMSlowdown float64 `json:"gemm_slowdown"`
	AloneUs      float64 `json:"alone_us"`
	BesideUs     float64 `json:"beside_us"`
	JPerGB       float64 `json:"j_per_gb,omitempty"`
}

// ReadOverlapCSV reads bench/overlap.c's output (coll, path, bytes, rank,
// gemm_ms, gemm_together_ms, gemm_slowdown, coll_us, coll_together_us,
// coll_slowdown, calls_together, coll_J, J_per_GB; a line per rank), each
// path named by backendOf ("" skips it). The ranks' lines of one point are
// taken together (the largest slowdown and times, and the energy of the
// ranks that read it); a point whose rank comes again is another run's,
// a sample of its own (MergeOverlap averages them).
func ReadOverlapCSV(r io.Reader, backendOf func(path string) string) ([]OverlapSample, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	type run struct {
		at    int             // the sample in out
		ranks map[string]bool // the ranks taken into it
	}
	cur := map[point]*run{}
	var out []OverlapSample
	for i, rec := range recs {
		if rec[0] == "coll" { // a header, also where runs were appended
			continue
		}
		if len(rec) < 13 {
			return nil, fmt.Errorf("line %d: want bench/overlap's 13 columns, got %d", i+1, len(rec))
		}
		b := backendOf(rec[1])
		if b == "" {
			continue
		}
		n, err := strconv.ParseUint(rec[2], 10, 64)
		var f [4]float64
		for j, col := range []int{6, 7, 8, 12} {
			if err == nil {
				f[j], err = strconv.ParseFloat(rec[col], 64)
			}
		}
		if err != nil || slices.ContainsFunc(f[:], math.IsNaN) {
			return nil, fmt.Errorf("line %d: bad number in %v", i+1, rec)
		}
		s := OverlapSample{rec[0], b, n, f[0], f[1], f[2], f[3]}
		k := point{s.Coll, s.Backend, s.Bytes}
		p := cur[k]
		if p == nil || p.ranks[rec[3]] {
			cur[k] = &run{len(out), map[string]bool{rec[3]: true}}
			out = append(out, s)
			continue
		}
		p.ranks[rec[3]] = true
		o := &out[p.at]
		o.GEMMSlowdown, o.AloneUs = max(o.GEMMSlowdown, s.GEMMSlowdown), max(o.AloneUs, s.AloneUs)
		o.BesideUs, o.JPerGB = max(o.BesideUs, s.BesideUs), max(o.JPerGB, s.JPerGB)
	}
	return out, nil
}

// MergeOverlap averages the samples of one collective, backend and size
// (runs recorded more than once), and drops those of a backend that
// cannot run the collective at that size (forcing it measures its
// fallback instead): can, as Merge's.
func MergeOverlap(samples []OverlapSample, can func(b, c string, n uint64) bool) []OverlapSample {
	return merge(samples, func(s OverlapSample) point { return point{s.Coll, s.Backend, s.Bytes} },
		func(k point) bool { return can(k.b, k.c, k.n) },
		func(o *OverlapSample, s OverlapSample, w float64) {
			average(&o.GEMMSlowdown, s.GEMMSlowdown, w)
			average(&o.AloneUs, s.AloneUs, w)
			average(&o.BesideUs, s.BesideUs, w)
			average(&o.JPerGB, s.JPerGB, w)
		})
}

// OverlapTarget is what issue 19 asks of a collective beside computation:
// the GEMMs slowed by at most gemm, the collective at share or more of its
// own throughput alone; reductions (which need SMs) are allowed more.
func OverlapTarget(coll string) (gemm, share float64) {
	switch coll {
	case "allreduce", "reduce", "reduce_scatter", "reduce_scatter_block", "scan", "exscan":
		return 0.08, 0.80
	}
	return 0.05, 0.90
}

// meets reports whether s keeps to its collective's OverlapTarget.
func (s OverlapSample) meets() bool {
	gemm, share := OverlapTarget(s.Coll)
	return s.GEMMSlowdown <= gemm && s.BesideUs > 0 && s.AloneUs/s.BesideUs >= share
}

// ChooseOverlap picks a backend per collective and size range for overlap
// mode: at each size, of the paths that keep to OverlapTarget the fastest
// beside the GEMMs; where none does, of those within 1 % of the least GEMM
// slowdown (negative slowdowns, clock drift, count as none) the fastest.
// As in Choose, the previous size's choice stays while it is a candidate
// within margin of the fastest.
func ChooseOverlap(samples []OverlapSample, margin float64) []Range {
	by := map[string]map[uint64]map[string]OverlapSample{}
	for _, s := range samples {
		put(by, s.Coll, s.Bytes, s.Backend, s)
	}
	var out []Range
	for _, c := range slices.Sorted(maps.Keys(by)) {
		out = append(out, rangesOf(c, by[c], "", func(at map[string]OverlapSample, cur string) string {
			// the candidates: the paths that keep to the target, else those
			// within 1 % of the least GEMM slowdown; of them the fastest
			// beside the GEMMs, or the previous size's within margin
			slowed := func(s OverlapSample) float64 { return math.Max(s.GEMMSlowdown, 0) }
			least, meet := math.Inf(1), false
			for _, s := range at {
				least, meet = math.Min(least, slowed(s)), meet || s.meets()
			}
			in := func(s OverlapSample) bool { return s.meets() || (!meet && slowed(s) <= least+0.01) }
			best := ""
			for _, b := range slices.Sorted(maps.Keys(at)) {
				if in(at[b]) && (best == "" || at[b].BesideUs < at[best].BesideUs) {
					best = b
				}
			}
			if s, ok := at[cur]; ok && in(s) && s.BesideUs <= at[best].BesideUs*(1+margin) {
				return cur
			}
			return best
		})...)
	}
	return out
}
