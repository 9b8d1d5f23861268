#!/usr/bin/env bash
# Warp stall reasons of the FP8 x FP8 kernel (one launch at 8192^3, ncu --clock-control none) for
# main (build/hfp4) and build-fwc/hfp4, as CSV under $OUT (bench/RESULTS.md v43: the factor path
# shows as wgmma waits, smsp__warp_issue_stalled_gmma 10.5 % against 2.8 %).
set -u
mkdir -p $OUT
for b in build/hfp4 build-fwc/hfp4; do
  n=$(dirname $b)
  HFP4_BENCH_SETTLE_MS=0 HFP4_BENCH_WATCHDOG_S=0 timeout 150 ncu --clock-control none --csv --print-units base --metrics "regex:smsp__(average_)?warps?_issue_stalled_.*_per_warp_active\.pct,regex:smsp__pcsamp_warps_issue_stalled_.*,sm__cycles_elapsed.max,smsp__warps_active.avg.per_cycle_active" -k regex:fp8_fp8_gemm_kernel -s 2 -c 1 $b bench --only dense --sf-layout mn --dense-shape 8192,8192,8192 --iters 3 > $OUT/stall_$n.csv 2> $OUT/stall_$n.err
  echo "$n rc=$?"; grep -c stalled $OUT/stall_$n.csv
done
