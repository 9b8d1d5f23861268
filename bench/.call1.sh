#!/usr/bin/env bash
# session 19 call 1: the L2 flush's state (dirty vs clean) at T = 1 and 8; memcheck of narrow items; tp-pro split row
set -u
L=$OUT/logs; mkdir -p $L
finish() { tar czf $OUT/logs.tgz -C $OUT logs; }
trap finish EXIT
tar xJf b9/bins.tar.xz
B=build
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv > $L/env.txt
for f in write read; do
  timeout 120 $B/hfp4 bench --only graph,gemv,launch --tokens 1,8 --l2-flush $f > $L/graph_$f.txt 2>&1
done
HFP4_SM90_WARP_DECODE=1 timeout 100 $B/hfp4 bench --only graph,gemv --tokens 1,8 > $L/graph_read_warp.txt 2>&1
timeout 100 $B/hfp4 bench --only w13,w2 --tokens 1,8,32 --l2-flush write > $L/stream_write.txt 2>&1
timeout 100 $B/hfp4 bench --only w13,w2 --tokens 1,8,32 > $L/stream_read.txt 2>&1
for r in 8 32; do
  HFP4_SM90_SPLIT_ROW=$r timeout 100 $B/hfp4 bench --only tp-pro --contiguous-hint none > $L/tppro_row$r.txt 2>&1
done
timeout 150 compute-sanitizer --tool memcheck $B/hfp4_gpu_tests --filter gpu_narrow_items > $L/memcheck_narrow.txt 2>&1; echo "memcheck rc $?" >> $L/memcheck_narrow.txt
