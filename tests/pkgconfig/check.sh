#!/usr/bin/env bash
# Build tests/pkgconfig/consumer.c with `pkg-config --cflags --libs lomas`
# (1) against the build tree (meson-uninstalled/lomas-uninstalled.pc) and
# (2) against a DESTDIR install of the build (the installed lomas.pc), and run it.
set -euo pipefail
src="$1"
build="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CC=${CC:-cc}

echo "uninstalled: $(PKG_CONFIG_PATH="$build/meson-uninstalled" pkg-config --cflags --libs lomas)"
# shellcheck disable=SC2046
$CC -o "$tmp/uninstalled" "$src/tests/pkgconfig/consumer.c" \
	$(PKG_CONFIG_PATH="$build/meson-uninstalled" pkg-config --cflags --libs lomas)
LD_LIBRARY_PATH="$build" "$tmp/uninstalled"

# --no-rebuild: the tests run what was built (a rebuild here, after a source
# edit, relinked liblomas.so under the tests running beside this one).
meson install -C "$build" --no-rebuild --destdir "$tmp/root" --quiet >/dev/null
pcdir=$(dirname "$(find "$tmp/root" -name lomas.pc | head -1)")
flags=$(PKG_CONFIG_SYSROOT_DIR="$tmp/root" PKG_CONFIG_LIBDIR="$pcdir:/usr/lib/x86_64-linux-gnu/pkgconfig:/usr/share/pkgconfig" \
	pkg-config --cflags --libs lomas)
echo "installed: $flags"
# shellcheck disable=SC2086
$CC -o "$tmp/installed" "$src/tests/pkgconfig/consumer.c" $flags
libdir=$(dirname "$(find "$tmp/root" -name 'liblomas.so.0' | head -1)")
LD_LIBRARY_PATH="$libdir" "$tmp/installed"
