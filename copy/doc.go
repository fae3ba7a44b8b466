// Package copy is the copy-engine backend: the collectives that only move data between the GPUs of one node (all-gather, all-to-all, bcast, gather, scatter) run as peer copies on the copy engines, between the program's own buffers mapped by CUDA IPC, so that they take no SM from the kernels running beside them (copy.c).
//
// It is C (cgo), compiled into libcollmux.so; its headers are in
// internal/cmx.
package copy

/*
#cgo CFLAGS: -O2 -fvisibility=hidden -Wall -Wno-unused-function -I${SRCDIR}/../internal/cmx
#cgo LDFLAGS: -ldl -lpthread
*/
import "C"
