package main

import (
	"os/exec"
	"strings"
	"testing"
)

// What is loaded into MPI processes stays lean: libcollmux.so may depend
// on the standard library, golang.org/x/sys and go-nvml only (the command
// line tool may use more).
func TestLibraryDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "collmux/capi").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(pkg, "/")
		if !strings.Contains(first, ".") || strings.HasPrefix(pkg, "golang.org/x/sys/") || strings.HasPrefix(pkg, "github.com/NVIDIA/go-nvml/") {
			continue // standard library (no dot in the first element), collmux itself is "collmux/..."
		}
		t.Errorf("libcollmux.so depends on %s", pkg)
	}
}
