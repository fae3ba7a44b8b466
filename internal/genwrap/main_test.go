package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The committed generated files must be exactly what the generator makes
// from the table: editing collectives.tab or package mpi without running
// `make generate` fails here.
func TestGeneratedFilesUpToDate(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `make generate`", name)
		}
	}
}

func TestTableRejects(t *testing.T) {
	const ar = "family allreduce all:one all:one*\n"
	const send = "family send all:one* none\n"
	cases := []struct{ table, want string }{
		{ar + "# c\nAllreduce allreduce b sbuf rbuf cnt dtype op comm\n", `"cnt"`},
		{ar + "Allreduce allreduce x sbuf rbuf count dtype op comm\n", "want a form"},
		{"Allreduce\n", "want name family"},
		{send + "Send_init send p2p p sbuf scount stype dest tag comm req\n", "no nonblocking twin Isend"},
		{"Allreduce allreduce b sbuf rbuf count dtype op comm\n", "no family line before it"},
		{ar + "family bcast none all:one*\nAllreduce allreduce b sbuf rbuf count dtype op comm\n", "family bcast has no functions"},
		{ar + ar, "family allreduce twice"},
		{"family allreduce all:one all:one\n", "no side marked *"},
		{"family allreduce all:one* all:one*\n", "two sides marked *"},
		{"family allreduce some:one all:one*\n", `side "some:one"`},
		{"family allreduce all:many all:one*\n", `side "all:many"`},
		{"family allreduce none:one all:one*\n", `side "none:one"`},
		{"family allreduce all all:one*\n", `side "all"`},
		{"family allreduce all:one all:one* odd\n", "want family NAME SEND RECV [uneven]"},
	}
	for _, tc := range cases {
		p := filepath.Join(t.TempDir(), "t.tab")
		os.WriteFile(p, []byte(tc.table), 0o644)
		if _, err := readTable(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: want an error containing %s, got %v", tc.table, tc.want, err)
		}
	}
}

func TestNonblockingTwin(t *testing.T) {
	for name, want := range map[string]string{"Allreduce_init": "Iallreduce", "Send_init": "Isend",
		"Reduce_scatter_block_init": "Ireduce_scatter_block", "Barrier_init": "Ibarrier"} {
		if got := nonblocking(coll{name: name}); got != want {
			t.Errorf("nonblocking(%s) = %s, want %s", name, got, want)
		}
	}
}

func TestVariants(t *testing.T) {
	cases := []struct {
		c    coll
		want int
	}{
		{coll{name: "Barrier", params: []string{"comm"}}, 1},
		{coll{name: "Ibarrier", params: []string{"comm", "req"}}, 1},
		{coll{name: "Bcast", params: []string{"buf", "count", "dtype", "root", "comm"}}, 2},
		{coll{name: "Reduce_scatter", params: []string{"sbuf", "rbuf", "rcounts", "dtype", "op", "comm"}}, 2},
		{coll{name: "Recv", params: []string{"rbuf", "rcount", "rtype", "source", "tag", "comm", "status"}}, 2},
	}
	for _, tc := range cases {
		if got := len(variants(tc.c)); got != tc.want {
			t.Errorf("%s: %d variants, want %d", tc.c.name, got, tc.want)
		}
	}
	if goName("Reduce_scatter_block") != "ReduceScatterBlock" {
		t.Error("goName")
	}
}

func TestUnservedTableRejects(t *testing.T) {
	cases := []struct{ table, want string }{
		{"MPI_Put rma origin_addr (const void *origin_addr, MPI_Win win)\n", ""},
		{"MPI_Put remote origin_addr (const void *origin_addr, MPI_Win win)\n", `unknown category "remote"`},
		{"MPI_Put rma origin_addr const void *origin_addr\n", "want name category buffers (parameters)"},
		{"MPI_Put rma origin_addr (const void *origin_addr, MPI_Frob f)\n", `C type "MPI_Frob"`},
		{"MPI_Put rma win (const void *origin_addr, MPI_Win win)\n", "buffer win is not a void * parameter"},
		{"MPI_Put_c rma origin_addr (const void *origin_addr, MPI_Count n)\n", "does not follow its int-count twin MPI_Put"},
		{"MPI_Put rma origin_addr (const void *origin_addr, int n)\nMPI_Put_c rma origin_addr (const void *origin_addr, MPI_Count m)\n", "differ in parameter 1"},
		{"MPI_Put rma origin_addr (const void *origin_addr, int *n)\nMPI_Put_c rma origin_addr (const void *origin_addr, MPI_Aint *n)\n", "cannot narrow"},
		{"MPI_Put rma origin_addr (const void *origin_addr, int n)\nMPI_Put rma origin_addr (const void *origin_addr, int n)\n", "MPI_Put twice"},
	}
	for _, tc := range cases {
		p := filepath.Join(t.TempDir(), "u.tab")
		os.WriteFile(p, []byte(tc.table), 0o644)
		_, err := readUnserved(p)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.table, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: want an error containing %s, got %v", tc.table, tc.want, err)
		}
	}
}

// Where a refused call raises its error: the window's, file's,
// communicator's handler among its parameters, MPI_COMM_WORLD's without
// one, none for MPI_T.
func TestUnservedErrorHandlers(t *testing.T) {
	fns, err := readUnserved(filepath.Join("..", "..", "capi", "unserved.tab"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"MPI_Put": {"CMX_ERRH_WIN", "win"}, "MPI_Win_create": {"CMX_ERRH_COMM", "comm"}, "MPI_File_write_at": {"CMX_ERRH_FILE", "fh"},
		"MPI_Pack": {"CMX_ERRH_COMM", "comm"}, "MPI_Pack_external": {"CMX_ERRH_WORLD", "0"}, "MPI_Buffer_attach": {"CMX_ERRH_WORLD", "0"},
		"MPI_Session_attach_buffer": {"CMX_ERRH_SESSION", "session"}, "MPI_T_pvar_read": {"CMX_ERRH_NONE", "0"},
	}
	seen := 0
	for _, f := range fns {
		if w, ok := want[f.name]; ok {
			seen++
			if k, o := f.errh(); k != w[0] || o != w[1] {
				t.Errorf("%s: %s on %s, want %s on %s", f.name, k, o, w[0], w[1])
			}
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of the %d functions", seen, len(want))
	}
}

func TestParseFamily(t *testing.T) {
	cases := []struct {
		line string
		want family
	}{
		{"family gather leaf:one root:each*", family{who: [2]string{"leaf", "root"}, span: [2]string{"one", "each"}, sized: 1}},
		{"family scatterv root:v* leaf:one uneven", family{who: [2]string{"root", "leaf"}, span: [2]string{"v", "one"}, uneven: true}},
		{"family bcast none all:one*", family{who: [2]string{"none", "all"}, span: [2]string{"", "one"}, sized: 1}},
		{"family barrier none none", family{who: [2]string{"none", "none"}}},
	}
	for _, tc := range cases {
		_, got, err := parseFamily(strings.Fields(tc.line))
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v", tc.line, got, err, tc.want)
		}
	}
}
