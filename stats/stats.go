// Package stats turns collmux's per-call counters, summed over all ranks at
// finalize, into the report COLLMUX_STATS asks for: a table per collective
// × backend × message-size bucket, as text (like mpiP) or JSON.
package stats

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"syscall"
	"text/tabwriter"

	"collmux/dispatch"
	"collmux/internal/units"
)

// Row is one (collective, backend, size bucket) cell with any calls in it.
type Row struct {
	Coll    string  `json:"collective"`
	Backend string  `json:"backend"`
	MinSize uint64  `json:"min_bytes"` // bucket bounds: [MinSize, MaxSize)
	MaxSize uint64  `json:"max_bytes"` // 0 for the open last bucket
	Calls   uint64  `json:"calls"`
	Bytes   uint64  `json:"bytes"`
	TimeSec float64 `json:"time_s"`         // summed over ranks
	Rule    string  `json:"rule,omitempty"` // the rule (and its source) that routed the last of these calls
}

// Report is what rank 0 writes at finalize.
type Report struct {
	Ranks int    `json:"ranks"`
	ABI   string `json:"mpi_abi"`
	Rows  []Row  `json:"rows"`
}

// FromCounters reads the C counter array cmx_stats[coll][backend][bucket]
// = {calls, bytes, ns}, flattened, and keeps the cells that saw calls.
// ruleOf names the rule that routed a cell (by flat cell index), or "".
func FromCounters(raw []uint64, nbucket, ranks int, abi string, ruleOf func(cell int) string) Report {
	r := Report{Ranks: ranks, ABI: abi}
	for c := dispatch.Coll(0); c < dispatch.NumColl; c++ {
		for b := dispatch.Backend(0); b < dispatch.NumBackend; b++ {
			for k := 0; k < nbucket; k++ {
				cell := (int(c)*int(dispatch.NumBackend)+int(b))*nbucket + k
				i := cell * 3
				if raw[i] == 0 {
					continue
				}
				lo, hi := BucketBounds(k, nbucket)
				r.Rows = append(r.Rows, Row{c.String(), b.String(), lo, hi, raw[i], raw[i+1], float64(raw[i+2]) / 1e9, ruleOf(cell)})
			}
		}
	}
	return r
}

// BucketBounds gives the byte range [lo, hi) of bucket k: bucket 0 holds
// empty messages, bucket k holds sizes with bit length k, the last is open
// (hi = 0).
func BucketBounds(k, nbucket int) (lo, hi uint64) {
	if k == 0 {
		return 0, 1
	}
	lo = 1 << (k - 1)
	if k < nbucket-1 {
		hi = 1 << k
	}
	return lo, hi
}

// Calls sums the calls of a collective on a backend over all buckets.
func (r Report) Calls(coll, backend string) uint64 {
	var n uint64
	for _, row := range r.Rows {
		if row.Coll == coll && row.Backend == backend {
			n += row.Calls
		}
	}
	return n
}

// Write writes the report as JSON or text to path, or text to stderr when
// path is empty. A file is made 0600 (the report shows what the job did),
// and a symbolic link at path is refused, not followed: in a directory
// others can write, it could point the truncating write at any file of
// the user's.
func (r Report) Write(asJSON bool, path string) error {
	if path == "" {
		return r.write(asJSON, os.Stderr)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("%s is a symbolic link: not written", path)
	}
	if err != nil {
		return err
	}
	err = r.write(asJSON, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (r Report) write(asJSON bool, w io.Writer) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return r.WriteText(w)
}

// WriteText writes the mpiP-like table.
func (r Report) WriteText(w io.Writer) error {
	rows := append([]Row(nil), r.Rows...)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].TimeSec > rows[j].TimeSec })
	fmt.Fprintf(w, "collmux statistics: %d ranks, MPI ABI %s (calls, bytes and time summed over ranks)\n", r.Ranks, r.ABI)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "collective\tbackend\tbytes [lo-hi)\tcalls\tbytes\ttime(s)\tavg(us)\t rule")
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.6f\t%.2f\t %s\n", row.Coll, row.Backend, sizeRange(row.MinSize, row.MaxSize),
			row.Calls, row.Bytes, row.TimeSec, row.TimeSec*1e6/float64(row.Calls), row.Rule)
	}
	return tw.Flush()
}

func sizeRange(lo, hi uint64) string {
	if hi == 1 {
		return "0"
	}
	if hi == 0 {
		return units.Bytes(lo) + "+"
	}
	return units.Bytes(lo) + "-" + units.Bytes(hi)
}
