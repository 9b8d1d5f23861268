#!/usr/bin/env bash
set -u
L=$OUT/logs; mkdir -p $L
finish() { tar czf $OUT/logs.tgz -C $OUT logs; }
trap finish EXIT
tar xJf b9/bins.tar.xz
for f in read write; do
HFP4_DIAG_TIMELINE=1 timeout 120 build/hfp4-diag bench --only w13,w2 --tokens 1,8 --iters 5 --l2-flush $f > $L/diag_$f.txt 2>&1
done
