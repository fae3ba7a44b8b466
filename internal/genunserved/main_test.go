package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A few procedures in the description's form (not the Forum's file, which
// collmux does not carry): a put (one-sided, with a _c twin), a collective
// collmux intercepts, a function without a buffer, a Fortran-only one, a
// callback, a pack with an in-out count, an address-only function.
const sample = `{
 "mpi_put": {"attributes": {"c_expressible": true, "callback": false, "predefined_function": null}, "name": "MPI_Put", "return_kind": "ERROR_CODE",
  "parameters": [
   {"name": "origin_addr", "kind": "BUFFER", "constant": true, "param_direction": "in", "pointer": null, "length": null, "large_only": false, "suppress": ""},
   {"name": "origin_count", "kind": "POLYXFER_NUM_ELEM_NNI", "constant": false, "param_direction": "in", "pointer": null, "length": null, "large_only": false, "suppress": ""},
   {"name": "target_disp", "kind": "RMA_DISPLACEMENT_NNI", "constant": false, "param_direction": "in", "pointer": null, "length": null, "large_only": false, "suppress": ""},
   {"name": "win", "kind": "WINDOW", "constant": false, "param_direction": "in", "pointer": null, "length": null, "large_only": false, "suppress": ""},
   {"name": "ierror", "kind": "ERROR_CODE", "constant": false, "param_direction": "out", "pointer": null, "length": null, "large_only": false, "suppress": "c_parameter lis_parameter"}]},
 "mpi_bcast": {"attributes": {"c_expressible": true, "callback": false, "predefined_function": null}, "name": "MPI_Bcast", "return_kind": "ERROR_CODE",
  "parameters": [{"name": "buffer", "kind": "BUFFER", "constant": false, "param_direction": "inout", "pointer": null, "length": null, "large_only": false, "suppress": ""}]},
 "mpi_comm_rank": {"attributes": {"c_expressible": true, "callback": false, "predefined_function": null}, "name": "MPI_Comm_rank", "return_kind": "ERROR_CODE",
  "parameters": [{"name": "comm", "kind": "COMMUNICATOR", "constant": false, "param_direction": "in", "pointer": null, "length": null, "large_only": false, "suppress": ""},
   {"name": "rank", "kind": "RANK", "constant": false, "param_direction": "out", "pointer": null, "length": null, "large_only": false, "suppress": ""}]},
 "mpi_sizeof": {"attributes": {"c_expressible": false, "callback": false, "predefined_function": null}, "name": "MPI_Sizeof", "return_kind": "ERROR_CODE",
  "parameters": [{"name": "x", "kind": "BUFFER", "constant": false, "param_direction": "in", "pointer": null, "length": null, "large_only": false, "suppress": ""}]},
 "mpi_user_function": {"attributes": {"c_expressible": true, "callback": true, "predefined_function": null}, "name": "MPI_User_function", "return_kind": "NOTHING",
  "parameters": [{"name": "invec", "kind": "BUFFER", "constant": false, "param_direction": "in", "pointer": null, "length": null, "large_only": false, "suppress": ""}]},
 "mpi_pack_external": {"attributes": {"c_expressible": true, "callback": false, "predefined_function": null}, "name": "MPI_Pack_external", "return_kind": "ERROR_CODE",
  "parameters": [
   {"name": "datarep", "kind": "STRING", "constant": true, "param_direction": "in", "pointer": null, "length": "*", "large_only": false, "suppress": ""},
   {"name": "inbuf", "kind": "BUFFER", "constant": "true", "param_direction": "in", "pointer": null, "length": null, "large_only": false, "suppress": ""},
   {"name": "position", "kind": "POLYLOCATION", "constant": false, "param_direction": "inout", "pointer": null, "length": null, "large_only": false, "suppress": ""}]},
 "mpi_get_address": {"attributes": {"c_expressible": true, "callback": false, "predefined_function": null}, "name": "MPI_Get_address", "return_kind": "ERROR_CODE",
  "parameters": [{"name": "location", "kind": "BUFFER", "constant": true, "param_direction": "in", "pointer": null, "length": null, "large_only": false, "suppress": ""},
   {"name": "address", "kind": "DISPLACEMENT", "constant": false, "param_direction": "out", "pointer": null, "length": null, "large_only": false, "suppress": ""}]}
}`

