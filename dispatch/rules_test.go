package dispatch

import (
	"math"
	"strings"
	"testing"

	"collmux/topo/nvlink"
)

func TestParseRulesErrors(t *testing.T) {
	cases := []struct{ in, want string }{
		{"allreduce:cuda:0-256K", "got 3 fields"},
		{"allreduce:cuda:*:fused:ranks", "bad condition"},
		{"allreduce:cuda:*:fused:ranks=0-8", "bad ranks range"},
		{"allreduce:cuda:*:fused:ranks=8-2", "bad ranks range"},
		{"allreduce:cuda:*:fused:gpus=2", `unknown condition "gpus"`},
		{"allreduce:cuda:*:fused:nvlink=some", `unknown NVLink class "some"`},
		{"allreduce:cuda:*:fused:dtype=complex", `unknown datatype class "complex"`},
		{"allreduce:cuda:*:staged:form=sometimes", `unknown form "sometimes"`},
		{"allredux:cuda:*:nccl", `unknown collective "allredux"`},
		{"send:cuda:*:nccl", "send is not a collective"},
		{"reduce_local:cuda:*:staged", "reduce_local is not a collective"},
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
	rt := Compile(append(rules, extra...), Shape{2, 1, 2, nvlink.None})
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
		{Allreduce, Device, 8 << 20, Fused},
		{Allreduce, Device, 8<<20 + 1, NCCL},
		{Allreduce, Device, math.MaxUint64, NCCL},
		{Allreduce, Host, 8, MPI},
		{Alltoall, Device, 1 << 20, MPI},
		{Bcast, Mixed, 0, Staged},
		{Bcast, Managed, 0, MPI},
	}
	for _, tc := range cases {
		if got := rt.Pick(tc.c, tc.m, DFloat, tc.bytes); got.Backend != tc.want {
			t.Errorf("%v %v %d B: %v, want %v", tc.c, tc.m, tc.bytes, got.Backend, tc.want)
		}
	}
	// ranges are disjoint, ordered and cover everything
	for c := Coll(0); c < NumColl; c++ {
		for m := Mem(0); m < NumMem; m++ {
			cell := rt[c][m][DInt]
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
		rt := Compile(append(DefaultRules(), rules...), Shape{4, 2, 2, nvlink.None})
		for c := Coll(0); c < NumColl; c++ {
			for m := Mem(0); m < NumMem; m++ {
				cell := rt[c][m][DOther]
				if len(cell) == 0 || cell[0].Lo != 0 || cell[len(cell)-1].Hi != math.MaxUint64 {
					t.Fatalf("%q: %v %v not covered: %+v", s, c, m, cell)
				}
			}
		}
	})
}

