#!/usr/bin/env bash
# go_start_ab.sh [ROUNDS]: MPICH's 8-byte MPI_Iallreduce + MPI_Wait row
# (bench/host_ab.sh) under a bare Go c-shared library started after
# PMPI_Init (a C library dlopen()s it in its MPI_Init wrapper), the same
# started just before PMPI_Init, the bare library preloaded, and collmux
# (build/libcollmux.so): the evidence that the row follows when a Go
# runtime starts (docs/results/host-passthrough-2026-12-01-session13.md).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-61}
ctl=docs/results/host-passthrough-2026-12-01-controls
tmp=$(mktemp -d /tmp/collmux-gostart-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cp $ctl/bare_go.go.txt "$tmp/main.go"
printf 'module bare\ngo 1.21\n' > "$tmp/go.mod"
(cd "$tmp" && go build -buildmode=c-shared -o libbare.so .)
for w in late early; do
  mpicc.mpich -shared -fPIC -O2 -DGOLIB="\"$tmp/libbare.so\"" -o "$tmp/lib$w.so" $ctl/$w.c -ldl
done
bench/host_ab.sh mpich iallreduce "$rounds" "$tmp/liblate.so" "$tmp/libearly.so" "$tmp/libbare.so" build/libcollmux.so
