package dispatch

import (
	"math"
	"strings"
	"testing"
)

func TestParseRulesErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{"allreduce:cuda:0-256K", "got 3 fields"},
		{"allredux:cuda:*:nccl", `unknown collective "allredux"`},
		{"allreduce:gpu:*:nccl", `unknown memory kind "gpu"`},
		{"allreduce:cuda:0-12Q:nccl", `bad size "12Q"`},
		{"allreduce:cuda:256K:nccl", "bad range"},
		{"allreduce:cuda:1M-1K:nccl", "empty range"},
		{"allreduce:cuda:*:ucc", `unknown backend "ucc"`},
		{"*:cuda:*:nccl#bcast:host:*:magic", `rule "bcast:host:*:magic"`},
	}
	for _, tc := range cases {
		_, err := ParseRules(tc.in, "COLLMUX_RULES")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "COLLMUX_RULES") {
			t.Errorf("%q: error %v, want one containing %q and the source", tc.in, err, tc.want)
		}
	}
}

func TestCompileLaterRulesWin(t *testing.T) {
	rules := DefaultRules()
	extra, err := ParseRules("allreduce:cuda:0-256K:fused#allreduce:cuda:1K-4K:staged#alltoall:*:*:mpi", "env")
	if err != nil {
		t.Fatal(err)
	}
	rt := Compile(append(rules, extra...))
	cases := []struct {
		c     Coll
		m     Mem
		bytes uint64
		want  Backend
	}{
		{Allreduce, Device, 8, Fused},
		{Allreduce, Device, 1023, Fused},
		{Allreduce, Device, 1024, Staged},
		{Allreduce, Device, 4096, Staged},
		{Allreduce, Device, 4097, Fused},
		{Allreduce, Device, 256 << 10, Fused},
		{Allreduce, Device, 256<<10 + 1, Fused}, // the default's fused range continues
		{Allreduce, Device, 4<<20 + 1, NCCL},
		{Allreduce, Device, math.MaxUint64, NCCL},
		{Allreduce, Host, 8, MPI},
		{Alltoall, Device, 1 << 20, MPI},
		{Bcast, Mixed, 0, Staged},
		{Bcast, Managed, 0, MPI},
	}
	for _, tc := range cases {
		if got := rt.Pick(tc.c, tc.m, tc.bytes); got.Backend != tc.want {
			t.Errorf("%v %v %d B: %v, want %v", tc.c, tc.m, tc.bytes, got.Backend, tc.want)
		}
	}
	// ranges are disjoint, ordered and cover everything
	for c := Coll(0); c < NumColl; c++ {
		for m := Mem(0); m < NumMem; m++ {
			cell := rt[c][m]
			if len(cell) == 0 || cell[0].Lo != 0 || cell[len(cell)-1].Hi != math.MaxUint64 {
				t.Fatalf("%v %v does not cover all sizes: %+v", c, m, cell)
			}
			for i := 1; i < len(cell); i++ {
				if cell[i].Lo != cell[i-1].Hi+1 {
					t.Fatalf("%v %v has a gap or overlap: %+v", c, m, cell)
				}
			}
		}
	}
}

func FuzzParseRules(f *testing.F) {
	for _, s := range []string{"allreduce:cuda:0-256K:fused", "*:*:*:mpi#bcast:host:1-2:nccl", "a:b:c:d", "::::", "#", "x:cuda:1K-inf:staged"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rules, err := ParseRules(s, "fuzz")
		if err != nil {
			return
		}
		rt := Compile(append(DefaultRules(), rules...))
		for c := Coll(0); c < NumColl; c++ {
			for m := Mem(0); m < NumMem; m++ {
				cell := rt[c][m]
				if len(cell) == 0 || cell[0].Lo != 0 || cell[len(cell)-1].Hi != math.MaxUint64 {
					t.Fatalf("%q: %v %v not covered: %+v", s, c, m, cell)
				}
			}
		}
	})
}
