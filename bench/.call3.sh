#!/usr/bin/env bash
set -u
L=$OUT/logs; mkdir -p $L
finish() { tar czf $OUT/logs.tgz -C $OUT logs; }
trap finish EXIT
tar xJf b9/bins.tar.xz
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv > $L/env.txt
for v in base split warp; do
  case $v in base) E="";; split) E="HFP4_SM90_SPLIT=1";; warp) E="HFP4_SM90_WARP_DECODE=1";; esac
  env $E timeout 60 build/hfp4 bench --only graph --tokens 1,8 > $L/t1_$v.txt 2>&1
done
timeout 460 build/hfp4 bench --json > $L/bench.json 2> $L/bench.err
echo "bench rc $?" >> $L/bench.err
