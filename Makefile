# Thin driver around CMake and go. `make build` leaves build/libcollmux.so.
BUILD ?= build
# go-nvml's generated cgo calls deprecated NVML functions; their warnings are noise
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
MPIRUN ?= mpirun.openmpi

.PHONY: build test test-world test-world-suite demo generate check bench bench-world install clean

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD)

# capi/main.go, which names the generator, is built only with the tag
generate:
	go generate -tags collmux_lib ./capi

# static checks, unit tests, then the real-MPI suite against build/
check:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	go vet ./...
	go vet -tags collmux_lib ./...

test: build check
	go test -count=1 -timeout 60m ./...

# the suite's world tests against Debian 13's Open MPI 5.0 and MPICH 4.2,
# and against Debian unstable's MPICH 5.0 built for the MPI-5 standard ABI,
# in the chroots scripts/mpi-world.sh builds once each (root; minutes,
# ~1 GB each) and caches; not part of `make test`. The ABI world needs sid
# on the mirror: without it its tests say "skipped" and the rest run.
test-world: build
	./scripts/mpi-world.sh build
	./scripts/mpi-world.sh --abi build || echo "test-world: no MPI-5 ABI world (above); TestWorldABI* will be skipped" >&2
	go test -count=1 -timeout 30m -run 'TestWorld' -v ./tests

# the whole suite (./tests) inside the worlds: the test binary built here,
# run there with the worlds' MPIs, the ABI world's with
# TESTS_MPIS=mpi-abi (every program compiled `mpicc.mpich
# -mpi-abi`). WORLD_SKIP names the tests left out: they need tools only
# the host has (go, cmake, a GPU), or are the world tests themselves,
# which cannot nest.
WORLD_TEST ?= /tmp/collmux-world.test
WORLD_SKIP ?= TestTraceTimeline|TestInstalledPackage|TestInstalledTune|TestGPUSuite|TestWorld
test-world-suite: build
	./scripts/mpi-world.sh build
	./scripts/mpi-world.sh --abi build
	go test -c -o $(WORLD_TEST) ./tests
	cd tests && ../scripts/mpi-world.sh run -- $(WORLD_TEST) -test.count=1 -test.timeout 30m -test.v -test.skip '$(WORLD_SKIP)'
	cd tests && TESTS_MPIS=mpi-abi ../scripts/mpi-world.sh --abi run -- $(WORLD_TEST) -test.count=1 -test.timeout 30m -test.v -test.skip '$(WORLD_SKIP)'

demo: build
	./scripts/demo.sh

bench: build
	./bench/host_latency.sh

# make bench inside the worlds of test-world (built first if missing), into
# docs/results/host-passthrough-worlds-DATE.md; ROUNDS=N for more rounds
bench-world: build
	./scripts/mpi-world.sh build
	./scripts/mpi-world.sh --abi build || echo "bench-world: no MPI-5 ABI world (above); its rows will say skipped" >&2
	./bench/host_latency.sh --worlds

# PREFIX (make install PREFIX=/opt/collmux/0.1.0) overrides the prefix the
# build was configured with (CMAKE_INSTALL_PREFIX, default /usr/local);
# DESTDIR, for packagers, is honoured by cmake --install itself.
install: build
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

clean:
	rm -rf $(BUILD)
