#!/usr/bin/env bash
set -u
L=$OUT/logs; mkdir -p $L
finish() { tar czf $OUT/logs.tgz -C $OUT logs; }
trap finish EXIT
tar xJf b9/bins.tar.xz
for r in 1 2; do
  timeout 60 build/hfp4 bench --only graph,gemv --tokens 1 > $L/ldcg_$r.txt 2>&1
  timeout 60 alt/hfp4-ldcs bench --only graph,gemv --tokens 1 > $L/ldcs_$r.txt 2>&1
  timeout 60 build/hfp4 bench --only graph,gemv --tokens 1 --l2-flush write > $L/write_$r.txt 2>&1
done
