#!/bin/sh
# build-lib.sh OUT SONAME: builds libcollmux.so (called by CMake, from the
# repository root, with CGO_CPPFLAGS set). The digest of every C header
# goes into the C flags as CMX_HEADERS: Go's build cache keys a package's C
# on its flags and its own files, not on headers it includes from other
# folders (golang/go#24355), so without it a changed header in
# internal/cmx would leave stale objects behind. The library records the
# digest (collmux_headers in capi/api.c), which tests/build_test.go checks.
set -eu
out=$1 soname=$2
digest=$(find . -name '*.h' -not -path './build*' -not -path './tests/*' -not -path './bench/*' -not -path './.*' | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)
CGO_CPPFLAGS="${CGO_CPPFLAGS:-} -DCMX_HEADERS=$digest"
export CGO_CPPFLAGS
exec "${GO:-go}" build -trimpath -tags collmux_lib -buildmode=c-shared "-ldflags=-extldflags=-Wl,-soname,$soname" -o "$out" ./capi
