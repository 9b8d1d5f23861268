#!/usr/bin/env bash
# The FP8 x FP8 contiguous kernels with their tiles handed out in order (-DHFP4_FW_DYNAMIC_TILES=1,
# fw_dynamic_tiles.cuh) against main's fixed stride, in one device call: the FP8-weight tests on the
# A/B build (the contiguous test, with and without a counter slot) with compute-sanitizer memcheck
# and racecheck on it; ncu's DRAM and L2
# traffic of one V4-Flash w13 T = 16384 launch for both builds with the SKIP kernels forced off and
# on (the suspect for the SKIP kernels' -7...-9 %: CTAs drifting apart, bench/RESULTS.md v48), and
# of the FP8 x FP4 kernel at the same shape (does issue 5's grouped prefill drift too?); then the
# contiguous rows of both builds interleaved (ROUNDS_UNTIL seconds).
# Built here first (carry build-pack):
#   make -j3 BUILD=build all build/hfp4_gpu_tests
#   rm -rf build-dyn && cp -a build build-dyn && touch src/kernels/sm90/fp8_fp8_gemm.cu &&
#     make -j3 BUILD=build-dyn NVFLAGS_EXTRA=-DHFP4_FW_DYNAMIC_TILES=1 all build-dyn/hfp4_gpu_tests
#   tar cJf build-pack/bins.tar.xz build/hfp4 build/libhfp4.so build-dyn/hfp4 build-dyn/libhfp4.so \
#     build-dyn/hfp4_gpu_tests
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p "$OUT"
[ -f build-pack/bins.tar.xz ] && tar xJf build-pack/bins.tar.xz
# (only the contiguous kernels differ from main's in the A/B build: bench/sass_same.sh)
timeout 200 build-dyn/hfp4_gpu_tests --fork --time-limit 100 --filter gpu_fp8_weights_contiguous 2>&1 | tee "$OUT/dyn_tests.log" |
    grep -E "^(ok|FAIL|skip)|passed" | tail -8
# (a failing or hanging A/B build stops the call here: the timings below would only hang too)
grep -q "^ok   gpu_fp8_weights_contiguous" "$OUT/dyn_tests.log" || { echo "the A/B build's test did not pass: stop"; exit 1; }
# (the fixed-stride path of the same build, with its padding tiles' empty stages: no counter slot)
HFP4_SM90_DYNAMIC=0 timeout 100 build-dyn/hfp4_gpu_tests --fork --time-limit 90 --filter gpu_fp8_weights_contiguous 2>&1 |
    grep -E "^(ok|FAIL)" | sed "s|^|HFP4_SM90_DYNAMIC=0: |"
# (racecheck may report the ring's polls, fw_dynamic_tiles.cuh: a hazard elsewhere is a failure)
for tool in memcheck racecheck; do
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 build-dyn/hfp4_gpu_tests \
        --filter gpu_fp8_weights_contiguous > "$OUT/dyn_$tool.log" 2>&1
    echo "$tool contiguous (dyn): exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/dyn_$tool.log" | tail -n 1))"
done
{
    for b in build build-dyn; do
        OUT=/tmp/ncu_$b bash bench/ncu_fw_skip_compare.sh $b/hfp4 > /dev/null 2>&1
        for s in 0 1; do
            echo "== $b skip=$s"
            grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|SM Frequency|dram__bytes" \
                /tmp/ncu_$b/details_skip$s.txt | sed 's/  */ /g'
        done
    done
    HFP4_BENCH_SETTLE_MS=0 HFP4_BENCH_WATCHDOG_S=0 HFP4_BENCH_ENERGY_MS=0 timeout 200 ncu --clock-control none \
        --section SpeedOfLight --metrics dram__bytes_read.sum,dram__bytes_write.sum -k regex:fp8_fp4_gemm_kernel -s 1 -c 1 build/hfp4 bench --only w13 --tokens 16384 \
        --sf-layout mn --iters 3 > /tmp/ncu_fp4.txt 2>&1
    echo "== the FP8 x FP4 kernel (main), w13 T = 16384"
    grep -E "fp8_fp4_gemm_kernel|Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|SM Frequency|dram__bytes" \
        /tmp/ncu_fp4.txt | sed 's/  */ /g'
} | tee "$OUT/ncu_dram.txt"
ROUNDS_UNTIL=${ROUNDS_UNTIL:-150} bash bench/fw_contiguous_rounds.sh build build-dyn | tee "$OUT/dyn_ab.txt"
