// Package dispatch decides where each intercepted collective goes. It owns
// the vocabulary of a decision (collective, backend, memory kind), the
// configuration read from COLLMUX_* variables, and the per-communicator
// route table that the C hot path reads without entering Go.
package dispatch

import "fmt"

//go:generate go run ../internal/genwrap -root ..

// Coll is a family of intercepted functions (a collective in all its forms,
// or a kind of point-to-point call); its values match the C enum CMX_COLL_*.
type Coll int

func (c Coll) String() string { return enumString(c, collNames[:], "coll") }

// Collective reports whether c is collective over a communicator: the
// point-to-point families (send, recv, sendrecv) and Reduce_local are not,
// so nothing on their path may communicate.
func (c Coll) Collective() bool { return c >= 0 && int(c) < len(collCollective) && collCollective[c] }

// ParseColl finds a collective by its lower-case name ("allreduce").
func ParseColl(s string) (Coll, bool) { return enumParse[Coll](s, collNames[:]) }

// enumString and enumParse map the small integer enums of this package
// (their values are shared with C) to and from their names.
func enumString[T ~int](v T, names []string, what string) string {
	if v >= 0 && int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", what, int(v))
}

func enumParse[T ~int](s string, names []string) (T, bool) {
	for i, n := range names {
		if n == s {
			return T(i), true
		}
	}
	return 0, false
}

// Backend is a path a collective can take; values match CMX_BACKEND_*.
type Backend int

const (
	// MPI is the real MPI underneath, through PMPI.
	MPI Backend = iota
	// NCCL runs device-buffer collectives on NCCL.
	NCCL
	// Fused runs collmux's own peer-to-peer GPU kernels.
	Fused
	// Staged copies device buffers to host, runs MPI, and copies back.
	Staged
	// Copy moves data between the GPUs of a node on their copy engines,
	// taking no SM from the program's kernels.
	Copy
	NumBackend
)

var backendNames = [...]string{"mpi", "nccl", "fused", "staged", "copy"}

func (b Backend) String() string { return enumString(b, backendNames[:], "backend") }

// ParseBackend finds a backend by name.
func ParseBackend(s string) (Backend, bool) { return enumParse[Backend](s, backendNames[:]) }

// Mem is where a call's buffers live; values match CMX_MEM_*.
type Mem int

const (
	Host Mem = iota
	Device
	Managed
	Mixed
	NumMem
)

var memNames = [...]string{"host", "cuda", "managed", "mixed"}

func (m Mem) String() string { return enumString(m, memNames[:], "mem") }
