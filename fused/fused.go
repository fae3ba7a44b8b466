// Package fused holds collmux's own GPU kernels (CUDA C: the collectives
// in kernels.cu, the fused computation + collective operations in ops.cu,
// one module) and their on-disk cache. The library embeds the source and compiles it at
// first use with NVRTC for the GPU it runs on, so building collmux needs no
// CUDA toolchain; the compiled image is cached under
// $XDG_CACHE_HOME/collmux or ~/.cache/collmux (without either, not at
// all), keyed by source, GPU architecture and driver.
// Where CMake finds nvcc, it compiles the kernels ahead of time instead
// (AOTName), and the library takes those first: no NVRTC needed.
package fused

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"collmux/internal/privfile"
)

//go:embed abi.h
var abi string

//go:embed kernels.cu
var collectives string

//go:embed ops.cu
var ops string

// Source is the module's CUDA C: abi.h (what the host side shares), then
// kernels.cu, then ops.cu, which uses its helpers (CMakeLists.txt and
// scripts/gpu-test.sh join them alike for nvcc).
var Source = abi + collectives + ops

// Collectives are those the kernels implement (fused/host.c takes only
// these); for any other, the fused backend falls back to NCCL.
var Collectives = []string{"allreduce", "allgather", "alltoall", "bcast"}

// SlotBytes is what the fused workspace holds of one call (fused/fused.h
// SLOT, which fused/plan.c checks); larger calls go to NCCL.
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

// AOTDirFor is the folder of ahead-of-time images beside the library at
// lib, the path dladdr gives. That path is relative where the library was
// preloaded by a relative path, and relative to the directory the process
// was in then (cwd), not to wherever the program has moved since; "" when
// it cannot be made absolute (no path, or cwd unknown).
func AOTDirFor(lib, cwd string) string {
	if lib == "" {
		return "" // filepath.Dir would make it ".", the current directory
	}
	if !filepath.IsAbs(lib) {
		if !filepath.IsAbs(cwd) {
			return ""
		}
		lib = filepath.Join(cwd, lib)
	}
	return filepath.Join(filepath.Dir(lib), AOTDir)
}

// LoadAOT returns the ahead-of-time image for arch from the first of dirs
// that holds one, and its path; nil when none does. Whoever can write an
// image chooses the code the GPU runs, so a folder or image that anyone
// but this user or root could have written, or a symbolic link, is passed
// over with a warning (root: installed images belong to it); so is a
// relative folder, which would be looked up from wherever the program is.
func LoadAOT(dirs []string, arch int) ([]byte, string) {
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			continue
		}
		fi, err := os.Lstat(d)
		if err != nil {
			continue // none there: built without nvcc
		}
		if err := privfile.Trusted(d, fi, true, true); err != nil {
			warnf("the fused kernels compiled ahead of time are not used: %v", err)
			continue
		}
		p := filepath.Join(d, AOTName(arch))
		b, err := privfile.ReadTrusted(p, true)
		if err == nil && len(b) > 0 {
			return b, p
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			warnf("the fused kernels compiled ahead of time are not used: %v", err)
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
// ~/.cache/collmux; "" (no disk cache) where neither variable holds an
// absolute path. Never a shared temporary directory: the key is
// predictable, so anyone could plant an image there for the next job to
// run, or hold its lock.
func CacheDir(getenv func(string) string) string {
	if d := getenv("XDG_CACHE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "collmux")
	}
	if h := getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".cache", "collmux")
	}
	return ""
}

// Outcome says where Load's image came from.
type Outcome int

const (
	FromCache Outcome = iota // read from the cache
	Cached                   // compiled now and written to the cache
	Private                  // compiled now, for this process only
)

// Warn receives the reasons for passing over a cache or an image (the
// library prints them); nil drops them.
var Warn func(msg string)

func warnf(format string, args ...any) {
	if Warn != nil {
		Warn(fmt.Sprintf(format, args...))
	}
}

// LockWait is how long Load waits for the compile lock before compiling
// for itself: a rank stuck while holding it must not stall the job
// forever (one that dies drops it: flock). NVRTC took 38-77 s on the H200
// machine as the module grew, and past two minutes once there
// (docs/results/gpu-2026-12-01-session17): a wait as short as the compile
// had every waiting rank start its own just as the first finished, each
// slower for the others and as large in memory. A variable for tests.
var LockWait = 10 * time.Minute

