package stats

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"collmux/dispatch"
)

func TestBucketBounds(t *testing.T) {
	cases := []struct {
		k      int
		lo, hi uint64
	}{{0, 0, 1}, {1, 1, 2}, {4, 8, 16}, {33, 1 << 32, 0}}
	for _, tc := range cases {
		lo, hi := BucketBounds(tc.k, 34)
		if lo != tc.lo || hi != tc.hi {
			t.Errorf("bucket %d: [%d,%d), want [%d,%d)", tc.k, lo, hi, tc.lo, tc.hi)
		}
	}
}

func TestFromCounters(t *testing.T) {
	const nb = 34
	raw := make([]uint64, int(dispatch.NumColl)*int(dispatch.NumBackend)*nb*CounterWords)
	set := func(c dispatch.Coll, b dispatch.Backend, k int, calls, bytes, ns, uj uint64) {
		i := ((int(c)*int(dispatch.NumBackend)+int(b))*nb + k) * CounterWords
		raw[i], raw[i+1], raw[i+2], raw[i+3] = calls, bytes, ns, uj
	}
	set(dispatch.Allreduce, dispatch.MPI, 4, 10, 80, 5000, 0)
	set(dispatch.Alltoall, dispatch.NCCL, 21, 2, 2<<20, 1e9, 3e6)
	r := FromCounters(raw, nb, 4, "mpich", func(cell int) string {
		if cell == (int(dispatch.Alltoall)*int(dispatch.NumBackend)+int(dispatch.NCCL))*nb+21 {
			return `"*:cuda:*:nccl" from default`
		}
		return ""
	})
	if len(r.Rows) != 2 {
		t.Fatalf("want 2 rows, got %+v", r.Rows)
	}
	if r.Calls("allreduce", "mpi") != 10 || r.Calls("alltoall", "nccl") != 2 || r.Calls("bcast", "mpi") != 0 {
		t.Errorf("Calls: %+v", r.Rows)
	}
	// 3 J over 2 MiB: J/GB from the bytes; none where nothing was read
	if e := r.Rows[1]; e.EnergyJ != 3 || math.Abs(e.JPerGB-3/(float64(2<<20)/1e9)) > 1e-9 || r.Rows[0].EnergyJ != 0 {
		t.Errorf("energy: %+v", r.Rows)
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"4 ranks", "alltoall", "nccl", "1M-2M", "8-16", "500000.00", `"*:cuda:*:nccl" from default`} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
}

// The report goes to a file of the user's alone, never through a symbolic
// link (which could aim the truncating write at any of the user's files).
func TestWriteFile(t *testing.T) {
	r := Report{Ranks: 2, ABI: "mpich"}
	for _, tc := range []struct {
		name  string
		setup func(dir string) string // returns the path to write
		err   string                  // "" for none
	}{
		{"new file", func(dir string) string { return filepath.Join(dir, "s.json") }, ""},
		{"existing file", func(dir string) string {
			p := filepath.Join(dir, "s.json")
			os.WriteFile(p, []byte("old and longer than the report, to be truncated......................................."), 0o600)
			return p
		}, ""},
		{"symbolic link", func(dir string) string {
			os.WriteFile(filepath.Join(dir, "victim"), []byte("precious"), 0o600)
			os.Symlink(filepath.Join(dir, "victim"), filepath.Join(dir, "s.json"))
			return filepath.Join(dir, "s.json")
		}, "symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := tc.setup(dir)
			err := r.Write(true, p)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want one saying %q", err, tc.err)
				}
				if b, _ := os.ReadFile(filepath.Join(dir, "victim")); string(b) != "precious" {
					t.Errorf("the link's target became %q", b)
				}
				return
			}
			b, _ := os.ReadFile(p)
			if err != nil || !strings.HasPrefix(string(b), "{") || !strings.HasSuffix(string(b), "}\n") {
				t.Errorf("%v, wrote %q", err, b)
			}
			if fi, err := os.Stat(p); err != nil || tc.name == "new file" && fi.Mode().Perm() != 0o600 {
				t.Errorf("a new report must be 0600: %v %v", fi.Mode(), err)
			}
		})
	}
}

