package main

import (
	"os/exec"
	"strings"
	"testing"
)

// What is loaded into MPI processes stays lean: libcollmux.so depends on
// the standard library and golang.org/x/sys only. (go-nvml is kept out: its
// cgo leaves nvml* symbols undefined in a shared object, so programs could
// not link libcollmux; the library asks NVML through cuda/nvml.c.)
func TestLibraryDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-tags", "collmux_lib", "-deps", "collmux/capi").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(pkg, "/")
		if !strings.Contains(first, ".") || strings.HasPrefix(pkg, "golang.org/x/sys/") {
			continue // standard library (no dot in the first element), collmux itself is "collmux/..."
		}
		t.Errorf("libcollmux.so depends on %s", pkg)
	}
}
