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
api=__sanitizer_cov_load1,__sanitizer_cov_load2,__sanitizer_cov_load4,__sanitizer_cov_load8
api=$api,__sanitizer_cov_load16,__sanitizer_cov_store1,__sanitizer_cov_store2
api=$api,__sanitizer_cov_store4,__sanitizer_cov_store8,__sanitizer_cov_store16
api=$api,__sanitizer_cov_trace_pc,__sanitizer_cov_trace_pc_guard
api=$api,__sanitizer_cov_trace_pc_guard_init,__wrap_pthread_create,__wrap_sigaction
api=$api,__wrap_signal,__wrap___sysv_signal
api=$api,lomas_inline_start,lomas_inline_stop,lomas_inline_active,lomas_inline_marker
api=$api,lomas__slow,lomas__slow_pm,lomas__fast,lomas__filter,lomas__range_clean
"$opt" -passes='internalize,globaldce' -internalize-public-api-list="$api" \
	"$tmp/all.bc" -o "$tmp/lomas-inline.o"
rm -f "$out"
"$ar" rcs "$out" "$tmp/lomas-inline.o"
rm -rf "$tmp"
