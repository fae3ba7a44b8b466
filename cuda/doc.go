// Package cuda loads the CUDA driver, NVRTC, NVML and cuBLAS with dlopen and wraps what collmux needs of them (cuda.c, nvrtc.c, nvml.c, cublas.c), so that the library builds and runs without CUDA.
//
// It is C (cgo), compiled into libcollmux.so; its headers are in
// internal/cmx.
package cuda

/*
#cgo CFLAGS: -O2 -fvisibility=hidden -Wall -Wno-unused-function -I${SRCDIR}/../internal/cmx
#cgo LDFLAGS: -ldl -lpthread
*/
import "C"
