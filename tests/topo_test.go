// SPDX-License-Identifier: Apache-2.0

package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// `collmux topo` finds NCCL and MPI as the library does: NCCL by dlopen
// (COLLMUX_NCCL_LIB, else libnccl.so.2 on the linker's search path, so
// LD_LIBRARY_PATH counts) and its ncclGetVersion, here a stand-in's; each
// installed MPI by its own MPI_Get_library_version, whose version must be
// the one that MPI's launcher reports.
func TestTopoLibraries(t *testing.T) {
	tool := buildFile(t, "collmux")
	fake := stubLib(t, "fakenccl", "libnccl.so.2")
	fakeLib := filepath.Join(fake, "libnccl.so.2")
	systemNCCL := "" // what the system's linker cache would give, if anything
	if out, _ := exec.Command("/sbin/ldconfig", "-p").Output(); strings.Contains(string(out), "libnccl.so.2 ") {
		systemNCCL = "any"
	}
	var wantMPI []string
	for _, m := range impls(t) {
		out, _ := exec.Command(m.mpirun, "--version").Output()
		v := regexp.MustCompile(`(?:\(OpenRTE\)|\(Open MPI\)|Version:)\s+(\S+)`).FindSubmatch(out)
		if v == nil {
			t.Fatalf("%s --version: %s", m.mpirun, out)
		}
		wantMPI = append(wantMPI, map[string]string{"openmpi": "Open MPI v", "mpich": "MPICH Version: ", "mpi-abi": "MPICH Version: "}[m.name]+string(v[1]))
	}
	for _, tc := range []struct {
		name string
		env  []string
		nccl string // "" none, "any" whatever the system has
	}{
		{"search-path", []string{"LD_LIBRARY_PATH=" + fake}, "2.19.3 (" + fakeLib + ")"},
		{"named", []string{"COLLMUX_NCCL_LIB=" + fakeLib}, "2.19.3 (" + fakeLib + ")"},
		{"named-absent", []string{"COLLMUX_NCCL_LIB=" + filepath.Join(t.TempDir(), "libnccl.so.2")}, ""},
		{"system", nil, systemNCCL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(tool, "topo", "--json")
			cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH=", "COLLMUX_NCCL_LIB=")
			cmd.Env = append(cmd.Env, tc.env...)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("collmux topo --json: %v\n%s", err, out)
			}
			var m struct{ NCCL, MPI string }
			if err := json.Unmarshal(out, &m); err != nil {
				t.Fatal(err)
			}
			if tc.nccl != "any" && m.NCCL != tc.nccl {
				t.Errorf("nccl %q, want %q", m.NCCL, tc.nccl)
			}
			for _, w := range wantMPI {
				if !strings.Contains(m.MPI, w) {
					t.Errorf("mpi %q lacks %q", m.MPI, w)
				}
			}
		})
	}
}
