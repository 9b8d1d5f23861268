#!/usr/bin/env bash
# The FP8 x FP8 contiguous kernels with and without idle-warpgroup skipping (the SKIP kernels,
# HFP4_SM90_FP8_WEIGHTS_SKIP_IDLE=1 / =0) under ncu at one prefill shape, clocks left alone: one
# launch each with the speed-of-light, warp-state, instruction and scheduler sections; their details
# pages under $OUT (the SKIP kernels' -7...-9 % at V4-Flash w13 T = 16384 is not understood:
# bench/RESULTS.md v47, v48).
#   bash bench/ncu_fw_skip_compare.sh [BUILD/hfp4]     (WHICH=w13, TOKENS=16384)
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p $OUT
bin=${1:-build/hfp4}
for skip in 0 1; do
    rep=/tmp/ncu_skip$skip
    HFP4_SM90_FP8_WEIGHTS_SKIP_IDLE=$skip HFP4_BENCH_SETTLE_MS=0 HFP4_BENCH_WATCHDOG_S=0 HFP4_BENCH_ENERGY_MS=0 \
        timeout 200 ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
        --section InstructionStats --section SchedulerStats --section LaunchStats --section Occupancy \
        --metrics dram__bytes_read.sum,dram__bytes_write.sum \
        -k regex:fp8_fp8_gemm_kernel -s 1 -c 1 -f -o $rep $bin bench --only ${WHICH:-w13} \
        --tokens ${TOKENS:-16384} --sf-layout mn --iters 3 > $OUT/ncu_skip$skip.log 2>&1
    echo "skip=$skip rc=$?"
    ncu --import $rep.ncu-rep --page details > $OUT/details_skip$skip.txt 2>&1
    rm -f $rep.ncu-rep
done
