package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"collmux/fused"
)

// `cmake --install` lays out the library (named by its version, with the
// SONAME link and the plain one), header, CMake package and pkg-config
// file, and a C program can build against each and run.
func TestInstalledPackage(t *testing.T) {
	prefix := installTree(t)
	v := projectVersion(t)
	for _, f := range []string{"lib/libcollmux.so." + v, "include/collmux.h", "lib/cmake/collmux/collmuxConfig.cmake", "lib/pkgconfig/collmux.pc", "bin/collmux"} {
		if _, err := os.Stat(filepath.Join(prefix, f)); err != nil {
			t.Errorf("not installed: %s", f)
		}
	}
	major, _, _ := strings.Cut(v, ".")
	for link, to := range map[string]string{"libcollmux.so": "libcollmux.so." + major, "libcollmux.so." + major: "libcollmux.so." + v} {
		if got, err := os.Readlink(filepath.Join(prefix, "lib", link)); err != nil || got != to {
			t.Errorf("lib/%s: links to %q (%v), want %q", link, got, err, to)
		}
	}
	src := filepath.Join(t.TempDir(), "use.c")
	os.WriteFile(src, []byte(`#include <collmux.h>
#include <stdio.h>
int main(void) { printf("collmux %s abi %s states %d\n", collmux_version(), collmux_mpi_abi(), collmux_comm_states()); return 0; }
`), 0o644)

	// pkg-config
	pc := exec.Command("pkg-config", "--cflags", "--libs", "collmux")
	pc.Env = append(os.Environ(), "PKG_CONFIG_PATH="+filepath.Join(prefix, "lib", "pkgconfig"))
	flags, err := pc.Output()
	if err != nil {
		t.Fatalf("pkg-config: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "use")
	args := append([]string{"-o", bin, src}, strings.Fields(string(flags))...)
	if out, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
		t.Fatalf("cc %v: %v\n%s", args, err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "collmux "+v+" abi unknown states 0") {
		t.Fatalf("program built with pkg-config: %v\n%s", err, out)
	}

	// find_package(collmux)
	proj := t.TempDir()
	os.WriteFile(filepath.Join(proj, "CMakeLists.txt"), []byte(`cmake_minimum_required(VERSION 3.18)
project(use C)
find_package(collmux 0.1 REQUIRED)
add_executable(use use.c)
target_link_libraries(use collmux::collmux)
`), 0o644)
	b, _ := os.ReadFile(src)
	os.WriteFile(filepath.Join(proj, "use.c"), b, 0o644)
	bdir := filepath.Join(proj, "b")
	for _, args := range [][]string{{"-S", proj, "-B", bdir, "-DCMAKE_PREFIX_PATH=" + prefix}, {"--build", bdir}} {
		if out, err := exec.Command("cmake", args...).CombinedOutput(); err != nil {
			t.Fatalf("cmake %v: %v\n%s", args, err, out)
		}
	}
	if out, err := exec.Command(filepath.Join(bdir, "use")).CombinedOutput(); err != nil || !strings.Contains(string(out), "collmux "+v) {
		t.Fatalf("program built with find_package: %v\n%s", err, out)
	}
}

// installTree installs build/ under a fresh prefix, as `make install
// PREFIX=...` does, and returns the prefix.
func installTree(t *testing.T) string {
	t.Helper()
	build := filepath.Join(repoRoot(), "build")
	if _, err := os.Stat(filepath.Join(build, "CMakeCache.txt")); err != nil {
		t.Skip("skipped: build/ is not a CMake build (run make build)")
	}
	prefix := t.TempDir()
	if out, err := exec.Command("cmake", "--install", build, "--prefix", prefix).CombinedOutput(); err != nil {
		t.Fatalf("cmake --install: %v\n%s", err, out)
	}
	return prefix
}

// `collmux tune` and `check` from an installed tree, run elsewhere than
// the source tree: they preload the installation's library and build the
// benchmark from the source installed with the tool, once, with the MPI's
// compiler wrapper, into a private (0700) folder of the user's cache. Here
// the wrapper is a stand-in that records its arguments and "builds" a
// script that prints a run recorded on 2 x H200, so check runs it under
// the real launcher; --dry-run prints the build and the launch and builds
// nothing.
func TestInstalledTune(t *testing.T) {
	prefix := installTree(t)
	m := impls(t)[0]
	tool := filepath.Join(prefix, "bin", "collmux")
	work, home := t.TempDir(), t.TempDir()
	cache := filepath.Join(home, "cache", "collmux", "bench")
	data := filepath.Join(repoRoot(), "tune", "testdata", "h200x2-resident")
	calls := filepath.Join(work, "mpicc-calls")
	mpicc := filepath.Join(work, "mpicc")
	os.WriteFile(mpicc, []byte(`#!/bin/sh
echo "$@" >> `+calls+`
while [ $# -gt 1 ]; do [ "$1" = -o ] && out=$2; shift; done
printf '#!/bin/sh\n[ "${PMI_RANK:-$OMPI_COMM_WORLD_RANK}" = 0 ] && cat %s\nexit 0\n' '`+filepath.Join(data, "policies.csv")+`' > "$out"
`), 0o755)
	collmux := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(tool, append(args, "--np", "2", "--mpirun", m.mpirun, "--mpicc", mpicc, "--max-bytes", "16M",
			"--backends", "nccl,fused,staged")...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(home, "cache"), "COLLMUX_LIB=",
			"OMPI_MCA_rmaps_base_oversubscribe=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("collmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	table := filepath.Join(data, "tuning.json")
	out := collmux("check", "--table", table, "--dry-run")
	src := filepath.Join(prefix, "share", "collmux", "bench", "gpu_bench.c")
	build := regexp.MustCompile(`(?m)^# ` + regexp.QuoteMeta(mpicc) + ` .* ` + regexp.QuoteMeta(src) + ` .*-o (` + regexp.QuoteMeta(cache) + `/gpu_bench-[0-9a-f]{24})$`).FindStringSubmatch(out)
	if build == nil || !strings.Contains(out, "LD_PRELOAD="+filepath.Join(prefix, "lib", "libcollmux.so")) ||
		!strings.Contains(out, " "+build[1]+" 16777216 tuned=@") {
		t.Fatalf("check --dry-run from the installed tree:\n%s", out)
	}
	if _, err := os.Stat(cache); err == nil {
		t.Errorf("--dry-run made %s", cache)
	}
	// tune --overlap builds bench/overlap.c from the installed tree too, and
	// runs it once per backend in overlap mode
	out = collmux("tune", "--overlap", "--overlap-backends", "copy,nccl", "--dry-run")
	osrc := filepath.Join(prefix, "share", "collmux", "bench", "overlap.c")
	obuild := regexp.MustCompile(`(?m)^# ` + regexp.QuoteMeta(mpicc) + ` .* ` + regexp.QuoteMeta(osrc) + ` .*-o (` + regexp.QuoteMeta(cache) + `/overlap-[0-9a-f]{24})$`).FindStringSubmatch(out)
	if obuild == nil || !strings.Contains(out, "COLLMUX_OVERLAP=1") || !strings.Contains(out, obuild[1]+" via-copy 268435456 ") ||
		!strings.Contains(out, obuild[1]+" via-nccl 268435456 ") {
		t.Fatalf("tune --overlap --dry-run from the installed tree:\n%s", out)
	}
	// the library would start a Go runtime in the stand-in's shells: a
	// name it does not find (ld.so only warns) keeps them plain
	for i := 0; i < 2; i++ {
		out = collmux("check", "--table", table, "--lib", "/nonexistent-collmux.so")
		if !strings.Contains(out, "| allgather | 28 | 1.079 (16777216 B) |") {
			t.Fatalf("check, run %d:\n%s", i, out)
		}
	}
	b, _ := os.ReadFile(calls)
	if n := strings.Count(string(b), "\n"); n != 1 || !strings.Contains(string(b), src) {
		t.Errorf("the benchmark was built %d times, want once, from %s:\n%s", n, src, b)
	}
	for path, want := range map[string]os.FileMode{cache: 0o700 | os.ModeDir, build[1]: 0o700} {
		if st, err := os.Lstat(path); err != nil || st.Mode() != want {
			t.Errorf("%s: %v (%v), want %v", path, st.Mode(), err, want)
		}
	}
}

// Where nvcc exists, CMake compiles the fused kernels ahead of time into
// the file the library looks for (fused.AOTName: architecture and source
// hash, computed by CMake and by Go alike). No nvcc here: a stand-in
// records its arguments as the "cubin".
func TestAheadOfTimeKernelsName(t *testing.T) {
	if _, err := exec.LookPath("cmake"); err != nil {
		t.Skip("skipped: no cmake")
	}
	dir := t.TempDir()
	nvcc := filepath.Join(dir, "nvcc")
	os.WriteFile(nvcc, []byte("#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = -o ] && out=$2; all=\"$all $1\"; shift; done\necho \"$all\" > \"$out\"\n"), 0o755)
	build := filepath.Join(dir, "build")
	cfg := exec.Command("cmake", "-S", repoRoot(), "-B", build, "-DCOLLMUX_NVCC="+nvcc, "-DCOLLMUX_CUDA_ARCHS=90")
	if out, err := cfg.CombinedOutput(); err != nil || !strings.Contains(string(out), "compiled ahead of time for sm_90") {
		t.Fatalf("cmake configure: %v\n%s", err, out)
	}
	if out, err := exec.Command("cmake", "--build", build, "--target", "collmux_kernels").CombinedOutput(); err != nil {
		t.Fatalf("cmake --build: %v\n%s", err, out)
	}
	img, path := fused.LoadAOT([]string{filepath.Join(build, fused.AOTDir)}, 90)
	joined := filepath.Join(build, "collmux-kernels.cu")
	if img == nil || !strings.Contains(string(img), "-arch=sm_90") || !strings.Contains(string(img), joined) {
		entries, _ := os.ReadDir(filepath.Join(build, fused.AOTDir))
		t.Fatalf("no image named %s (found %v); got %q from %q", fused.AOTName(90), entries, img, path)
	}
	// nvcc compiled the module as the library compiles it: abi.h, kernels.cu, then ops.cu
	if src, err := os.ReadFile(joined); err != nil || string(src) != fused.Source {
		t.Errorf("%s is not fused.Source: %v", joined, err)
	}
}
