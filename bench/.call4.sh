#!/usr/bin/env bash
set -u
L=$OUT/logs; mkdir -p $L
finish() { tar czf $OUT/logs.tgz -C $OUT logs; }
trap finish EXIT
tar xJf b9/bins.tar.xz
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv > $L/env.txt
OUT=$L/ab ALT=alt BUILD=build REPEAT=2 ARGS="--only graph --tokens 8,32,128" timeout 330 bash bench/ab_on_device.sh > $L/ab.txt 2>&1
timeout 240 build/hfp4_gpu_tests --fork > $L/gpu_tests.log 2>&1; echo "tests rc $?" >> $L/gpu_tests.log
