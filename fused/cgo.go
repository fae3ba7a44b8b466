//go:build collmux_lib

package fused

// The C half of this package, compiled into libcollmux.so only (the
// library builds with -tags collmux_lib; the collmux tool, which uses the
// Go half, links none of it). Its headers are in internal/cmx.

/*
#cgo CFLAGS: -O2 -fvisibility=hidden -Wall -Wno-unused-function -I${SRCDIR}/../internal/cmx -I${SRCDIR}/../include
#cgo LDFLAGS: -ldl -lpthread
*/
import "C"
