// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// projectVersion is the file VERSION, the one place the version is written.
func projectVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// buildFile is a file of the CMake build; a test needing it says "skipped"
// without it, as it runs before `make build` in a fresh checkout.
func buildFile(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(repoRoot(), "build", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("skipped: %s not built (run make build)", p)
	}
	return p
}

// The library's SONAME carries the major version, so that a program
// linked against it records libcollmux.so.<major>, which `make install`
// provides as a link.
func TestSoname(t *testing.T) {
	f, err := elf.Open(buildFile(t, "libcollmux.so"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sonames, err := f.DynString(elf.DT_SONAME)
	if err != nil {
		t.Fatal(err)
	}
	major, _, _ := strings.Cut(projectVersion(t), ".")
	if want := "libcollmux.so." + major; len(sonames) != 1 || sonames[0] != want {
		t.Errorf("SONAME %q, want %q", sonames, want)
	}
}

// The library and the tool built by CMake both carry VERSION: `collmux
// version` prints its own and the one it reads from the library beside it.
func TestVersionFromVersionFile(t *testing.T) {
	tool, lib := buildFile(t, "collmux"), buildFile(t, "libcollmux.so")
	cmd := exec.Command(tool, "version")
	cmd.Env = append(os.Environ(), "COLLMUX_LIB="+lib)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("collmux version: %v\n%s", err, out)
	}
	v := projectVersion(t)
	for _, want := range []string{"collmux  " + v + "\n", "library  " + v + " (" + lib} {
		if !strings.Contains(string(out), want) {
			t.Errorf("collmux version lacks %q:\n%s", want, out)
		}
	}
}