// The per-rank figures rank 0 gathers (host name, then {calls, bytes, ns}
// of each row) give each row's spread over the ranks with calls in it,
// the hosts, and per-rank rows that add up to the sums.
func TestAddRanks(t *testing.T) {
	const nb, hostWords = 34, 9
	cellOf := func(c dispatch.Coll, b dispatch.Backend, k int) int {
		return (int(c)*int(dispatch.NumBackend)+int(b))*nb + k
	}
	host := func(name string) []uint64 {
		b := make([]byte, 8*hostWords)
		copy(b, name)
		w := make([]uint64, hostWords)
		for i := range w {
			w[i] = binary.NativeEndian.Uint64(b[8*i:])
		}
		return w
	}
	type rank struct {
		host  string
		cells [][3]uint64 // per row: calls, bytes, ns
	}
	for _, tc := range []struct {
		name     string
		ranks    []rank
		min, max []float64 // per row, seconds
		slowest  []int
		in       []int
		hosts    int // distinct
		rankRows int
	}{
		{"even", []rank{
			{"a", [][3]uint64{{5, 40, 1e9}, {1, 1 << 20, 3e9}}},
			{"a", [][3]uint64{{5, 40, 2e9}, {1, 1 << 20, 1e9}}},
		}, []float64{1, 1}, []float64{2, 3}, []int{1, 0}, []int{2, 2}, 1, 4},
		{"a rank without calls in a row", []rank{
			{"a", [][3]uint64{{5, 40, 4e9}, {0, 0, 0}}},
			{"b", [][3]uint64{{5, 40, 4e9}, {2, 2 << 20, 5e8}}},
			{"b", [][3]uint64{{5, 40, 1e9}, {0, 0, 0}}},
		}, []float64{1, 0.5}, []float64{4, 0.5}, []int{0, 1}, []int{3, 1}, 2, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := make([]uint64, int(dispatch.NumColl)*int(dispatch.NumBackend)*nb*CounterWords)
			cells := []int{cellOf(dispatch.Allreduce, dispatch.MPI, 4), cellOf(dispatch.Alltoall, dispatch.NCCL, 21)}
			var per []uint64
			for _, rk := range tc.ranks {
				per = append(per, host(rk.host)...)
				for i, c := range rk.cells {
					per = append(per, c[:]...)
					for j := range 3 {
						raw[cells[i]*CounterWords+j] += c[j]
					}
				}
			}
			r := FromCounters(raw, nb, len(tc.ranks), "openmpi", func(int) string { return "" })
			r.Version = "9.8.7"
			if err := r.AddRanks(per, hostWords); err != nil {
				t.Fatal(err)
			}
			if len(r.Hosts) != len(tc.ranks) || r.Hosts[0] != tc.ranks[0].host || distinct(r.Hosts) != tc.hosts {
				t.Errorf("hosts %q", r.Hosts)
			}
			if len(r.RankRows) != tc.rankRows {
				t.Errorf("%d per-rank rows, want %d: %+v", len(r.RankRows), tc.rankRows, r.RankRows)
			}
			for i, row := range r.Rows {
				if row.MinSec != tc.min[i] || row.MaxSec != tc.max[i] || row.Slowest != tc.slowest[i] || row.RanksIn != tc.in[i] {
					t.Errorf("row %d: min %v max %v slowest %d in %d; want %v %v %d %d", i, row.MinSec, row.MaxSec, row.Slowest, row.RanksIn,
						tc.min[i], tc.max[i], tc.slowest[i], tc.in[i])
				}
				if !(row.MinSec <= row.MeanSec && row.MeanSec <= row.MaxSec) {
					t.Errorf("row %d: mean %v outside [%v, %v]", i, row.MeanSec, row.MinSec, row.MaxSec)
				}
				var calls, bytes uint64
				for _, rr := range r.RankRows {
					if rr.Coll == row.Coll && rr.Backend == row.Backend && rr.MinSize == row.MinSize {
						calls, bytes = calls+rr.Calls, bytes+rr.Bytes
					}
				}
				if calls != row.Calls || bytes != row.Bytes {
					t.Errorf("row %d: per-rank rows sum to %d calls, %d bytes; the row has %d, %d", i, calls, bytes, row.Calls, row.Bytes)
				}
			}
			var b strings.Builder
			if err := r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"collmux 9.8.7 statistics", fmt.Sprintf("%d ranks on %d host", len(tc.ranks), tc.hosts),
				"min(s)", "max(s)", "slowest"} {
				if !strings.Contains(b.String(), want) {
					t.Errorf("text report lacks %q:\n%s", want, b.String())
				}
			}
			for _, line := range strings.Split(b.String(), "\n") {
				// allreduce mpi 8-16 calls bytes time avg min max slowest
				if f := strings.Fields(line); len(f) >= 10 && f[0] == "allreduce" {
					if got := strings.Join(f[7:10], " "); got != fmt.Sprintf("%.6f %.6f %d", tc.min[0], tc.max[0], tc.slowest[0]) {
						t.Errorf("allreduce's min, max, slowest: %q", got)
					}
				}
			}
		})
	}
	r := FromCounters(make([]uint64, int(dispatch.NumColl)*int(dispatch.NumBackend)*nb*CounterWords), nb, 2, "mpich", func(int) string { return "" })
	if err := r.AddRanks(make([]uint64, hostWords), hostWords); err == nil {
		t.Error("figures of 1 rank for a report of 2 must be refused")
	}
}
