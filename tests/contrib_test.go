// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The modulefile is named by the version (a new VERSION needs a new one)
// and, sourced by Tcl with stand-ins for the module commands, sets
// COLLMUX_LIB and the paths, and never LD_PRELOAD: that would preload
// collmux into mpirun, srun and Go programs as well.
func TestModulefile(t *testing.T) {
	file := filepath.Join(repoRoot(), "contrib", "modulefiles", "collmux", projectVersion(t))
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("no modulefile for VERSION: %v", err)
	}
	if _, err := exec.LookPath("tclsh"); err != nil {
		t.Skip("skipped: no tclsh")
	}
	standIn := filepath.Join(t.TempDir(), "module.tcl")
	os.WriteFile(standIn, []byte(`set ModulesCurrentModulefile [lindex $argv 0]
proc setenv {k v} { puts "setenv $k $v" }
proc prepend-path {k v} { puts "prepend-path $k $v" }
proc append-path {k v} { puts "append-path $k $v" }
proc module-whatis {s} {}
proc conflict {args} {}
source [lindex $argv 0]
`), 0o644)
	out, err := exec.Command("tclsh", standIn, file).CombinedOutput()
	if err != nil {
		t.Fatalf("tclsh: %v\n%s", err, out)
	}
	root := "/opt/collmux/" + projectVersion(t)
	for _, want := range []string{"setenv COLLMUX_LIB " + root + "/lib/libcollmux.so\n", "prepend-path PATH " + root + "/bin\n",
		"prepend-path CMAKE_PREFIX_PATH " + root + "\n", "prepend-path PKG_CONFIG_PATH " + root + "/lib/pkgconfig\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("modulefile does not %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "LD_PRELOAD") {
		t.Errorf("modulefile sets LD_PRELOAD:\n%s", out)
	}
}

// README's Requirements name the Go release go.mod asks for.
func TestRequirementsGoVersion(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join(repoRoot(), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var goLine string
	for _, l := range strings.Split(string(mod), "\n") {
		if v, ok := strings.CutPrefix(l, "go "); ok {
			goLine = strings.TrimSpace(v)
		}
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "Go " + goLine + " or newer"; goLine == "" || !strings.Contains(string(readme), want) {
		t.Errorf("README's Requirements lack %q (go.mod: go %q)", want, goLine)
	}
}
