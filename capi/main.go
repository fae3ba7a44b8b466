// Command capi is libcollmux.so: built with -buildmode=c-shared, preloaded
// into (or linked with) an MPI program. Its exported MPI_* entry points are
// C (generated from collectives.tab into zwrappers.c); Go is entered only
// to set up (configuration, policy), never on a call that stays on MPI.
package main

/*
#cgo CFLAGS: -O2 -fvisibility=hidden -Wall -Wno-unused-function
#cgo LDFLAGS: -ldl -lpthread
#include "cmx.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"collmux/dispatch"
	"collmux/mpi"
	"collmux/stats"
)

//go:generate go run ../internal/genwrap -root ..

func init() {
	// The Go runtime shares cores with MPI ranks that busy-poll; it only
	// ever runs set-up work, so it gets few threads unless told otherwise.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(2)
	}
}

var (
	config dispatch.Config
	abi    mpi.ABI
)

//export collmux_go_init
func collmux_go_init(cfg *C.cmx_config, abiC C.int) {
	abi = mpi.ABI(abiC)
	c, err := dispatch.LoadConfig(os.Getenv)
	if err != nil {
		fatalf("%v", err)
	}
	config = c
	cfg.stats = boolC(c.Stats != dispatch.StatsOff)
	cfg.log = C.int(c.Log)
}

//export collmux_go_report
func collmux_go_report(counters *C.uint64_t, ranks C.int) {
	raw := unsafe.Slice((*uint64)(unsafe.Pointer(counters)), int(C.CMX_NCOLL)*int(C.CMX_NBACKEND)*int(C.CMX_NBUCKET)*3)
	r := stats.FromCounters(raw, int(C.CMX_NBUCKET), int(ranks), abi.String())
	if err := r.Write(config.Stats == dispatch.StatsJSON, config.StatsPath); err != nil {
		fmt.Fprintf(os.Stderr, "collmux: statistics: %v\n", err)
	}
}

func boolC(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// fatalf stops the process on a configuration error: running on with a
// half-applied configuration would silently change where calls go.
func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "collmux: fatal: "+format+"\n", args...)
	os.Exit(1)
}

func main() {}
