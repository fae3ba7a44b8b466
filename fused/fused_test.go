package fused

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestCacheKey(t *testing.T) {
	k := CacheKey(90, 13000)
	if len(k) != 24 || k == CacheKey(80, 13000) || k == CacheKey(90, 12080) || k != CacheKey(90, 13000) {
		t.Errorf("cache keys must be stable and differ by arch and driver: %s", k)
	}
}

// The ahead-of-time image is found by architecture and source hash only;
// a missing or empty file, or one for another source, is passed over.
func TestLoadAOT(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	if img, _ := LoadAOT([]string{a, b}, 90); img != nil {
		t.Fatal("found an image in empty directories")
	}
	os.WriteFile(filepath.Join(a, AOTName(90)), nil, 0o644)
	os.WriteFile(filepath.Join(a, "sm_90-000000000000000000000000.cubin"), []byte("OLD"), 0o644)
	os.WriteFile(filepath.Join(b, AOTName(90)), []byte("CUBIN90"), 0o644)
	if img, p := LoadAOT([]string{a, b}, 90); string(img) != "CUBIN90" || p != filepath.Join(b, AOTName(90)) {
		t.Errorf("got %q from %q", img, p)
	}
	if img, _ := LoadAOT([]string{a, b}, 80); img != nil {
		t.Error("an sm_90 image served sm_80")
	}
	if len(SourceHash()) != 24 || !strings.HasPrefix(AOTName(90), "sm_90-"+SourceHash()) {
		t.Errorf("AOTName %s", AOTName(90))
	}
}

// The cache lives only in the user's own directories: never in a shared
// temporary directory, nor anywhere relative to the current one.
func TestCacheDir(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/x/collmux"},
		{map[string]string{"HOME": "/h"}, "/h/.cache/collmux"},
		{map[string]string{"XDG_CACHE_HOME": "rel", "HOME": "/h"}, "/h/.cache/collmux"},
		{map[string]string{"HOME": "rel"}, ""},
		{nil, ""}, // no disk cache, not os.TempDir()
	} {
		if got := CacheDir(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.env, got, tc.want)
		}
	}
}

func TestLoadCompilesOnceThenReadsCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	calls := 0
	compile := func() ([]byte, error) { calls++; return []byte("CUBIN"), nil }
	for i := 0; i < 3; i++ {
		b, how, err := Load(dir, "k", compile)
		if err != nil || string(b) != "CUBIN" || how != []Outcome{Cached, FromCache, FromCache}[i] {
			t.Fatalf("Load: %q, %v, %v", b, how, err)
		}
	}
	if calls != 1 {
		t.Errorf("compiled %d times, want once", calls)
	}
	if _, _, err := Load(dir, "other", func() ([]byte, error) { return nil, errors.New("no nvrtc") }); err == nil {
		t.Error("a failed compile must be reported")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

// Ranks that start together compile once between them: the others wait
// for the first and read its image (each racer opens the lock file
// itself, as separate processes do).
func TestLoadRacersCompileOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	var calls atomic.Int32
	compile := func() ([]byte, error) {
		calls.Add(1)
		time.Sleep(100 * time.Millisecond) // long enough for every racer to miss the cache
		return []byte("CUBIN"), nil
	}
	const racers = 8
	got := make([][]byte, racers)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _, _ = Load(dir, "k", compile)
		}()
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("%d racers compiled %d times, want once", racers, n)
	}
	for i, b := range got {
		if string(b) != "CUBIN" {
			t.Errorf("racer %d got %q", i, b)
		}
	}
}

// The host side and the kernels share abi.h: the module must start with
// it, and fused.h include it; the workspace's slot is the Go side's.
func TestSharedHeader(t *testing.T) {
	h, err := os.ReadFile("abi.h")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(Source, string(h)) {
		t.Error("the module does not start with abi.h")
	}
	c, err := os.ReadFile("fused.h")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(c), `#include "abi.h"`) {
		t.Error("fused/fused.h does not include abi.h")
	}
	if !strings.Contains(string(c), fmt.Sprintf("#define SLOT (%du << 20)", SlotBytes>>20)) {
		t.Error("fused/fused.h's SLOT and fused.SlotBytes disagree")
	}
}

func TestServes(t *testing.T) {
	for _, tc := range []struct {
		b, c  string
		bytes uint64
		ranks int
		want  bool
	}{
		{"nccl", "reduce_scatter", 1 << 30, 2, true},
		{"fused", "reduce_scatter", 8, 2, false},   // no kernel
		{"fused", "allreduce", 8 << 20, 2, true},   // the workspace's size
		{"fused", "allreduce", 16 << 20, 2, false}, // beyond it
		{"fused", "allgather", 16 << 20, 2, true},  // one rank's block is staged
		{"fused", "allgather", 32 << 20, 2, false},
		{"fused", "alltoall", 16 << 20, 2, false}, // the whole message is staged
	} {
		if got := Serves(tc.b, tc.c, tc.bytes, tc.ranks); got != tc.want {
			t.Errorf("Serves(%s, %s, %d, %d) = %v", tc.b, tc.c, tc.bytes, tc.ranks, got)
		}
	}
}
