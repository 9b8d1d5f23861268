#!/usr/bin/env bash
set -u
L=$OUT/logs; mkdir -p $L
finish() { tar czf $OUT/logs.tgz -C $OUT logs; }
trap finish EXIT
tar xJf b9/bins.tar.xz
export HFP4_BENCH_SETTLE_MS=0
S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats"
timeout 200 ncu --clock-control none $S -k regex:fp8_fp4_gemm -c 1 build/hfp4 bench --only dense --iters 3 > $L/ncu_dense.txt 2>&1
timeout 200 ncu --clock-control none $S -k regex:fp8_fp4_gemm -c 1 build/hfp4 bench --only w13 --tokens 16384 --iters 3 > $L/ncu_w13_16k.txt 2>&1
timeout 150 ncu --clock-control none $S -k regex:fp8_fp4_gemm -c 1 build/hfp4 bench --only w13 --tokens 4096 --iters 3 > $L/ncu_w13_4k.txt 2>&1
