#!/usr/bin/env bash
# Whether two builds' GPU kernels are the same code, instruction by instruction (addresses and
# encodings stripped): "same" or "DIFF" and the instruction counts per kernel. Used to land a change
# without a device run when it must not touch the default kernels (bench/RESULTS.md says when).
#   bash bench/sass_same.sh OLD/hfp4 NEW/hfp4 [KERNEL_REGEX]      (default regex: gemm_kernel;
#   RENAME='sed script' maps old kernel names, below)
# Needs cuobjdump and nvdisasm on PATH (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm puts
# them under site-packages/nvidia/cu13/bin).
set -eu
old=$1 new=$2 re=${3:-gemm_kernel}
dump() {
    cuobjdump -sass "$1" | awk -v re="$re" '
        /Function : / { name = $3; keep = name ~ re; next }
        keep && /^[[:space:]]+\/\*[0-9a-f][0-9a-f]*\*\// {
            line = $0
            sub(/^[[:space:]]+\/\*[0-9a-f][0-9a-f]*\*\/[[:space:]]*/, "", line)
            sub(/[[:space:]]*\/\* 0x[0-9a-f]+ \*\/[[:space:]]*$/, "", line)
            print name "\t" line
        }'
}
a=$(mktemp) b=$(mktemp)
trap 'rm -f "$a" "$b"' EXIT
# RENAME (a sed script) maps the old build's kernel names onto the new ones where a template
# parameter changed type, e.g. RENAME='s/ELb\([01]\)EEv/ELi\1EEv/' for a bool that became an int
dump "$old" | sed "${RENAME:-}" > "$a"
dump "$new" > "$b"
for k in $(cut -f1 "$a" "$b" | sort -u); do
    na=$(grep -c "^$k	" "$a" || true) nb=$(grep -c "^$k	" "$b" || true)
    if cmp -s <(grep "^$k	" "$a") <(grep "^$k	" "$b"); then s=same; else s=DIFF; fi
    printf '%-4s %6s %6s  %s\n' "$s" "$na" "$nb" "$k"
done