func rows(t *testing.T, out []byte) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		m[f[0]] = strings.Join(f[1:], " ")
	}
	return m
}

func TestSample(t *testing.T) {
	out, err := generate([]byte(sample), "sample", strings.NewReader("# c\nBcast bcast b buf count dtype root comm\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := rows(t, out)
	want := map[string]string{
		"MPI_Put":             "rma origin_addr (const void *origin_addr, int origin_count, MPI_Aint target_disp, MPI_Win win)",
		"MPI_Put_c":           "rma origin_addr (const void *origin_addr, MPI_Count origin_count, MPI_Aint target_disp, MPI_Win win)",
		"MPI_Pack_external":   "pack inbuf (const char datarep[], const void *inbuf, MPI_Aint *position)",
		"MPI_Pack_external_c": "pack inbuf (const char datarep[], const void *inbuf, MPI_Count *position)",
		"MPI_Get_address":     "address location (const void *location, MPI_Aint *address)",
		// MPI 4.1 functions the description lacks
		"MPI_Comm_attach_buffer":      "bsend buffer (MPI_Comm comm, void *buffer, int size)",
		"MPI_Comm_attach_buffer_c":    "bsend buffer (MPI_Comm comm, void *buffer, MPI_Count size)",
		"MPI_Session_attach_buffer":   "bsend buffer (MPI_Session session, void *buffer, int size)",
		"MPI_Session_attach_buffer_c": "bsend buffer (MPI_Session session, void *buffer, MPI_Count size)",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %q, want %q", name, got[name], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d rows, want %d (no Bcast, Comm_rank, Sizeof, User_function):\n%s", len(got), len(want), out)
	}
	for _, s := range []string{"# description: sample\n", "# added from the MPI 4.1 standard, which the description predates: MPI_Comm_attach_buffer, MPI_Session_attach_buffer\n"} {
		if !strings.Contains(string(out), s) {
			t.Errorf("the header lacks %q", s)
		}
	}
	// rows in category order: rma before pack before bsend before address
	order := []string{"MPI_Put ", "MPI_Pack_external ", "MPI_Comm_attach_buffer ", "MPI_Get_address "}
	last := -1
	for _, o := range order {
		i := strings.Index(string(out), "\n"+o)
		if i < last {
			t.Errorf("%s is out of order", o)
		}
		last = i
	}
}

func TestRejects(t *testing.T) {
	cases := []struct{ json, want string }{
		{`{"x": {"attributes": {"c_expressible": true}, "name": "MPI_Frob", "parameters": [{"name": "b", "kind": "BUFFER", "param_direction": "in"}]}}`,
			"MPI_Frob takes a buffer and no category fits it"},
		{`{"x": {"attributes": {"c_expressible": true}, "name": "MPI_Put", "parameters": [{"name": "b", "kind": "BUFFER", "param_direction": "in"}, {"name": "w", "kind": "WINDOW_HANDLE_NEW", "param_direction": "in"}]}}`,
			"kind WINDOW_HANDLE_NEW"},
		{`{}`, "no procedures"},
		{`[`, "the API description"},
	}
	for _, tc := range cases {
		if _, err := generate([]byte(tc.json), "", strings.NewReader("")); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want an error containing %q, got %v", tc.json, tc.want, err)
		}
	}
}

// With the description at hand ($COLLMUX_MPI_APIS: pympistandard's
// apis.json), the committed table is what it makes.
func TestTableUpToDate(t *testing.T) {
	path := os.Getenv("COLLMUX_MPI_APIS")
	if path == "" {
		t.Skip("skipped: set COLLMUX_MPI_APIS to pympistandard's apis.json to check capi/unserved.tab against it")
	}
	api, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join("..", "..")
	committed, err := os.ReadFile(filepath.Join(root, "capi", "unserved.tab"))
	if err != nil {
		t.Fatal(err)
	}
	source := ""
	for _, line := range strings.Split(string(committed), "\n") {
		if s, ok := strings.CutPrefix(line, "# description: "); ok {
			source = s
		}
	}
	f, err := os.Open(filepath.Join(root, "capi", "collectives.tab"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, err := generate(api, source, f)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != string(committed) {
		t.Error("capi/unserved.tab is not what genunserved makes from $COLLMUX_MPI_APIS: regenerate it")
	}
}