// Conditions on communicator shape and datatype class select rules per
// communicator and per call.
func TestShapeAndDtypeConditions(t *testing.T) {
	extra, err := ParseRules("allreduce:cuda:*:staged:nodes=2-64#allreduce:cuda:0-1M:fused:ranks=2-8:rpn=2-8#alltoall:cuda:*:staged:dtype=int"+
		"#bcast:cuda:*:staged:nvlink=none#bcast:cuda:0-64K:fused:nvlink=partial,full", "env")
	if err != nil {
		t.Fatal(err)
	}
	rules := append(DefaultRules(), extra...)
	if !ShapeDependent(rules) || ShapeDependent(DefaultRules()) {
		t.Error("ShapeDependent")
	}
	cases := []struct {
		shape Shape
		c     Coll
		d     DClass
		bytes uint64
		want  Backend
	}{
		{Shape{2, 1, 2, nvlink.None}, Allreduce, DFloat, 8, Fused},                                     // one node, 2 ranks
		{Shape{16, 1, 16, nvlink.None}, Allreduce, DFloat, 8, Fused},                                   // the default's fused range still applies
		{Shape{16, 1, 16, nvlink.None}, Allreduce, DFloat, 9 << 20, NCCL},                              // above it: NCCL
		{Shape{4, 2, 2, nvlink.None}, Allreduce, DFloat, 8, Fused},                                     // the ranks rule is later than the nodes rule
		{Shape{16, 2, 8, nvlink.None}, Allreduce, DFloat, 2 << 20, Staged},                             // two nodes, beyond the fused range
		{Shape{32, 4, 8, nvlink.None}, Allreduce, DFloat, 64, Staged},                                  // 32 ranks: the ranks rule does not hold
		{Shape{2, 1, 2, nvlink.None}, Alltoall, DInt, 1 << 30, Staged},                                 // integer alltoall
		{Shape{2, 1, 2, nvlink.None}, Alltoall, DFloat, 1 << 30, NCCL},                                 // float alltoall untouched
		{Shape{Ranks: 2, Nodes: 1, RanksPerNode: 2}, Bcast, DFloat, 64, Staged},                        // no NVLink
		{Shape{Ranks: 2, Nodes: 1, RanksPerNode: 2, NVLink: nvlink.Partial}, Bcast, DFloat, 64, Fused}, // some
		{Shape{Ranks: 2, Nodes: 1, RanksPerNode: 2, NVLink: nvlink.Full}, Bcast, DFloat, 64, Fused},
		{Shape{Ranks: 2, Nodes: 1, RanksPerNode: 2, NVLink: nvlink.Full}, Bcast, DFloat, 1 << 20, Fused}, // the default's range
		{Shape{Ranks: 2, Nodes: 1, RanksPerNode: 2, NVLink: nvlink.Full}, Bcast, DFloat, 64 << 20, NCCL},
	}
	for _, tc := range cases {
		rt := Compile(rules, tc.shape)
		if got := rt.Pick(tc.c, Device, tc.d, tc.bytes); got.Backend != tc.want {
			t.Errorf("%+v %v %v %d B: %v, want %v", tc.shape, tc.c, tc.d, tc.bytes, got.Backend, tc.want)
		}
	}
}

// form= and overlap= rules compile into the planes of their modes only,
// and the default sends data movement beside computation to the copy
// engines.
func TestModeConditions(t *testing.T) {
	user, err := ParseRules("allreduce:cuda:*:staged:form=nonblocking#bcast:cuda:*:mpi:form=blocking,nonblocking#"+
		"reduce_scatter:cuda:*:fused:overlap=yes:form=blocking", "env")
	if err != nil {
		t.Fatal(err)
	}
	rules := append(DefaultRules(), user...)
	blocking, nonblocking := Mode{Blocking, Alone}, Mode{Nonblocking, Alone}
	beside, besideNB := Mode{Blocking, Beside}, Mode{Nonblocking, Beside}
	cases := []struct {
		m     Mode
		c     Coll
		bytes uint64
		want  Backend
	}{
		{blocking, Allreduce, 64, Fused}, {nonblocking, Allreduce, 64, Staged},
		{blocking, Bcast, 64, MPI}, {nonblocking, Bcast, 64, MPI}, {beside, Bcast, 64, MPI},
		{nonblocking, Allgather, 64, Fused},
		{beside, Allgather, 64, Copy}, {beside, Allgather, 1 << 30, Copy}, {besideNB, Alltoall, 64, Copy},
		{blocking, Allgather, 1 << 30, NCCL}, {beside, Scatter, 64, Copy}, {blocking, Scatter, 64, NCCL},
		{beside, Allreduce, 64, Fused}, {beside, ReduceScatter, 64, Fused}, {besideNB, ReduceScatter, 64, NCCL},
	}
	for _, tc := range cases {
		rt := CompileMode(rules, Shape{}, tc.m)
		if got := rt.Pick(tc.c, Device, DFloat, tc.bytes); got.Backend != tc.want {
			t.Errorf("%+v %v %d B: %v, want %v", tc.m, tc.c, tc.bytes, got.Backend, tc.want)
		}
	}
	if _, err := ParseRules("allreduce:cuda:*:fused:overlap=maybe", "env"); err == nil {
		t.Error("overlap=maybe was accepted")
	}
	for i, m := range Modes() {
		if m.Index() != i {
			t.Errorf("mode %+v has index %d, listed at %d", m, m.Index(), i)
		}
	}
}
