package stats

import (
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
	raw := make([]uint64, int(dispatch.NumColl)*int(dispatch.NumBackend)*nb*3)
	set := func(c dispatch.Coll, b dispatch.Backend, k int, calls, bytes, ns uint64) {
		i := ((int(c)*int(dispatch.NumBackend)+int(b))*nb + k) * 3
		raw[i], raw[i+1], raw[i+2] = calls, bytes, ns
	}
	set(dispatch.Allreduce, dispatch.MPI, 4, 10, 80, 5000)
	set(dispatch.Alltoall, dispatch.NCCL, 21, 2, 2<<20, 1e9)
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