// Load returns the cached image for key, or compiles it with compile and
// caches it. The ranks of a node start together and would all compile at
// once (NVRTC takes a minute or two here, and memory, in every rank): the
// first takes a lock file beside the image and compiles, and the others
// wait for it and read what it wrote.
//
// The cache runs whatever it holds, so it trusts only what this user
// wrote: dir must be a directory of the user's own, not a symbolic link
// (it is made 0700); an image and its digest must be regular files of the
// user's, writable by no one else, and agree. An image that does not
// match its digest is deleted and compiled again. Where dir is "", is not
// the user's, or the lock is not had within LockWait, the rank compiles
// for itself and caches nothing (with a warning but for "").
func Load(dir, key string, compile func() ([]byte, error)) ([]byte, Outcome, error) {
	private := func() ([]byte, Outcome, error) {
		b, err := compile()
		return b, Private, err
	}
	if dir == "" {
		return private()
	}
	if err := privfile.PrivateDir(dir); err != nil {
		warnf("the fused kernels are compiled without a cache: %v", err)
		return private()
	}
	c := cache{dir, key}
	if b, err := c.read(); err == nil {
		return b, FromCache, nil
	}
	lock, err := c.lock()
	if err != nil {
		warnf("the fused kernels are compiled without a cache: %v", err)
		return private()
	}
	defer lock.Close() // releases the lock
	b, err := c.read()
	if err == nil {
		return b, FromCache, nil // another rank compiled it meanwhile
	}
	if !errors.Is(err, fs.ErrNotExist) {
		warnf("compiling the fused kernels again: %v", err)
		c.remove()
	}
	if b, err = compile(); err != nil {
		return nil, Private, err
	}
	if err := c.write(b); err != nil {
		warnf("the fused kernels could not be cached: %v", err)
		return b, Private, nil
	}
	return b, Cached, nil
}

// Reject deletes the cached image for key if it is still img, which the
// driver refused to load, so that the next Load compiles it again. An
// image that another rank has put there since is left alone.
func Reject(dir, key string, img []byte) {
	if dir == "" || privfile.PrivateDir(dir) != nil {
		return
	}
	c := cache{dir, key}
	lock, err := c.lock()
	if err != nil {
		return
	}
	defer lock.Close()
	if cur, err := privfile.ReadTrusted(c.path(".cubin"), false); err == nil && bytes.Equal(cur, img) {
		c.remove()
	}
}

// cache is one key's files in a private cache directory: the image
// (.cubin), its SHA-256 in hex (.sha256) and the compile lock (.lock).
type cache struct{ dir, key string }

func (c cache) path(ext string) string { return filepath.Join(c.dir, c.key+ext) }

// read returns the image if it and its digest are trusted and agree; an
// error wrapping fs.ErrNotExist where either is missing (not compiled yet,
// or by a collmux that kept no digest).
func (c cache) read() ([]byte, error) {
	img, err := privfile.ReadTrusted(c.path(".cubin"), false)
	if err != nil {
		return nil, err
	}
	sum, err := privfile.ReadTrusted(c.path(".sha256"), false)
	if err != nil {
		return nil, err
	}
	if h := sha256.Sum256(img); len(img) == 0 || strings.TrimSpace(string(sum)) != hex.EncodeToString(h[:]) {
		return nil, fmt.Errorf("%s does not match its digest", c.path(".cubin"))
	}
	return img, nil
}

// write stores the digest, then the image, each through a private
// temporary file renamed into place, so that a reader never sees a partial
// file, and one that finds the image finds its digest.
func (c cache) write(img []byte) error {
	h := sha256.Sum256(img)
	if err := c.put(".sha256", []byte(hex.EncodeToString(h[:])+"\n")); err != nil {
		return err
	}
	return c.put(".cubin", img)
}

func (c cache) put(ext string, b []byte) error {
	f, err := os.CreateTemp(c.dir, c.key+ext+".tmp*") // 0600
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), c.path(ext))
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// remove deletes the image before its digest (the order readers need).
func (c cache) remove() {
	os.Remove(c.path(".cubin"))
	os.Remove(c.path(".sha256"))
}

// lock takes the key's lock file (0600, in the private directory, so no
// one else can open it and hold it), polling so as to give up after
// LockWait.
func (c cache) lock() (*os.File, error) {
	p := c.path(".lock")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || privfile.Trusted(p, fi, false, false) != nil {
		f.Close()
		return nil, fmt.Errorf("%s: not a lock file of this user's", p)
	}
	deadline := time.Now().Add(LockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			f.Close()
			return nil, fmt.Errorf("locking %s: %v", p, err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			f.Close()
			return nil, fmt.Errorf("%s still locked after %v", p, LockWait)
		}
		time.Sleep(min(left, 50*time.Millisecond))
	}
}
