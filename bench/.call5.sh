#!/usr/bin/env bash
set -u
L=$OUT/logs; mkdir -p $L
finish() { tar czf $OUT/logs.tgz -C $OUT logs; }
trap finish EXIT
tar xJf b9/bins.tar.xz
OUT=$L/ab ALT=alt BUILD=build REPEAT=3 ARGS="--only graph --tokens 8,32" timeout 400 bash bench/ab_on_device.sh > $L/ab.txt 2>&1
