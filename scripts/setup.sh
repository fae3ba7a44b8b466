#!/usr/bin/env bash
# Installs what building and testing collmux needs on Debian/Ubuntu: both
# MPIs (and gfortran for the Fortran test), CMake, Debian's mpi4py and NumPy. Go
# itself must already be there.
set -euo pipefail
need=(openmpi-bin libopenmpi-dev mpich libmpich-dev gfortran cmake pkg-config python3-mpi4py python3-numpy)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
command -v go >/dev/null || [ -x /usr/local/go/bin/go ] || { echo "setup: Go is required (https://go.dev/dl)"; exit 1; }
