#!/bin/sh
# mpi-world.sh: more real-MPI worlds in chroots, to run collmux's tests
# against: Debian 13 ("trixie") with Open MPI 5.0.x and MPICH 4.2.x (and
# gfortran, and mpi4py with NumPy, built for its Open MPI), and,
# with --abi, Debian unstable ("sid") with MPICH 5.0.x, whose packages are
# built with --enable-mpi-abi and so also hold the MPI-5 standard ABI's
# libmpi_abi.so.1 (compile with `mpicc.mpich -mpi-abi`, launch with
# mpirun.mpich). No Debian release packages an ABI build (trixie's MPICH is
# 4.2.1, which predates it), and sid's packages need sid's libraries
# (hwloc 2.15, UCC, Level Zero), hence a world of its own. It has no
# gfortran and no mpi4py: MPICH 5.0.2 has no Fortran binding of the
# standard ABI, and sid's python3-mpi4py is built for Open MPI.
#
#   scripts/mpi-world.sh [--abi] [build]     build the world once (cached), then exit
#   scripts/mpi-world.sh [--abi] path        print the world's directory if it is built
#   scripts/mpi-world.sh [--abi] run -- CMD  run CMD inside the world, in the current
#                                            directory, with the repository bind-mounted
#                                            at the same path (so build/libcollmux.so,
#                                            built on the host, is there too)
#
# The worlds live in $COLLMUX_WORLD (default /var/cache/collmux-trixie) and
# $COLLMUX_ABI_WORLD (default /var/cache/collmux-sid-abi). They need root
# (debootstrap, chroot, mount). Building one takes a few minutes and
# downloads from the mirror the host's apt sources name. sid moves: the
# cached world keeps the versions of the day it was built (build prints
# them; delete the directory to take newer ones).
set -eu

REPO=$(cd "$(dirname "$0")/.." && pwd -P)

die() { echo "mpi-world: $*" >&2; exit 1; }

# Mounts are made in a private mount namespace of our own, so they vanish
# with it and concurrent runs do not see (or unmount) each other's.
if [ "${1:-}" = --abi ]; then cmd=${2:-build}; else cmd=${1:-build}; fi
if [ -z "${MPI_WORLD_INNER:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1 &&
	[ "$cmd" != path ]; then
	MPI_WORLD_INNER=1 exec unshare --mount --propagation private "$0" "$@"
fi

if [ "${1:-}" = --abi ]; then
	shift
	WORLD=${COLLMUX_ABI_WORLD:-/var/cache/collmux-sid-abi}
	SUITE=sid
	PKGS="mpich libmpich-dev gcc libc6-dev make"
	# sid's Release is re-signed daily with a week's validity: a mirror that
	# is a dated snapshot serves one apt calls expired. Its signature is
	# still checked; only its age is not.
	APTOPTS="-o Acquire::Check-Valid-Until=false"
	# libmpich-dev 5.0.2-2 links mpich/lib/libmpi_abi.so to a
	# libmpi_abi_mpich.so no package ships, so `mpicc -mpi-abi` links the
	# static libmpi_abi.a (and fails on its UCX and Level Zero references):
	# the development link the package meant is made when missing
	FIXUP='d=/usr/lib/x86_64-linux-gnu; if [ ! -e $d/libmpi_abi_mpich.so ]; then so=$(cd $d && ls libmpi_abi_mpich.so.*.*.* | head -n 1) && ln -s "$so" $d/libmpi_abi_mpich.so; fi'
	# the ABI library must be there: a later sid MPICH built without it
	# would otherwise pass for one
	VERSIONS='set -e; mpichversion | head -n 2; readlink -f /usr/lib/x86_64-linux-gnu/libmpi_abi.so.1 && nm -D --defined-only /usr/lib/x86_64-linux-gnu/libmpi_abi.so.1 | grep -q " PMPI_Abi_get_version$"; readlink -e /usr/lib/x86_64-linux-gnu/mpich/lib/libmpi_abi.so; gcc --version | head -n 1'
else
	WORLD=${COLLMUX_WORLD:-/var/cache/collmux-trixie}
	SUITE=trixie
	# python3-mpi4py is built for Open MPI (the default MPI), with NumPy
	# for tests/py/mpi4py_numpy.py
	PKGS="openmpi-bin libopenmpi-dev mpich libmpich-dev gcc libc6-dev make gfortran python3-mpi4py python3-numpy"
	APTOPTS=""
	FIXUP=true
	VERSIONS='set -e; mpirun.openmpi --version | head -n 1; mpichversion | head -n 2; gcc --version | head -n 1; gfortran --version | head -n 1; python3 -c "import mpi4py, numpy; print(\"mpi4py\", mpi4py.__version__, \"numpy\", numpy.__version__)"'
fi
STAMP=.collmux-world-ready

# trusted DIR: DIR is a directory owned by root and not writable by group or
# others (so nobody else can have planted a root filesystem we chroot into).
trusted() {
	[ -d "$1" ] && [ ! -L "$1" ] || return 1
	set -- $(stat -c '%u %a' "$1")
	[ "$1" = 0 ] || return 1
	case $2 in *[2367]? | *[2367]) return 1 ;; esac
	return 0
}

