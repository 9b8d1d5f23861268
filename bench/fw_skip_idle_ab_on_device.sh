#!/usr/bin/env bash
# The grouped FP8 forms' two kernels (bench/RESULTS.md v46): the one that skips a tile's warpgroups
# without rows (and loads only the live half of A) against the one that computes every warpgroup,
# forced with HFP4_SM90_FP8_WEIGHTS_SKIP_IDLE=1 / 0 in one binary. First the FP8-weight tests (which
# run both), then the fp8_fp8 experts rows of both, interleaved until ~ROUNDS_UNTIL s, next to the
# launcher's own choice (unset).
# Built here first (carry build-pack):
#   make -j3 BUILD=build all build/hfp4_gpu_tests
#   tar cJf build-pack/bins.tar.xz build/hfp4 build/libhfp4.so build/hfp4_gpu_tests
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p "$OUT"
[ -f build-pack/bins.tar.xz ] && tar xJf build-pack/bins.tar.xz
timeout 200 build/hfp4_gpu_tests --fork --filter gpu_fp8_weights 2>&1 |
    tee "$OUT/skip_tests.log" | grep -E "^(ok|FAIL|skip)|passed|beyond|written" | grep -v " 0 bad, 0 padding" | tail -12
start=$(date +%s) round=0
while [ $(( $(date +%s) - start )) -lt ${ROUNDS_UNTIL:-300} ]; do
    round=$((round + 1))
    for skip in 0 1 auto; do
        if [ $skip = auto ]; then unset HFP4_SM90_FP8_WEIGHTS_SKIP_IDLE; else export HFP4_SM90_FP8_WEIGHTS_SKIP_IDLE=$skip; fi
        timeout 150 build/hfp4 bench --only w13,w2 --tokens ${TOKENS:-8,32,4096,16384} --sf-layout mn 2>&1 |
            grep -E "^fp8_fp8 " | cut -c1-130 | sed "s|^|round $round skip=$skip: |" | tee -a "$OUT/skip_ab.txt"
    done
done
