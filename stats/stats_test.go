package stats

import (
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
