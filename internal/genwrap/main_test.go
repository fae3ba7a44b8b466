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

func TestTableRejectsUnknownParameter(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "t.tab")
	os.WriteFile(p, []byte("# c\nAllreduce sbuf rbuf cnt dtype op comm\n"), 0o644)
	if _, err := readTable(p); err == nil || !strings.Contains(err.Error(), `"cnt"`) {
		t.Fatalf("want an error naming cnt, got %v", err)
	}
}

func TestVariants(t *testing.T) {
	cases := []struct {
		c    coll
		want int
	}{
		{coll{"Barrier", []string{"comm"}}, 1},
		{coll{"Bcast", []string{"buf", "count", "dtype", "root", "comm"}}, 2},
		{coll{"Reduce_scatter", []string{"sbuf", "rbuf", "rcounts", "dtype", "op", "comm"}}, 2},
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
