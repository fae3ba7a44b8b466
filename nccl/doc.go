// Package nccl is the NCCL backend: device collectives, nonblocking ones included, on an NCCL communicator made for each MPI communicator, with libnccl loaded by dlopen (nccl.c).
//
// It is C (cgo), compiled into libcollmux.so; its headers are in
// internal/cmx.
package nccl

/*
#cgo CFLAGS: -O2 -fvisibility=hidden -Wall -Wno-unused-function -I${SRCDIR}/../internal/cmx
#cgo LDFLAGS: -ldl -lpthread
*/
import "C"
