// Package tune turns benchmark sweeps into routing rules for one machine.
// For each collective and message size the fastest backend wins; a margin
// keeps the previous size's winner while it is within noise of the best,
// so that noise does not flip choices; sizes with one winner become one
// size range. The result is a versioned tuning table, keyed by the
// machine's GPU fingerprint, that collmux loads with COLLMUX_TUNING.
package tune

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"collmux/internal/units"
)

// Sample is one measured point: a collective of Bytes on Backend took
// Micros per call (median).
type Sample struct {
	Coll    string  `json:"collective"`
	Backend string  `json:"backend"`
	Bytes   uint64  `json:"bytes"`
	Micros  float64 `json:"us"`
}

// ReadCSV reads bench/gpu_bench output (collective,path,bytes,time_us,...).
// backendOf names the backend a path column measured, or "" to skip it.
func ReadCSV(r io.Reader, backendOf func(path string) string) ([]Sample, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	var out []Sample
	for i, rec := range recs {
		if i == 0 && rec[0] == "collective" {
			continue
		}
		if len(rec) < 4 {
			return nil, fmt.Errorf("line %d: want collective,path,bytes,time_us", i+1)
		}
		b := backendOf(rec[1])
		if b == "" {
			continue
		}
		bytes, err1 := strconv.ParseUint(rec[2], 10, 64)
		us, err2 := strconv.ParseFloat(rec[3], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("line %d: bad number in %v", i+1, rec)
		}
		out = append(out, Sample{rec[0], b, bytes, us})
	}
	return out, nil
}

// Merge averages repeated measurements of the same collective, backend and
// size (sweeps from several runs), and drops those of a backend that cannot
// run the collective at that size (forcing it measures its fallback
// instead). can reports whether backend b serves collective c of n bytes.
func Merge(samples []Sample, can func(b, c string, n uint64) bool) []Sample {
	return merge(samples, func(s Sample) point { return point{s.Coll, s.Backend, s.Bytes} },
		func(k point) bool { return can(k.b, k.c, k.n) },
		func(o *Sample, s Sample, w float64) { average(&o.Micros, s.Micros, w) })
}

// average folds v into *avg, the mean of the w values before it.
func average(avg *float64, v, w float64) { *avg = (*avg*w + v) / (w + 1) }

// point is what a measurement measured: a collective of a size on a backend.
type point struct {
	c, b string
	n    uint64
}

// merge keeps one sample per key, in the order they first come, those of
// a key keep refuses left out; blend folds a repeated one into the average
// of the w before it.
func merge[S any, K comparable](samples []S, key func(S) K, keep func(K) bool, blend func(avg *S, s S, w float64)) []S {
	idx, cnt := map[K]int{}, map[K]float64{}
	var out []S
	for _, s := range samples {
		k := key(s)
		if !keep(k) {
			continue
		}
		if i, ok := idx[k]; ok {
			blend(&out[i], s, cnt[k])
			cnt[k]++
			continue
		}
		idx[k], cnt[k] = len(out), 1
		out = append(out, s)
	}
	return out
}

// Range is a chosen backend for [Lo, Hi] bytes (Hi = MaxUint64: no limit).
type Range struct {
	Coll    string `json:"collective"`
	Lo      uint64 `json:"lo"`
	Hi      uint64 `json:"hi"`
	Backend string `json:"backend"`
}

// Choose picks a backend per collective and size range. At each measured
// size the fastest backend wins unless the backend chosen for the previous
// size (or, first, prefer) is within margin (0.05 = 5%) of it. A range
// ends at the last size its backend won; beyond the largest measured size
// the last winner holds.
func Choose(samples []Sample, margin float64, prefer string) []Range {
	byColl := bySize(samples)
	var out []Range
	for _, c := range slices.Sorted(maps.Keys(byColl)) {
		out = append(out, rangesOf(c, byColl[c], prefer, fastest(margin))...)
	}
	return out
}

