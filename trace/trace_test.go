// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func rankFile(t *testing.T, dir string, rank int, calls []Call) string {
	t.Helper()
	p := filepath.Join(dir, "tr."+string(rune('0'+rank))+".json")
	m := Meta{Tool: "collmux", Rank: rank, Ranks: 2, Clock: Clock, EpochUTC: int64(1000 + rank), Dropped: uint64(rank)}
	if err := WriteFile(p, m, calls); err != nil {
		t.Fatal(err)
	}
	return p
}

// Each rank's file is valid JSON with its calls as "X" events; the merge
// keeps every rank's events as its own process, sorted by time.
func TestMerge(t *testing.T) {
	dir := t.TempDir()
	r0 := rankFile(t, dir, 0, []Call{
		{Name: "MPI_Allreduce", Family: "allreduce", StartNS: 3000, DurNS: 1500, TID: 7, Backend: "mpi", Mem: "host", Form: "blocking", Bytes: 64},
		{Name: "MPI_Bcast", Family: "bcast", StartNS: 9000, DurNS: 10, TID: 7, Backend: "staged", Mem: "cuda", Form: "blocking", RC: 5},
	})
	r1 := rankFile(t, dir, 1, []Call{
		{Name: "MPI_Iallreduce", Family: "allreduce", StartNS: 1000, DurNS: 200, TID: 9, Backend: "nccl", Mem: "cuda", Form: "nonblocking"},
	})
	st, err := os.Stat(r0)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v", r0, err, st.Mode())
	}
	f0, err := Read(r0)
	if err != nil {
		t.Fatal(err)
	}
	var x []Event
	for _, e := range f0.TraceEvents {
		if e.Ph == "X" {
			x = append(x, e)
		}
	}
	if len(x) != 2 || x[0].Name != "MPI_Allreduce" || x[0].Cat != "allreduce" || x[0].TS != 3 || x[0].Dur != 1.5 || x[0].TID != 7 || x[0].PID != 0 {
		t.Fatalf("rank 0's events: %+v", x)
	}
	var args struct {
		Backend, Mem, Form string
		Bytes              uint64
		RC                 int
	}
	if err := json.Unmarshal(x[1].Args, &args); err != nil || args.Backend != "staged" || args.Mem != "cuda" || args.RC != 5 {
		t.Fatalf("args %s: %+v %v", x[1].Args, args, err)
	}

	out := filepath.Join(dir, "all.json")
	m, err := MergeFiles(out, []string{r0, r1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.TraceEvents) != len(m.TraceEvents) || got.OtherData.Dropped != 1 || len(got.OtherData.Merged) != 2 || got.OtherData.EpochUTC != 1000 {
		t.Fatalf("merged: %d events, %+v", len(got.TraceEvents), got.OtherData)
	}
	var names []string
	pids := map[int]int{}
	seenX := false
	for _, e := range got.TraceEvents {
		if e.Ph == "M" && seenX {
			t.Errorf("metadata event %s after the calls", e.Name)
		}
		if e.Ph == "X" {
			seenX = true
			names = append(names, e.Name)
			pids[e.PID]++
		}
	}
	if want := []string{"MPI_Iallreduce", "MPI_Allreduce", "MPI_Bcast"}; len(names) != 3 || names[0] != want[0] || names[1] != want[1] || names[2] != want[2] {
		t.Errorf("merged calls in order %v, want %v", names, want)
	}
	if pids[0] != 2 || pids[1] != 1 {
		t.Errorf("events per rank %v", pids)
	}
	// merging the merge with a rank it already holds is refused
	if _, err := MergeFiles(filepath.Join(dir, "again.json"), []string{out, r1}); err == nil {
		t.Error("rank 1 merged twice")
	}
	// a symbolic link is not followed
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep"), 0o600)
	link := filepath.Join(dir, "link.json")
	os.Symlink(victim, link)
	if _, err := MergeFiles(link, []string{r0}); err == nil {
		t.Error("wrote through a symbolic link")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("victim now %q", b)
	}
}
