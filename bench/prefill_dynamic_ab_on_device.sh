#!/usr/bin/env bash
# The FP8 x FP4 kernel's 128-token tile with the contiguous layout's items handed out in order
# (-DHFP4_SM90_PREFILL_DYNAMIC=1, dynamic_walk.cuh) against main's fixed-stride walk, in one device
# call: the A/B build's tests that run the 128-token tile on contiguous layouts with more items than
# CTAs (and HFP4_SM90_DYNAMIC=0 on one of them: no slot, main's walk), compute-sanitizer memcheck on
# the raster-group test; ncu's DRAM bytes of one V4-Flash w13 T = 16384 launch for both builds (the
# suspect: CTAs drifting apart under the fixed stride, bench/RESULTS.md v48); then the fp8_fp4
# contiguous rows of both builds interleaved (ROUNDS_UNTIL seconds, default 150).
# Built here first (carry build-pack):
#   make -j3 BUILD=build all build/hfp4_gpu_tests
#   rm -rf build-pdyn && cp -a build build-pdyn && touch src/kernels/sm90/fp8_fp4_gemm.cu &&
#     make -j3 BUILD=build-pdyn NVFLAGS_EXTRA=-DHFP4_SM90_PREFILL_DYNAMIC=1 all build-pdyn/hfp4_gpu_tests
#   tar cJf build-pack/bins.tar.xz build/hfp4 build/libhfp4.so build-pdyn/hfp4 build-pdyn/libhfp4.so \
#     build-pdyn/hfp4_gpu_tests
# Usage: bash bench/prefill_dynamic_ab_on_device.sh [BASE AB...] (default: build build-pdyn; the tests run
# on each AB build). NCU_CASES (default "w13:16384 w2:16384") picks ncu's shapes, TOKENS the rows'.
# (Session 48 measured a fetch-ahead variant this way, build-pdyn2: warp 0 taking item j + 1's rank
# as it posted item j's; level with build-pdyn, so not kept: bench/RESULTS.md v49.)
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p "$OUT"
[ -f build-pack/bins.tar.xz ] && tar xJf build-pack/bins.tar.xz
[ $# -ge 2 ] && builds="$*" || builds="build build-pdyn"
ab_builds=${TEST_BUILDS:-${builds#* }} # (TEST_BUILDS: only these tested)
for b in $ab_builds; do
    for f in gpu_grouped_contiguous contiguous_raster contiguous_padding narrow_items deepseek_v4_pro folded_and_per32 \
             per32_chunks_every 1x32_activation two_streams dyn_slots moe_forward; do
        timeout 120 $b/hfp4_gpu_tests --fork --time-limit 100 --filter $f 2>&1 | grep -E "^(ok|FAIL|skip)" | sed "s|^|$b: |"
    done
done | tee "$OUT/pdyn_tests.log"
# (a failing or hanging A/B build stops the call here: the timings below would only hang too)
if grep -q "FAIL" "$OUT/pdyn_tests.log" || ! grep -q ": ok" "$OUT/pdyn_tests.log"; then
    echo "the A/B builds' tests did not all pass: stop"; exit 1
fi
for b in $ab_builds; do
    HFP4_SM90_DYNAMIC=0 timeout 60 $b/hfp4_gpu_tests --fork --time-limit 50 --filter gpu_grouped_contiguous 2>&1 |
        grep -E "^(ok|FAIL)" | sed "s|^|$b HFP4_SM90_DYNAMIC=0: |"
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $b/hfp4_gpu_tests \
        --filter contiguous_raster > "$OUT/pdyn_memcheck.log" 2>&1
    echo "memcheck contiguous_raster ($b): exit $? ($(grep 'ERROR SUMMARY' "$OUT/pdyn_memcheck.log" | tail -n 1))"
done
for b in $builds; do
    for c in ${NCU_CASES:-w13:16384 w2:16384}; do
        HFP4_BENCH_SETTLE_MS=0 HFP4_BENCH_WATCHDOG_S=0 HFP4_BENCH_ENERGY_MS=0 timeout 200 ncu --clock-control none \
            --section SpeedOfLight --metrics dram__bytes_read.sum,dram__bytes_write.sum -k regex:fp8_fp4_gemm_kernel \
            -s 1 -c 1 $b/hfp4 bench --only ${c%:*} --tokens ${c#*:} --sf-layout mn --iters 3 > /tmp/ncu_$b.txt 2>&1
        echo "== $b ${c%:*} T = ${c#*:}"
        grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|SM Frequency|dram__bytes" \
            /tmp/ncu_$b.txt | sed 's/  */ /g'
    done
done | tee "$OUT/pdyn_ncu.txt"
start=$(date +%s) round=0
while [ $(( $(date +%s) - start )) -lt ${ROUNDS_UNTIL:-150} ]; do
    round=$((round + 1))
    for b in $builds; do
        timeout 150 $b/hfp4 bench --only w13,w2 --tokens ${TOKENS:-4096,16384} --sf-layout mn 2>&1 |
            grep -E "^fp8_fp4 +contiguous" | cut -c1-112 | sed "s|^|round $round $b: |"
    done
done | tee "$OUT/pdyn_ab.txt"
