#!/usr/bin/env bash
set -u
L=$OUT/logs; mkdir -p $L
finish() { tar czf $OUT/logs.tgz -C $OUT logs; }
trap finish EXIT
tar xJf b9/bins.tar.xz
timeout 500 build/hfp4 bench --json > $L/bench.json 2> $L/bench.err
echo "bench rc $?" >> $L/bench.err
