#!/usr/bin/env bash
# HFP4_FW_SKIP_IDLE_WG (bench/RESULTS.md v45, built, not yet run): the grouped FP8 forms with a
# consumer warpgroup whose 64 rows are all padding stepping through its stages without wgmmas, and
# such a tile's A loaded 64 rows only (decode: a tile of a few rows moved as many A bytes as weights).
# First its FP8-weight tests (the contiguous and masked ones have such warpgroups), then the
# contiguous rows of main (build/hfp4) against it (build-skip/hfp4), interleaved until ~ROUNDS_UNTIL s.
# Built here first (carry build-pack):
#   cp -r build build-skip; rm build-skip/obj/src/kernels/sm90/fp8_fp8_gemm.cu.o
#   make BUILD=build-skip NVFLAGS_EXTRA=-DHFP4_FW_SKIP_IDLE_WG=1 build-skip/hfp4 build-skip/hfp4_gpu_tests
#   tar cJf build-pack/bins.tar.xz build/hfp4 build/libhfp4.so build/hfp4_gpu_tests build-skip/hfp4 build-skip/hfp4_gpu_tests
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p "$OUT"
[ -f build-pack/bins.tar.xz ] && tar xJf build-pack/bins.tar.xz
HFP4_SM90_FP8_WEIGHTS_MASKED=1 timeout 200 build-skip/hfp4_gpu_tests --fork --filter gpu_fp8_weights 2>&1 |
    tee "$OUT/skip_tests.log" | grep -E "^(ok|FAIL|skip)|passed|beyond|written" | grep -v " 0 bad, 0 padding" | tail -12
start=$(date +%s) round=0
while [ $(( $(date +%s) - start )) -lt ${ROUNDS_UNTIL:-300} ]; do
    round=$((round + 1))
    for b in build build-skip; do
        HFP4_SM90_FP8_WEIGHTS_MASKED=1 timeout 150 $b/hfp4 bench --only w13,w2 --tokens ${TOKENS:-8,32,4096,16384} \
            --sf-layout mn 2>&1 | grep -E "^fp8_fp8 " | cut -c1-130 | sed "s|^|round $round $b: |" | tee -a "$OUT/skip_ab.txt"
    done
done
