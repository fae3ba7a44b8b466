// Package dispatch decides where each intercepted collective goes. It owns
// the vocabulary of a decision (collective, backend, memory kind), the
// configuration read from COLLMUX_* variables, and the per-communicator
// route table that the C hot path reads without entering Go.
package dispatch

import "fmt"

//go:generate go run ../internal/genwrap -root ..

// Coll is an intercepted collective; its values match the C enum CMX_COLL_*.
type Coll int

func (c Coll) String() string {
	if c >= 0 && int(c) < len(collNames) {
		return collNames[c]
	}
	return fmt.Sprintf("coll(%d)", int(c))
}

// ParseColl finds a collective by its lower-case name ("allreduce").
func ParseColl(s string) (Coll, bool) {
	for i, n := range collNames {
		if n == s {
			return Coll(i), true
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
	NumBackend
)

var backendNames = [...]string{"mpi", "nccl", "fused", "staged"}

func (b Backend) String() string {
	if b >= 0 && b < NumBackend {
		return backendNames[b]
	}
	return fmt.Sprintf("backend(%d)", int(b))
}

// ParseBackend finds a backend by name.
func ParseBackend(s string) (Backend, bool) {
	for i, n := range backendNames {
		if n == s {
			return Backend(i), true
		}
	}
	return 0, false
}

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

func (m Mem) String() string {
	if m >= 0 && m < NumMem {
		return memNames[m]
	}
	return fmt.Sprintf("mem(%d)", int(m))
}