# the Debian mirror the host's apt uses (deb.debian.org if none is named)
mirror() {
	m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
		sed -n -e 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)\/\{0,1\}[[:space:]]*$/\1/p' \
			-e 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]*\/debian\)\/\{0,1\}[[:space:]].*/\2/p' |
		head -n 1)
	echo "${m:-http://deb.debian.org/debian}"
}

MOUNTED=""
# bind SRC DST: bind-mount SRC on WORLD/DST (created if needed), undone on exit
bind() {
	mkdir -p "$WORLD$2"
	mount --bind "$1" "$WORLD$2"
	MOUNTED="$WORLD$2 $MOUNTED"
}
unbind() {
	for m in $MOUNTED; do umount -l "$m" 2>/dev/null || true; done
	MOUNTED=""
}
trap unbind EXIT
trap 'exit 130' INT TERM

system_mounts() {
	mkdir -p "$WORLD/proc"
	mount -t proc proc "$WORLD/proc"
	MOUNTED="$WORLD/proc $MOUNTED"
	bind /sys /sys # UCX (MPICH's ch4:ucx) and hwloc read it
	bind /dev /dev
	bind /dev/shm /dev/shm
	[ -d /dev/pts ] && bind /dev/pts /dev/pts
	bind /tmp /tmp
	cp -L /etc/resolv.conf "$WORLD/etc/resolv.conf" 2>/dev/null || true
	cp -L /etc/hosts "$WORLD/etc/hosts" 2>/dev/null || true
}

build() {
	[ "$(id -u)" = 0 ] || die "building the world needs root"
	# the stamp names the packages installed; a new list installs the rest
	if [ -f "$WORLD/$STAMP" ]; then
		trusted "$WORLD" || die "$WORLD is not root-owned or is group/other writable; not trusting it"
		[ "$(cat "$WORLD/$STAMP")" = "$PKGS" ] && return 0
	fi
	command -v debootstrap >/dev/null 2>&1 || {
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
	}
	if [ -e "$WORLD" ]; then
		trusted "$WORLD" || die "$WORLD is not root-owned or is group/other writable; not trusting it"
	else
		mkdir -p "$(dirname "$WORLD")"
		(umask 022 && mkdir "$WORLD")
	fi
	chmod 755 "$WORLD"
	start=$(date +%s)
	if [ ! -x "$WORLD/usr/bin/apt-get" ]; then
		echo "mpi-world: debootstrap $SUITE into $WORLD from $(mirror)" >&2
		debootstrap --variant=minbase "$SUITE" "$WORLD" "$(mirror)" >&2
	fi
	system_mounts
	echo "mpi-world: installing $PKGS" >&2
	chroot "$WORLD" env DEBIAN_FRONTEND=noninteractive LC_ALL=C sh -c \
		"apt-get $APTOPTS update -qq && apt-get install -y -qq --no-install-recommends $PKGS openssh-client >/dev/null && apt-get clean && $FIXUP"
	chroot "$WORLD" sh -c "$VERSIONS" >&2 || die "the MPIs of $SUITE are not what this world needs (above)"
	unbind
	echo "$PKGS" >"$WORLD/$STAMP"
	echo "mpi-world: built in $(($(date +%s) - start)) s, $(du -sh "$WORLD" | cut -f1)" >&2
}

runin() {
	[ "$(id -u)" = 0 ] || die "running in the world needs root"
	[ -f "$WORLD/$STAMP" ] || die "no world at $WORLD: run scripts/mpi-world.sh $([ $SUITE = sid ] && echo '--abi ')first"
	trusted "$WORLD" || die "$WORLD is not root-owned or is group/other writable; not trusting it"
	[ $# -gt 0 ] || die "run: no command"
	cwd=$(pwd -P)
	system_mounts
	bind "$REPO" "$REPO"
	case $cwd in "$REPO"* | /tmp*) ;; *) cwd=$REPO ;; esac
	# no exec: the trap must unmount after the command (where unshare
	# was missing); the script's own variables stay outside
	status=0
	chroot "$WORLD" env -u COLLMUX_WORLD -u MPI_WORLD_INNER OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
		OMPI_MCA_rmaps_base_oversubscribe=1 PATH=/usr/local/bin:/usr/bin:/bin \
		sh -c 'cd "$1" && shift && exec "$@"' sh "$cwd" "$@" || status=$?
	return $status
}

case ${1:-build} in
build) build ;;
path)
	[ -f "$WORLD/$STAMP" ] && trusted "$WORLD" || exit 1
	echo "$WORLD"
	;;
run)
	shift
	[ "${1:-}" = "--" ] && shift
	runin "$@"
	;;
*) die "usage: $0 [--abi] [build | path | run -- CMD...]" ;;
esac
