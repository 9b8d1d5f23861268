#!/usr/bin/env bash
# Ran once (bench/RESULTS.md v44 call 3); HFP4_FW_A_VEC left the source (`git apply
# bench/patches/v44-fw-a-vec.patch` restores it). One device call: the HFP4_FW_A_VEC build's FP8-weight tests, clock-free ncu
# cycles of main and av at two shapes, conv_ss192's timing-only part builds, then interleaved
# sustained rounds of main and av. Built here first:
#   cp -r build build-av; rm build-av/obj/src/kernels/sm90/fp8_fp8_gemm.cu.o
#   make -j3 BUILD=build-av NVFLAGS_EXTRA=-DHFP4_FW_A_VEC=1 build-av/hfp4 build-av/hfp4_gpu_tests
#   nvcc ... -DCONV_SS_PART=1 / =2 bench/micro/conv_ss192.cu -o build-dev/conv_ss192_p1 / _p2 (Makefile's flags)
#   tar cJf build-pack/bins.tar.xz build/hfp4 build-av/hfp4 build-av/hfp4_gpu_tests build-dev/conv_ss192_p1 build-dev/conv_ss192_p2
# carry: build-pack. Usage: bash bench/fw_a_vec_on_device.sh (ROUNDS_UNTIL=70)
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p "$OUT"
[ -f build-pack/bins.tar.xz ] && tar xJf build-pack/bins.tar.xz
timeout 90 build-av/hfp4_gpu_tests --filter gpu_fp8_weights 2>&1 | grep -v " 0 bad" | tail -3
for p in 1 2; do
    [ -x build-dev/conv_ss192_p$p ] && { echo "== conv_ss192 CONV_SS_PART=$p (boost)"; timeout 60 build-dev/conv_ss192_p$p | sed -n 1,5p; }
done
{ OUT=/tmp/ncu-fw bash bench/ncu_fw_cycles.sh build/hfp4 build-av/hfp4
  SHAPE=16384,7168,2048 OUT=/tmp/ncu-fw bash bench/ncu_fw_cycles.sh build/hfp4 build-av/hfp4; } 2>&1 | tee "$OUT/ncu_cycles.txt"
BUILDS="main av" ROUNDS_UNTIL=${ROUNDS_UNTIL:-70} \
    ARGS="bench --only dense --sf-layout mn --dense-shape 8192,8192,8192 --dense-shape 16384,7168,2048" \
    bash bench/diag_gap_on_device.sh 2>&1 | grep -v "^micro"
# (the rounds' rows: $OUT/logs.tgz, as diag_gap_on_device.sh leaves them)
