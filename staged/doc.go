// Package staged is the staged backend: device buffers copied to host memory, the call run by the real MPI on the copies, results copied back (staged.c). It takes every call no GPU path expresses, point-to-point included, with MPI's own matching.
//
// It is C (cgo), compiled into libcollmux.so; its headers are in
// internal/cmx.
package staged

/*
#cgo CFLAGS: -O2 -fvisibility=hidden -Wall -Wno-unused-function -I${SRCDIR}/../internal/cmx
#cgo LDFLAGS: -ldl -lpthread
*/
import "C"
