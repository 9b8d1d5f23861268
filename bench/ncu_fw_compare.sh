#!/usr/bin/env bash
# The FP8 x FP8 kernel under ncu for main (build/hfp4) and the timing build build-fwc/hfp4
# (-DHFP4_FW_DIAG_NO_FACTORS -DHFP4_FW_DIAG_CONST_FACTORS), 8192^3, clocks left alone: cycles of 8
# launches each, then one launch with --set full, its details page and per-SASS-line source page as
# text under $OUT (bench/RESULTS.md v43; the source CSVs were too large to come back: drop them or
# filter them on the device next time).
set -u
mkdir -p $OUT
for b in build/hfp4 build-fwc/hfp4; do
  n=$(echo $b | cut -d/ -f1)
  HFP4_BENCH_SETTLE_MS=0 HFP4_BENCH_WATCHDOG_S=0 timeout 150 ncu --clock-control none --csv --print-units base --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__inst_executed.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active -k regex:fp8_weights_kernel -c 8 $b bench --only dense --sf-layout mn --dense-shape 8192,8192,8192 --iters 3 > $OUT/cyc_$n.csv 2> $OUT/cyc_$n.err
  echo "cycles $n rc=$?"
  HFP4_BENCH_SETTLE_MS=0 HFP4_BENCH_WATCHDOG_S=0 timeout 200 ncu --clock-control none --set full --import-source yes -k regex:fp8_weights_kernel -s 2 -c 1 -o $OUT/full_$n $b bench --only dense --sf-layout mn --dense-shape 8192,8192,8192 --iters 3 > $OUT/full_$n.log 2>&1
  echo "full $n rc=$?"
  ncu --import $OUT/full_$n.ncu-rep --page details > $OUT/details_$n.txt 2>&1
  ncu --import $OUT/full_$n.ncu-rep --page source --csv --print-source sass > $OUT/src_$n.csv 2>&1
  rm -f $OUT/full_$n.ncu-rep
done
