#!/usr/bin/env bash
# The FP8 x FP8 kernel's tiles side by side (src/kernels/sm90/fp8_fp8_gemm.cu: HFP4_SM90_FP8_WEIGHTS_TILE
# = 128, 192 or 256 token rows; 128x192 (128 tokens, 192 weight rows) only with
# bench/patches/v39-fw-weight-tile-192.patch applied: measured slower, RESULTS v39), in one device call:
# the FP8-weight GPU tests (every tile forced), memcheck on them, then interleaved rounds of the dense section.
# Built here first: make -j3 BUILD=build all build/hfp4_gpu_tests. carry: build/hfp4 build/hfp4_gpu_tests.
# TILES (default "auto 256 128") or RUNS (below) and SHAPES (--dense-shape arguments) pick the rows.
# Logs: $OUT/logs.tgz.
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p "$OUT"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
timeout 120 build/hfp4_gpu_tests --fork --filter gpu_fp8_weights > "$OUT/tests_fw.txt" 2>&1
echo "tests rc=$? at $(el)s"
if [ -n "${MEMCHECK:-}" ]; then
    timeout 200 compute-sanitizer --tool memcheck build/hfp4_gpu_tests --filter gpu_fp8_weights_dense > "$OUT/memcheck_fw.txt" 2>&1
    echo "memcheck rc=$? at $(el)s"
fi
S=${SHAPES:-"--dense-shape 8192,8192,8192 --dense-shape 16384,7168,2048"}
# RUNS (replaces TILES): space-separated LABEL:ENV=VAL,ENV=VAL:BUILD_DIR entries (build dir default build),
# e.g. RUNS="tma:: reg:HFP4_SM90_FP8_WEIGHTS_DTMA=0: reg4:HFP4_SM90_FP8_WEIGHTS_DTMA=0:build-s4"
if [ -z "${RUNS:-}" ]; then
    RUNS=""
    for t in ${TILES:-auto 256 128}; do
        if [ "$t" = auto ]; then RUNS="$RUNS auto::"; else RUNS="$RUNS $t:HFP4_SM90_FP8_WEIGHTS_TILE=$t:"; fi
    done
fi
r=1
while [ "$(el)" -lt "${ROUNDS_UNTIL:-300}" ]; do
    for run in $RUNS; do
        label=${run%%:*} rest=${run#*:}
        envs=${rest%%:*} dir=${rest#*:}
        [ -z "$dir" ] && dir=build
        env $(echo "$envs" | tr ',' ' ') timeout 120 "$dir/hfp4" bench --only dense --sf-layout mn $S > "$OUT/bench_$label.$r.txt" 2>&1
        echo "round $r $label rc=$? at $(el)s"
    done
    r=$((r + 1))
done
cd "$OUT" && tar czf logs.tgz ./*.txt && rm -f ./*.txt
