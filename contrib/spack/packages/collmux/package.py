# SPDX-License-Identifier: Apache-2.0
#
# Spack recipe for collmux: put this directory in a Spack repository
# (<repo>/packages/collmux/package.py), then `spack install collmux`.
#
# UNTESTED: written without a Spack installation at hand. The build it
# drives is the project's own (CMakeLists.txt running `go build
# -buildmode=c-shared`), which `make build` runs and the tests check; the
# Spack side (names, variants, environment) has never run. homepage and git
# are placeholders for where a site gets collmux from.

from spack.package import *


class Collmux(CMakePackage, CudaPackage):
    """Routes every MPI collective of an unmodified MPI program, call by
    call, to the real MPI, NCCL, collmux's own GPU kernels or a staged
    device-host copy. One shared library, libcollmux.so, loaded with
    LD_PRELOAD per launch (srun --export=ALL,LD_PRELOAD=$COLLMUX_LIB)."""

    homepage = "https://example.org/collmux"  # placeholder
    git = "https://example.org/collmux.git"  # placeholder

    license("Apache-2.0")

    version("main", branch="main")

    depends_on("c", type="build")
    depends_on("cmake@3.18:", type="build")
    depends_on("go@1.26:", type="build")  # the go line of go.mod
    # collmux finds the real MPI_* functions at run time (it is preloaded
    # into, or linked ahead of, the program's MPI), so MPI is needed to run
    # programs, not to build the library.
    depends_on("mpi", type="run")
    # +cuda (CudaPackage: cuda, cuda_arch) compiles the fused kernels ahead
    # of time with nvcc for each cuda_arch (collmux is measured on 90 and
    # also built for 80). Without it the library compiles them at first use
    # with NVRTC where that exists; the CUDA driver, NCCL and NVRTC are all
    # loaded at run time (dlopen), so none is a link dependency.

    def setup_build_environment(self, env):
        # Go's caches in the stage, not the builder's home; -modcacherw
        # because Go makes its module cache read-only, which would stop
        # Spack from removing the stage. Modules come from the network, or
        # from whatever GOPROXY/GOFLAGS=-mod=vendor the site sets.
        env.set("GOPATH", join_path(self.stage.path, "gopath"))
        env.set("GOCACHE", join_path(self.stage.path, "gocache"))
        env.set("GOFLAGS", "-modcacherw")
        # as the Makefile: NVML's deprecation warnings are noise
        env.set("CGO_CFLAGS", "-O2 -g -Wno-deprecated-declarations")

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define("GO", spec["go"].prefix.bin.go),
            # GNUInstallDirs would pick lib64 on some systems; COLLMUX_LIB
            # below names prefix.lib
            self.define("CMAKE_INSTALL_LIBDIR", "lib"),
            self.define_from_variant("COLLMUX_AOT_KERNELS", "cuda"),
        ]
        if spec.satisfies("+cuda"):
            args.append(self.define("COLLMUX_NVCC", spec["cuda"].prefix.bin.nvcc))
            args.append(self.define("COLLMUX_CUDA_ARCHS", ";".join(spec.variants["cuda_arch"].value)))
        return args

    def setup_run_environment(self, env):
        # As the modulefile: COLLMUX_LIB, never LD_PRELOAD, which would
        # preload collmux into mpirun, srun and the (Go) collmux tool too.
        env.set("COLLMUX_LIB", join_path(self.prefix.lib, "libcollmux.so"))
