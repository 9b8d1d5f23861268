#!/usr/bin/env bash
# The FP8 x FP8 kernel under ncu for the given builds (default: build/hfp4 and the timing build
# build-fwc/hfp4, -DHFP4_FW_DIAG_NO_FACTORS -DHFP4_FW_DIAG_CONST_FACTORS), SHAPE (default 8192^3),
# clocks left alone: cycles of 8 launches each, then one launch with --set full, its details page
# and, summarized on the device, where its warps wait per SASS instruction (bench/ncu_source_top.py:
# the full source CSV is megabytes and did not come back, bench/RESULTS.md v43). Text under $OUT.
# STALLS=1 also writes each build's warp stall reasons of one launch as CSV (stall_<build>.csv; was
# bench/ncu_fw_stalls.sh, bench/RESULTS.md v43: the factor path showed as wgmma waits).
#   bash bench/ncu_fw_compare.sh [BUILD/hfp4 ...]        (SHAPE=m,n,k, TOP=60, STALLS=1)
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p $OUT
builds=${*:-build/hfp4 build-fwc/hfp4}
args="bench --only dense --sf-layout mn --dense-shape ${SHAPE:-8192,8192,8192} --iters 3"
for b in $builds; do
  n=$(echo $b | cut -d/ -f1)
  HFP4_BENCH_SETTLE_MS=0 HFP4_BENCH_WATCHDOG_S=0 timeout 150 ncu --clock-control none --csv --print-units base --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__inst_executed.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active -k regex:fp8_fp8_gemm_kernel -c 8 $b $args > $OUT/cyc_$n.csv 2> $OUT/cyc_$n.err
  echo "cycles $n rc=$?"
  rep=/tmp/ncu_full_$n
  HFP4_BENCH_SETTLE_MS=0 HFP4_BENCH_WATCHDOG_S=0 timeout 200 ncu --clock-control none --set full --import-source yes -k regex:fp8_fp8_gemm_kernel -s 2 -c 1 -f -o $rep $b $args > $OUT/full_$n.log 2>&1
  echo "full $n rc=$?"
  ncu --import $rep.ncu-rep --page details > $OUT/details_$n.txt 2>&1
  ncu --import $rep.ncu-rep --page source --csv --print-source sass > /tmp/src_$n.csv 2>&1
  python3 bench/ncu_source_top.py /tmp/src_$n.csv ${TOP:-60} > $OUT/src_top_$n.txt 2>&1
  echo "source $n rc=$? ($(head -1 $OUT/src_top_$n.txt))"
  rm -f $rep.ncu-rep /tmp/src_$n.csv
  if [ -n "${STALLS:-}" ]; then
    HFP4_BENCH_SETTLE_MS=0 HFP4_BENCH_WATCHDOG_S=0 timeout 150 ncu --clock-control none --csv --print-units base --metrics "regex:smsp__(average_)?warps?_issue_stalled_.*_per_warp_active\.pct,regex:smsp__pcsamp_warps_issue_stalled_.*,sm__cycles_elapsed.max,smsp__warps_active.avg.per_cycle_active" -k regex:fp8_fp8_gemm_kernel -s 2 -c 1 $b $args > $OUT/stall_$n.csv 2> $OUT/stall_$n.err
    echo "stalls $n rc=$? ($(grep -c stalled $OUT/stall_$n.csv) rows)"
  fi
done
