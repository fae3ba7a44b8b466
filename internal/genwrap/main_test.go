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
	cases := []struct{ table, want string }{
		{"# c\nAllreduce allreduce b sbuf rbuf cnt dtype op comm\n", `"cnt"`},
		{"Allreduce allreduce x sbuf rbuf count dtype op comm\n", "want a form"},
		{"Allreduce\n", "want name family"},
		{"Send_init send p2p p sbuf scount stype dest tag comm req\n", "no nonblocking twin Isend"},
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
