#!/bin/sh
# Build liblomas-inline.a: the runtime, the hooks and the core it needs as ONE
# LLVM bitcode module (clang -flto, llvm-link), with every symbol but the
# hooks and the lomas_inline_* API internalized (opt), so a program linking it
# together with liblomas never sees two copies of a symbol, and LTO can inline
# the hooks into the program. No -g: the hooks must carry no debug info, or
# LLVM's verifier rejects a program built with -g whose sancov calls (some
# without a location) would be inlinable calls to a function with debug info.
#   build-lto.sh CLANG LLVM_LINK OPT LLVM_AR OUT.a SRCDIR SOURCE...
set -eu
clang=$1 link=$2 opt=$3 ar=$4 out=$5 src=$6
shift 6
tmp="$out.d"
rm -rf "$tmp"
mkdir -p "$tmp"
i=0
for f in "$@"; do
	i=$((i + 1))
	"$clang" -c -flto -O2 -fPIC -fno-semantic-interposition -std=c11 -D_GNU_SOURCE \
		-DLOMAS_INLINE_BUILDING -fvisibility=hidden \
		-Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
		-Wno-unused-parameter \
		-include "$src/lib/inline/rt_alloc.h" \
		-I"$src/include" -I"$src/lib" "$f" -o "$tmp/$i.bc"
done
"$link" "$tmp"/*.bc -o "$tmp/all.bc"
# The symbols kept visible: lib/inline/contract.h's LOMAS_ABI_EXPORTS, the list
# the pass and the runtime agree on (string literals joined, quotes dropped).
api=$(printf '#include "inline/contract.h"\nLOMAS_ABI_EXPORTS\n' |
	"$clang" -E -P -I"$src/lib" -x c - | tr -d '" \t\n')
case $api in
*lomas__slow_pm*) ;;
*)
	echo "build-lto.sh: no LOMAS_ABI_EXPORTS in lib/inline/contract.h ($api)" >&2
	exit 1
	;;
esac
"$opt" -passes='internalize,globaldce' -internalize-public-api-list="$api" \
	"$tmp/all.bc" -o "$tmp/lomas-inline.o"
rm -f "$out"
"$ar" rcs "$out" "$tmp/lomas-inline.o"
rm -rf "$tmp"