// rangesOf turns per-size choices into size ranges of collective c: pick
// names the backend for a size from its measurements and the previous
// size's choice (first, at the first size). A range ends at the last size
// its backend won; beyond the largest measured size the last winner holds.
func rangesOf[M any](c string, sizes map[uint64]M, first string, pick func(at M, cur string) string) []Range {
	var rs []Range
	cur := first
	for _, size := range slices.Sorted(maps.Keys(sizes)) {
		cur = pick(sizes[size], cur)
		if n := len(rs); n > 0 && rs[n-1].Backend == cur {
			rs[n-1].Hi = size
			continue
		}
		lo := uint64(0)
		if n := len(rs); n > 0 {
			lo = rs[n-1].Hi + 1
		}
		rs = append(rs, Range{c, lo, size, cur})
	}
	if n := len(rs); n > 0 {
		rs[n-1].Hi = math.MaxUint64
	}
	return rs
}

// bySize indexes samples: collective -> bytes -> backend -> µs.
func bySize(samples []Sample) map[string]map[uint64]map[string]float64 {
	m := map[string]map[uint64]map[string]float64{}
	for _, s := range samples {
		put(m, s.Coll, s.Bytes, s.Backend, s.Micros)
	}
	return m
}

// put sets m[a][b][c] to v, making the inner maps it lacks.
func put[A, B, C comparable, V any](m map[A]map[B]map[C]V, a A, b B, c C, v V) {
	if m[a] == nil {
		m[a] = map[B]map[C]V{}
	}
	if m[a][b] == nil {
		m[a][b] = map[C]V{}
	}
	m[a][b][c] = v
}

// Rules writes ranges in COLLMUX_RULES syntax for device buffers, each
// with the conditions given (":overlap=yes", or none).
func Rules(rs []Range, cond string) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		hi := "inf"
		if r.Hi != math.MaxUint64 {
			hi = units.Bytes(r.Hi)
		}
		out = append(out, fmt.Sprintf("%s:cuda:%s-%s:%s%s", r.Coll, units.Bytes(r.Lo), hi, r.Backend, cond))
	}
	return out
}

// TableVersion is the format version Write produces and Read accepts.
const TableVersion = 1

// Table is a tuning table: rules for one machine, with the measurements
// they came from: each collective alone (Ranges, Samples) and, where it was
// measured, beside a GEMM stream (the overlap=yes rules of
// OverlapRanges, from OverlapSamples). Rules without overlap=yes hold
// outside overlap mode only (dispatch). Ops are the forms of the fused
// operations (collmux.h) that measured fastest, from OpsSamples.
type Table struct {
	Version        int             `json:"version"`
	Date           time.Time       `json:"date"`
	GPUKey         string          `json:"gpu_key"`     // topo.Machine.GPUKey it was measured on
	Fingerprint    string          `json:"fingerprint"` // full machine fingerprint, for the record
	Margin         float64         `json:"margin"`
	Rules          []string        `json:"rules"`
	Ranges         []Range         `json:"ranges"`
	Samples        []Sample        `json:"samples"`
	OverlapRanges  []Range         `json:"overlap_ranges,omitempty"`
	OverlapSamples []OverlapSample `json:"overlap_samples,omitempty"`
	Ops            []OpsRange      `json:"ops,omitempty"` // the fused operations' forms (COLLMUX_OPS_ALGO=auto)
	OpsSamples     []OpsSample     `json:"ops_samples,omitempty"`
}

// Write stores t as indented JSON.
func (t Table) Write(path string) error {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Read loads a table and checks its version.
func Read(path string) (Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Table{}, err
	}
	return Decode(b, path)
}

// Decode parses a table read from path (which only names it in errors)
// and checks its version.
func Decode(b []byte, path string) (Table, error) {
	var t Table
	if err := json.Unmarshal(b, &t); err != nil {
		return t, fmt.Errorf("%s: %v", path, err)
	}
	if t.Version != TableVersion {
		return t, fmt.Errorf("%s: tuning table version %d, this collmux reads version %d", path, t.Version, TableVersion)
	}
	return t, nil
}

// RuleString joins the table's rules for dispatch.ParseRules.
func (t Table) RuleString() string { return strings.Join(t.Rules, "#") }
