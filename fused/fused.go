// Package fused holds collmux's own GPU kernels (kernels.cu, CUDA C) and
// their on-disk cache. The library embeds the source and compiles it at
// first use with NVRTC for the GPU it runs on, so building collmux needs no
// CUDA toolchain; the compiled image is cached under
// $XDG_CACHE_HOME/collmux, keyed by source, GPU architecture and driver.
// Where CMake finds nvcc, it compiles the kernels ahead of time instead
// (AOTName), and the library takes those first: no NVRTC needed.
package fused

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

//go:embed kernels.cu
var Source string

// Collectives are those the kernels implement (capi/fused.c takes only
// these); for any other, the fused backend falls back to NCCL.
var Collectives = []string{"allreduce", "allgather", "alltoall", "bcast"}

// SlotBytes is what the fused workspace holds of one call (capi/fused.h
// SLOT, which capi/fused_plan.c checks); larger calls go to NCCL.
const SlotBytes = 8 << 20

// Serves reports whether backend b runs collective c itself, for a message
// of `bytes` (counted as nccl-tests and collmux's rules count it: the whole
// message) on `ranks` ranks: the fused backend takes only its Collectives,
// and only what its workspace holds (all-gather stages one rank's block,
// the others the whole message); the other backends take everything.
func Serves(b, c string, bytes uint64, ranks int) bool {
	if b != "fused" || !slices.Contains(Collectives, c) {
		return b != "fused"
	}
	if c == "allgather" && ranks > 1 {
		bytes /= uint64(ranks)
	}
	return bytes <= SlotBytes
}

// SourceHash identifies the kernel source: the first 24 hex digits of its
// SHA-256, as CMakeLists.txt computes them for the ahead-of-time build.
func SourceHash() string {
	h := sha256.Sum256([]byte(Source))
	return hex.EncodeToString(h[:12])
}

// AOTDir is where the ahead-of-time images sit, beside the library (both
// in the build tree and installed).
const AOTDir = "collmux-kernels"

// AOTName is the file nvcc compiled the kernels into for one architecture
// (e.g. 90 for sm_90); the source hash keeps a stale image from loading.
func AOTName(arch int) string { return fmt.Sprintf("sm_%d-%s.cubin", arch, SourceHash()) }

// LoadAOT returns the ahead-of-time image for arch from the first of dirs
// that holds one, and its path; nil when none does.
func LoadAOT(dirs []string, arch int) ([]byte, string) {
	for _, d := range dirs {
		p := filepath.Join(d, AOTName(arch))
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			return b, p
		}
	}
	return nil, ""
}

// CacheKey names the compiled image of the kernels for one GPU
// architecture (e.g. 90 for sm_90) and driver version.
func CacheKey(arch, driver int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\x00sm_%d\x00driver %d", Source, arch, driver)))
	return hex.EncodeToString(h[:12])
}

// CacheDir is where compiled images live: $XDG_CACHE_HOME/collmux, or
// ~/.cache/collmux.
func CacheDir(getenv func(string) string) string {
	if d := getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "collmux")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".cache", "collmux")
	}
	return filepath.Join(os.TempDir(), "collmux-cache")
}

// Load returns the cached image for key, or compiles it with compile and
// caches it. The ranks of a node start together and would all compile at
// once (NVRTC takes about a minute here, and memory, in every rank): the
// first takes a lock file beside the image and compiles, and the others
// wait for it and read what it wrote. The image is written to a private
// temporary file and renamed into place, so a reader never sees a partial
// one. Where the cache cannot be written, or the lock taken, each rank
// compiles for itself.
func Load(dir, key string, compile func() ([]byte, error)) ([]byte, error) {
	path := filepath.Join(dir, key+".cubin")
	read := func() []byte {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return b
		}
		return nil
	}
	if b := read(); b != nil {
		return b, nil
	}
	if os.MkdirAll(dir, 0o755) == nil {
		if lock, err := os.OpenFile(filepath.Join(dir, key+".lock"), os.O_CREATE|os.O_RDWR, 0o644); err == nil {
			defer lock.Close() // releases the lock
			if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX) == nil {
				if b := read(); b != nil { // another rank compiled it meanwhile
					return b, nil
				}
			}
		}
	}
	b, err := compile()
	if err != nil {
		return nil, err
	}
	if f, err := os.CreateTemp(dir, key+".tmp*"); err == nil {
		_, werr := f.Write(b)
		if cerr := f.Close(); werr == nil && cerr == nil {
			os.Rename(f.Name(), path)
		} else {
			os.Remove(f.Name())
		}
	}
	return b, nil
}
