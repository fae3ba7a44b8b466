package tune

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// OpsForms are the forms a fused operation of collmux.h computes in
// (COLLMUX_OPS_ALGO's values past auto, in their order).
var OpsForms = []string{"fused", "cublas", "nccl"}

// OpsSample is one form of a fused operation timed at one shape on a
// number of ranks (bench/fusedops.c: the GEMV + all-reduce of m rows at a
// batch).
type OpsSample struct {
	Op     string  `json:"op"`
	Ranks  int     `json:"ranks"`
	M      uint64  `json:"m"`
	Batch  int     `json:"batch"`
	Form   string  `json:"form"`
	Micros float64 `json:"us"`
}

// OpsTolerance is how far (relative to the largest value) a form's result
// may be from the unfused baseline's for its time to count: the forms
// round partials differently, but one that is further off did not compute
// the operation.
const OpsTolerance = 2e-2

// ReadOpsCSV reads bench/fusedops.c's output (op, m, k, batch, ranks,
// contender, us, speedup, max_rel_diff); formOf names the form a
// contender column measured ("" skips it). Operations other than
// gemv_allreduce are skipped, a batch past MaxOpsBatch or a result off by
// more than OpsTolerance is an error.
func ReadOpsCSV(r io.Reader, formOf func(contender string) string) ([]OpsSample, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, err
	}
	var out []OpsSample
	for i, rec := range recs {
		if rec[0] == "op" { // a header, also where runs were appended
			continue
		}
		if len(rec) < 9 {
			return nil, fmt.Errorf("line %d: want op,m,k,batch,ranks,contender,us,speedup_vs_a,max_rel_diff_vs_a", i+1)
		}
		f := formOf(rec[5])
		if f == "" || rec[0] != "gemv_allreduce" {
			continue
		}
		m, err1 := strconv.ParseUint(rec[1], 10, 64)
		b, err2 := strconv.Atoi(rec[3])
		n, err3 := strconv.Atoi(rec[4])
		us, err4 := strconv.ParseFloat(rec[6], 64)
		diff, err5 := strconv.ParseFloat(rec[8], 64)
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil || b < 1 || b > MaxOpsBatch || n < 1 || !(us > 0) {
			return nil, fmt.Errorf("line %d: bad number in %v", i+1, rec)
		}
		if !(diff <= OpsTolerance) {
			return nil, fmt.Errorf("line %d: the form's result is %.2e from the baseline's (more than %.0e): it did not compute the operation", i+1,
				diff, OpsTolerance)
		}
		out = append(out, OpsSample{rec[0], n, m, b, f, us})
	}
	return out, nil
}

// FormOf reads a bench/fusedops contender named d:FORM (collmux's
// operation under COLLMUX_OPS_ALGO=FORM).
func FormOf(contender string) string {
	if f, ok := strings.CutPrefix(contender, "d:"); ok && slices.Contains(OpsForms, f) {
		return f
	}
	return ""
}

// OpsRange is a chosen form of operation Op on communicators of Ranks
// ranks, for batches BatchLo to BatchHi and m from Lo to Hi (MaxUint64:
// no limit).
type OpsRange struct {
	Op      string `json:"op"`
	Ranks   int    `json:"ranks"`
	BatchLo int    `json:"batch_lo"`
	BatchHi int    `json:"batch_hi"`
	Lo      uint64 `json:"lo"`
	Hi      uint64 `json:"hi"`
	Form    string `json:"form"`
}

// MaxOpsBatch is the largest batch the GEMV + all-reduce takes.
const MaxOpsBatch = 16

// ChooseOps picks a form per operation, ranks, batch and range of m, as
// Choose picks backends by size (the fastest, the previous m's choice kept
// within margin; a choice covers the m past the previous measured one up
// to its own, the last all past it). A measured batch's choice holds from
// it up to the next measured batch (the last, up to MaxOpsBatch).
func ChooseOps(samples []OpsSample, margin float64) []OpsRange {
	type opBatch struct {
		op           string
		ranks, batch int
	}
	type shape struct {
		opBatch
		form string
		m    uint64
	}
	by := map[opBatch]map[uint64]map[string]float64{}
	for _, s := range merge(samples, func(s OpsSample) shape { return shape{opBatch{s.Op, s.Ranks, s.Batch}, s.Form, s.M} },
		func(shape) bool { return true },
		func(o *OpsSample, s OpsSample, w float64) { average(&o.Micros, s.Micros, w) }) {
		put(by, opBatch{s.Op, s.Ranks, s.Batch}, s.M, s.Form, s.Micros)
	}
	keys := slices.SortedFunc(maps.Keys(by), func(x, y opBatch) int {
		if x.op != y.op {
			return strings.Compare(x.op, y.op)
		}
		if x.ranks != y.ranks {
			return x.ranks - y.ranks
		}
		return x.batch - y.batch
	})
	var out []OpsRange
	for i, k := range keys {
		hi := MaxOpsBatch
		if i+1 < len(keys) && keys[i+1].op == k.op && keys[i+1].ranks == k.ranks {
			hi = keys[i+1].batch - 1
		}
		for _, r := range rangesOf(k.op, by[k], "", fastest(margin)) {
			out = append(out, OpsRange{k.op, k.ranks, k.batch, hi, r.Lo, r.Hi, r.Backend})
		}
	}
	return out
}

// fastest is Choose's pick: the fastest at a size, unless the previous
// choice is within margin of it.
func fastest(margin float64) func(times map[string]float64, cur string) string {
	return func(times map[string]float64, cur string) string {
		best, bt := "", math.Inf(1)
		for _, b := range slices.Sorted(maps.Keys(times)) {
			if times[b] < bt {
				best, bt = b, times[b]
			}
		}
		if t, ok := times[cur]; ok && t <= bt*(1+margin) {
			return cur
		}
		return best
	}
}
