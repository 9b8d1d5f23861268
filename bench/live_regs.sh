#!/usr/bin/env bash
# Live registers in a kernel, from ptxas's own count (nvdisasm --print-life-ranges), without a GPU:
# the kernel's peak, the 5 instructions where it is reached, and the peak around each group of
# wgmmas (each copy of a consumer loop: its QGMMA shape and the highest count within 120
# instructions before and 200 after it). Why: the 128-token tile's consumers run at their
# setmaxnreg budget (208) and ptxas answers a few more live values there with spills or with
# C7511 (every wgmma serialized); this says how close each loop copy is (bench/RESULTS.md v19).
#   bash bench/live_regs.sh OBJECT_OR_BINARY KERNEL_REGEX
# e.g. bash bench/live_regs.sh build/hfp4 'kernelILi128ELb0ELi1ELb0ELb0E'
# Needs nvdisasm and cuobjdump on PATH (pip install nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump).
set -eu
obj=$(readlink -f "$1") re=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cubin=$obj
if ! nvdisasm --print-life-ranges "$obj" > /dev/null 2>&1; then
    (cd "$tmp" && cuobjdump -xelf all "$obj" > /dev/null)
    cubin=$(ls "$tmp"/*.cubin | head -n 1)
    [ -n "$cubin" ] || { echo "live_regs: no cubin in $obj" >&2; exit 1; }
    for f in "$tmp"/*.cubin; do # the cubin that holds the kernel
        if cuobjdump -sass "$f" 2>/dev/null | grep -qE "Function : .*($re)"; then cubin=$f; break; fi
    done
fi
nvdisasm --print-life-ranges "$cubin" | awk -v re="$re" '
    /^\/\/-+ \.text\./ { keep = $0 ~ re; next }
    keep && match($0, /\/\*[0-9a-f]+\*\/[ \t]+[^;]+;[ \t]*\/\/ \| *[0-9]+/) {
        line = substr($0, RSTART, RLENGTH)
        n = line; sub(/.*\/\/ \| */, "", n)
        addr = line; sub(/^\/\*/, "", addr); sub(/\*\/.*/, "", addr)
        ins = line; sub(/^\/\*[0-9a-f]+\*\/[ \t]+/, "", ins); sub(/[ \t]*;.*/, "", ins)
        k++; cnt[k] = n + 0; at[k] = addr; op[k] = ins
        if (ins ~ /GMMA/) { split(ins, w, " "); q[k] = w[1] }
    }
    END {
        if (k == 0) { print "live_regs: no kernel matches " re " (or no life ranges)"; exit 1 }
        mx = 0
        for (i = 1; i <= k; i++) if (cnt[i] > mx) mx = cnt[i]
        printf "peak %d live registers (%d instructions)\n", mx, k
        shown = 0
        for (i = 1; i <= k && shown < 5; i++) if (cnt[i] == mx) { printf "  at %s  %s\n", at[i], op[i]; shown++ }
        last = -1000
        for (i = 1; i <= k; i++) {
            if (!(i in q) || i - last < 40) { if (i in q) last = i; continue }
            last = i; best = 0; ba = ""
            for (j = (i > 120 ? i - 120 : 1); j <= i + 200 && j <= k; j++) if (cnt[j] > best) { best = cnt[j]; ba = at[j] }
            printf "  %-36s at %s: peak %d nearby (at %s)\n", q[i], at[i], best, ba
        }
    }'
