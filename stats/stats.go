// Package stats turns collmux's per-call counters, gathered from all ranks
// at finalize, into the report COLLMUX_STATS asks for: a table per
// collective × backend × message-size bucket, summed over ranks with each
// cell's spread over ranks (min, mean, max, the slowest rank), as text
// (like mpiP) or JSON, which also has every rank's own figures.
package stats

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"collmux/dispatch"
	"collmux/internal/units"

	"collmux/internal/privfile"
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
	// The GPUs' energy over the calls' time, summed over ranks (device
	// backends, where NVML reads it), and per GB of the calls' bytes.
	EnergyJ float64 `json:"energy_j,omitempty"`
	JPerGB  float64 `json:"j_per_gb,omitempty"`
	// A rank's time in the cell, over the ranks with calls in it (a
	// rooted collective's root and other ranks may count different
	// sizes, so fall in different cells); Slowest is the rank with
	// MaxSec, the lowest of equals, or -1 without per-rank figures.
	RanksIn int     `json:"ranks_with_calls"`
	MinSec  float64 `json:"time_min_s"`
	MeanSec float64 `json:"time_mean_s"`
	MaxSec  float64 `json:"time_max_s"`
	Slowest int     `json:"slowest_rank"`
}

// RankRow is one rank's figures of one cell, where it made calls.
type RankRow struct {
	Rank    int     `json:"rank"`
	Coll    string  `json:"collective"`
	Backend string  `json:"backend"`
	MinSize uint64  `json:"min_bytes"`
	MaxSize uint64  `json:"max_bytes"`
	Calls   uint64  `json:"calls"`
	Bytes   uint64  `json:"bytes"`
	TimeSec float64 `json:"time_s"`
}

// Report is what rank 0 writes at finalize.
type Report struct {
	Ranks    int       `json:"ranks"`
	ABI      string    `json:"mpi_abi"`
	Version  string    `json:"version,omitempty"` // collmux's
	Hosts    []string  `json:"hosts,omitempty"`   // each rank's host by rank in MPI_COMM_WORLD (COLLMUX_TOPO_OVERRIDE's nodes: host#n)
	Rows     []Row     `json:"rows"`
	RankRows []RankRow `json:"rank_rows,omitempty"` // by rank, then in the order of Rows
}

// CounterWords is the width of a cell in FromCounters' raw: calls, bytes,
// nanoseconds, microjoules (cmx_stat).
const CounterWords = 4

// FromCounters reads the C counter array cmx_stats[coll][backend][bucket]
// = {calls, bytes, ns, uj}, flattened, and keeps the cells that saw calls,
// in the array's order. ruleOf names the rule that routed a cell (by flat
// cell index), or "".
func FromCounters(raw []uint64, nbucket, ranks int, abi string, ruleOf func(cell int) string) Report {
	r := Report{Ranks: ranks, ABI: abi}
	for c := dispatch.Coll(0); c < dispatch.NumColl; c++ {
		for b := dispatch.Backend(0); b < dispatch.NumBackend; b++ {
			for k := 0; k < nbucket; k++ {
				cell := (int(c)*int(dispatch.NumBackend)+int(b))*nbucket + k
				i := cell * CounterWords
				if raw[i] == 0 {
					continue
				}
				lo, hi := BucketBounds(k, nbucket)
				row := Row{Coll: c.String(), Backend: b.String(), MinSize: lo, MaxSize: hi,
					Calls: raw[i], Bytes: raw[i+1], TimeSec: float64(raw[i+2]) / 1e9, Rule: ruleOf(cell), Slowest: -1,
					EnergyJ: float64(raw[i+3]) / 1e6}
				if row.Bytes > 0 {
					row.JPerGB = row.EnergyJ / (float64(row.Bytes) / 1e9)
				}
				r.Rows = append(r.Rows, row)
			}
		}
	}
	return r
}

// AddRanks adds the per-rank figures rank 0 gathered: for each of r.Ranks
// ranks, its host name in hostWords 8-byte words (NUL-padded), then
// {calls, bytes, ns} of each row of r.Rows, in order. It fills Hosts,
// RankRows and each row's spread over ranks.
func (r *Report) AddRanks(raw []uint64, hostWords int) error {
	words := hostWords + 3*len(r.Rows)
	if r.Ranks <= 0 || len(raw) != r.Ranks*words {
		return fmt.Errorf("per-rank statistics: %d words for %d ranks of %d", len(raw), r.Ranks, words)
	}
	r.Hosts, r.RankRows = make([]string, r.Ranks), nil
	for i := range r.Rows {
		r.Rows[i].RanksIn, r.Rows[i].MinSec, r.Rows[i].MaxSec, r.Rows[i].Slowest = 0, 0, 0, -1
	}
	name := make([]byte, 8*hostWords)
	for rank := 0; rank < r.Ranks; rank++ {
		rec := raw[rank*words : (rank+1)*words]
		for w := 0; w < hostWords; w++ {
			binary.NativeEndian.PutUint64(name[8*w:], rec[w])
		}
		host, _, _ := strings.Cut(string(name), "\x00")
		r.Hosts[rank] = host
		for i := range r.Rows {
			row, c := &r.Rows[i], rec[hostWords+3*i:hostWords+3*i+3]
			if c[0] == 0 {
				continue
			}
			sec := float64(c[2]) / 1e9
			r.RankRows = append(r.RankRows, RankRow{rank, row.Coll, row.Backend, row.MinSize, row.MaxSize, c[0], c[1], sec})
			if row.RanksIn == 0 || sec < row.MinSec {
				row.MinSec = sec
			}
			if row.RanksIn == 0 || sec > row.MaxSec {
				row.MaxSec, row.Slowest = sec, rank
			}
			row.RanksIn++
		}
	}
	for i := range r.Rows {
		if row := &r.Rows[i]; row.RanksIn > 0 {
			row.MeanSec = row.TimeSec / float64(row.RanksIn)
		}
	}
	return nil
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
	return privfile.Write(path, func(w io.Writer) error { return r.write(asJSON, w) })
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
	name := "collmux"
	if r.Version != "" {
		name += " " + r.Version
	}
	where := ""
	if n := distinct(r.Hosts); n == 1 {
		where = " on 1 host"
	} else if n > 1 {
		where = fmt.Sprintf(" on %d hosts", n)
	}
	fmt.Fprintf(w, "%s statistics: %d ranks%s, MPI ABI %s (calls, bytes and time summed over ranks; "+
		"min, max: one rank's time, over the ranks with calls; slowest: the rank with max)\n", name, r.Ranks, where, r.ABI)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "collective\tbackend\tbytes [lo-hi)\tcalls\tbytes\ttime(s)\tavg(us)\tmin(s)\tmax(s)\tslowest\t rule")
	for _, row := range rows {
		spread := "-\t-\t-"
		if row.Slowest >= 0 {
			spread = fmt.Sprintf("%.6f\t%.6f\t%d", row.MinSec, row.MaxSec, row.Slowest)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.6f\t%.2f\t%s\t %s\n", row.Coll, row.Backend, sizeRange(row.MinSize, row.MaxSize),
			row.Calls, row.Bytes, row.TimeSec, row.TimeSec*1e6/float64(row.Calls), spread, row.Rule)
	}
	return tw.Flush()
}

// distinct counts the different strings in s.
func distinct(s []string) int {
	seen := map[string]bool{}
	for _, v := range s {
		seen[v] = true
	}
	return len(seen)
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
