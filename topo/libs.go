package topo

// The NCCL and MPI libraries a program here would load, found as the
// library finds them: dlopen by soname (LD_LIBRARY_PATH, the linker's
// cache, the system folders), then the library's own answer for its
// version. dlopen runs here, in the tool, where no MPI is initialised:
// MPI_Get_library_version is one of the calls MPI allows before MPI_Init.

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>

static void *lib_open(const char *name) { return dlopen(name, RTLD_NOW | RTLD_LOCAL); }

static const char *lib_path(void *h)
{
	struct link_map *m = NULL;
	return dlinfo(h, RTLD_DI_LINKMAP, &m) == 0 && m ? m->l_name : NULL;
}

static int nccl_version(void *h, int *v)
{
	int (*f)(int *) = (int (*)(int *))dlsym(h, "ncclGetVersion");
	return f ? f(v) : -1;
}

enum { VERSION_MAX = 16384 }; // MPI_MAX_LIBRARY_VERSION_STRING: 256 in Open MPI, 8192 in MPICH

static int mpi_version(void *h, char *buf, int *len)
{
	int (*f)(char *, int *) = (int (*)(char *, int *))dlsym(h, "MPI_Get_library_version");
	return f ? f(buf, len) : -1;
}
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"
)

// openLib dlopens name and returns its handle and the file it came from.
func openLib(name string) (unsafe.Pointer, string, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	h := C.lib_open(cs)
	if h == nil {
		return nil, "", fmt.Errorf("%s", C.GoString(C.dlerror()))
	}
	path := name
	if p := C.lib_path(h); p != nil && C.GoString(p) != "" {
		path = C.GoString(p)
	}
	return h, path, nil
}

// ncclCode renders ncclGetVersion's number: major*10000 + minor*100 +
// patch since NCCL 2.9, major*1000 + minor*100 + patch before.
func ncclCode(v int) string {
	if v >= 10000 {
		return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/1000, v%1000/100, v%100)
}

// ncclVersion loads the NCCL the library would (COLLMUX_NCCL_LIB, else
// libnccl.so.2 by the linker's search) and asks its version:
// "2.28.3 (/path/libnccl.so.2)"; "" when there is none.
func ncclVersion() string {
	name := os.Getenv("COLLMUX_NCCL_LIB")
	if name == "" {
		name = "libnccl.so.2"
	}
	h, path, err := openLib(name)
	if err != nil {
		return ""
	}
	var v C.int
	if C.nccl_version(h, &v) != 0 {
		return fmt.Sprintf("unknown version, no ncclGetVersion (%s)", path)
	}
	return fmt.Sprintf("%s (%s)", ncclCode(int(v)), path)
}

// mpiSonames are the names MPI programs link their MPI by: Open MPI,
// MPICH, and the MPICH family's other name (Intel MPI, MPICH builds that
// install libmpi.so.12).
var mpiSonames = []string{"libmpi.so.40", "libmpich.so.12", "libmpi.so.12"}

// mpiVersion loads each MPI library a program here could link and asks
// its MPI_Get_library_version (first line): "Open MPI v4.1.4, ...
// (/path/libmpi.so.40); MPICH Version: 4.0.2 (/path/libmpich.so.12)";
// one entry per file, "" when there is none. collmux serves whichever the
// program loads.
func mpiVersion() string {
	var out []string
	seen := map[string]bool{}
	buf := (*C.char)(C.malloc(C.VERSION_MAX))
	defer C.free(unsafe.Pointer(buf))
	for _, name := range mpiSonames {
		h, path, err := openLib(name)
		if err != nil {
			continue
		}
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			real = path
		}
		if seen[real] {
			continue
		}
		seen[real] = true
		var n C.int
		v := "unknown version"
		if C.mpi_version(h, buf, &n) == 0 {
			line, _, _ := strings.Cut(C.GoString(buf), "\n")
			v = strings.Join(strings.Fields(line), " ")
		}
		out = append(out, fmt.Sprintf("%s (%s)", v, path))
	}
	return strings.Join(out, "; ")
}
