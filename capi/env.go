//go:build collmux_lib

package main

/*
#include <stdlib.h>
extern char **environ;
*/
import "C"

import "unsafe"

// The library reads its variables from C's environment as it is when it
// reads them, not through os.Getenv: Go copies the environment once, as
// its runtime starts, from the array the process started with, and the
// runtime now starts in MPI_Init (internal/cmx/gostart.c), when setenv and
// unsetenv may have changed that array in part. C's is the one the
// program and collmux's C read; a variable the program sets before
// MPI_Init (an mpi4py script assigning os.environ before it imports MPI)
// is read too.

// getenv is os.Getenv over C's environment.
func getenv(name string) string {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	if v := C.getenv(cs); v != nil {
		return C.GoString(v)
	}
	return ""
}

// environ is os.Environ over C's environment.
func environ() []string {
	var env []string
	for p := unsafe.Pointer(C.environ); p != nil && *(**C.char)(p) != nil; p = unsafe.Add(p, unsafe.Sizeof(p)) {
		env = append(env, C.GoString(*(**C.char)(p)))
	}
	return env
}
