//go:build collmux_lib

package cmx

// The library's link wraps the two functions through which the Go runtime
// starts (gostart.c): only the library has gostart.c's wrappers.

/*
#cgo LDFLAGS: -Wl,--wrap=pthread_create -Wl,--wrap=_cgo_wait_runtime_init_done
*/
import "C"
