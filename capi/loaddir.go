//go:build collmux_lib

package main

/*
#include <limits.h>
#include <unistd.h>

// The directory the process was in when it loaded the library, recorded by
// a constructor: it runs as the library loads, before the program's main
// (or, when dlopen'ed, inside dlopen), so before the program can chdir. A
// library preloaded by a relative path has a relative path in dladdr, and
// that path means something only from this directory. (Go's own init runs
// on a thread of its own, possibly after main has started.)
static char cmx_load_cwd[PATH_MAX];

__attribute__((constructor)) static void cmx_record_load_cwd(void)
{
	if (!getcwd(cmx_load_cwd, sizeof cmx_load_cwd))
		cmx_load_cwd[0] = 0;
}

static const char *cmx_load_dir(void) { return cmx_load_cwd; }
*/
import "C"

// loadDir is the directory the process was in when it loaded the library;
// "" if unknown.
func loadDir() string { return C.GoString(C.cmx_load_dir()) }
