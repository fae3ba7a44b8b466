// Package gate is the arrival gate of the device backends under MPI_THREAD_MULTIPLE: a device collective's GPU work starts only once every rank of a node has entered the call, through counters in a page of shared memory (gate.c).
//
// It is C (cgo), compiled into libcollmux.so; its headers are in
// internal/cmx.
package gate

/*
#cgo CFLAGS: -O2 -fvisibility=hidden -Wall -Wno-unused-function -I${SRCDIR}/../internal/cmx
#cgo LDFLAGS: -ldl -lpthread
*/
import "C"
