// SPDX-License-Identifier: Apache-2.0

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"collmux/fused"
	"collmux/internal/privfile"
)

// The benchmarks tune and check run are bench/gpu_bench.c (and, for tune
// --overlap and --ops, bench/overlap.c and bench/fusedops.c), MPI, CUDA
// and NCCL programs: --bench (and
// --overlap-bench) name a binary, or the tool builds it at first use with
// the MPI's compiler wrapper, from the source installed with the tool
// (<prefix>/<datadir>/collmux/bench, beside the header it includes from
// collmux/tests/gpu, the source tree's layout) or from the source tree the
// tool was built in. They cannot be built with the library: that needs no
// CUDA or NCCL, and a benchmark belongs to one MPI, the one of the
// launcher it runs under.

// benchSources are where bench/<name>.c may be, in order: installed with
// the tool, then in the source tree whose build/ holds the tool.
func benchSources(name string) []string {
	dir := toolDir()
	if dir == "" {
		return nil
	}
	var out []string
	if p := installed(dir, dataDir, filepath.Join("collmux", "bench", name+".c")); p != "" {
		out = append(out, p)
	}
	return append(out, filepath.Join(dir, "..", "bench", name+".c"))
}

// benchBuild is how the benchmark is built: the compiler's command line
// and the binary it makes, in the user's private cache.
type benchBuild struct {
	argv []string // with "-o", out
	out  string
}

// mpiccFor is the compiler wrapper of the MPI whose launcher is mpirun:
// the one beside it with its suffix (mpirun.mpich: mpicc.mpich), else
// mpicc on PATH.
func mpiccFor(mpirun string) string {
	base := filepath.Base(mpirun)
	for _, l := range []string{"mpirun", "mpiexec"} {
		if suffix, ok := strings.CutPrefix(base, l); ok {
			cc := "mpicc" + suffix
			if strings.ContainsRune(mpirun, filepath.Separator) {
				cc = filepath.Join(filepath.Dir(mpirun), cc)
			}
			if _, err := exec.LookPath(cc); err == nil {
				return cc
			}
		}
	}
	return "mpicc"
}

// planBench finds the source and writes the command that builds it. The
// binary is named by a digest of the sources, the command and the
// compiler wrapper it resolves to (its size and time too, so an MPI
// upgraded in place builds it again).
func planBench(o tuneOpts, name string) (benchBuild, error) {
	var src string
	tried := benchSources(name)
	for _, p := range tried {
		if _, err := os.Stat(p); err == nil {
			src = p
			break
		}
	}
	if src == "" {
		return benchBuild{}, fmt.Errorf("give --bench: the benchmark's source is not where the tool looks (%s)", strings.Join(tried, ", "))
	}
	h := sha256.New()
	if err := hashSources(h, src, map[string]bool{}); err != nil {
		return benchBuild{}, fmt.Errorf("the benchmark's source is incomplete: %v", err)
	}
	cc, err := exec.LookPath(o.mpicc)
	if err != nil {
		return benchBuild{}, fmt.Errorf("--mpicc %s: %v (the benchmark is built with the MPI's compiler wrapper)", o.mpicc, err)
	}
	if real, err := filepath.EvalSymlinks(cc); err == nil {
		if st, err := os.Stat(real); err == nil {
			fmt.Fprintf(h, "%s %d %d\x00", real, st.Size(), st.ModTime().UnixNano())
		}
	}
	dirs := []string{o.cuda}
	if o.nccl != "" {
		dirs = append(dirs, o.nccl)
	}
	args := []string{cc, "-O2"}
	var link []string
	for i, d := range dirs {
		lib := filepath.Join(d, []string{"lib64", "lib"}[i]) // CUDA's lib64, NCCL's lib
		args = append(args, "-I"+filepath.Join(d, "include"))
		link = append(link, "-L"+lib, "-Wl,-rpath,"+lib)
	}
	args = append(append(append(args, src), link...), "-lcudart", "-lnccl", "-ldl", "-lm")
	fmt.Fprintf(h, "%q", args)
	cache := fused.CacheDir(os.Getenv)
	if cache == "" {
		return benchBuild{}, fmt.Errorf("give --bench: neither XDG_CACHE_HOME nor HOME is set (to an absolute path), so there is no private folder to build the benchmark in")
	}
	out := filepath.Join(cache, "bench", name+"-"+hex.EncodeToString(h.Sum(nil)[:12]))
	return benchBuild{append(args, "-o", out), out}, nil
}

// quoted are a C file's #include "..." lines' files.
var quoted = regexp.MustCompile(`(?m)^#include "([^"]+)"`)

// hashSources writes into h the file at path and, once each, the files it
// includes with quotes (relative to it), and theirs.
func hashSources(h io.Writer, path string, seen map[string]bool) error {
	if seen[path] {
		return nil
	}
	seen[path] = true
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	h.Write(b)
	for _, m := range quoted.FindAllSubmatch(b, -1) {
		if err := hashSources(h, filepath.Join(filepath.Dir(path), string(m[1])), seen); err != nil {
			return err
		}
	}
	return nil
}

// ensure builds the benchmark unless a binary of this user's, writable by
// no one else, is there already: into a temporary file of the private
// folder (0700), renamed into place once built, so that another tune
// starting meanwhile never runs half a binary.
func (b benchBuild) ensure(log io.Writer) error {
	dir := filepath.Dir(b.out)
	if err := privfile.PrivateDir(dir); err != nil {
		return fmt.Errorf("building the benchmark: %v", err)
	}
	if fi, err := os.Lstat(b.out); err == nil && privfile.Trusted(b.out, fi, false, false) == nil {
		return nil
	}
	f, err := os.CreateTemp(dir, ".gpu_bench-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	defer os.Remove(tmp) // gone once renamed
	argv := append(b.argv[:len(b.argv)-1:len(b.argv)-1], tmp)
	fmt.Fprintf(log, "building the benchmark: %s\n", shellQuote(b.argv))
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("building the benchmark (give --cuda, --nccl or --mpicc, or a built one with --bench): %s: %v\n%s", shellQuote(b.argv), err, out)
	}
	if err := os.Chmod(tmp, 0o700); err != nil {
		return err
	}
	return os.Rename(tmp, b.out)
}

// cudaHome is the CUDA toolkit's folder: $CUDA_HOME, $CUDA_PATH, or
// /usr/local/cuda.
func cudaHome() string {
	for _, v := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if d := os.Getenv(v); d != "" {
			return d
		}
	}
	return "/usr/local/cuda"
}
