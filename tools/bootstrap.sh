#!/usr/bin/env bash
# Set up a fresh Debian 12 machine for liblomas: install the Debian packages
# that are missing, configure and build in ./build, and (as root) install the
# library into /usr/local so that `pkg-config --cflags --libs lomas` works.
# Idempotent: re-running only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

# valgrind: the launcher, its core's files, and (in the same Debian package)
# the tool headers (/usr/include/valgrind/pub_tool_*.h), the static archives
# and valgrind.pc the dbi clock's tool is built from.
PKGS=(meson ninja-build pkg-config gcc g++ libc6-dev
      libgsl-dev libjansson-dev libcmocka-dev libcapstone-dev libdw-dev binutils
      clang-16 lld-16 llvm-16 llvm-16-dev libclang-rt-16-dev clang-format-16
      libpfm4-dev valgrind python3 python3-pytest)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "bootstrap: installing ${missing[*]}" >&2
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO="sudo"
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -f build/build.ninja ]; then
	meson setup build --buildtype=debugoptimized >/dev/null
fi
ninja -C build >/dev/null

if [ "$(id -u)" -eq 0 ] && [ "${LOMAS_NO_INSTALL:-0}" != 1 ]; then
	meson install -C build --quiet >/dev/null
	ldconfig
fi
