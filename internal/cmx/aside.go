//go:build collmux_lib

package cmx

// #include "cmx.h"
import "C"

// The thread that runs collmux's start-up and its C's calls into Go
// (aside.c says why): a goroutine that enters C and stays there.
func init() { go func() { C.cmx_aside_serve() }() }
