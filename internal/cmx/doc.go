// Package cmx holds the C core's shared declarations (cmx.h, the generated zcoll.h, goexports.h) and what every layer shares: the configuration Go sets, the process state, reporting (core.c), and the way into Go (aside.c), whose runtime starts only when first needed (gostart.c).
//
// It is C (cgo), compiled into libcollmux.so; its headers are in
// internal/cmx.
package cmx

/*
#cgo CFLAGS: -O2 -fvisibility=hidden -Wall -Wno-unused-function -I${SRCDIR}/.
#cgo LDFLAGS: -ldl -lpthread
*/
import "C"
