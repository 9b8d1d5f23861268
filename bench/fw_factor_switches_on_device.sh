#!/usr/bin/env bash
# Ran once (bench/RESULTS.md v44): HFP4_FW_BS_CHUNK became the kernel's only form and HFP4_FW_A_BULK
# left the source (`git apply bench/patches/v44-fw-a-bulk-and-per-stage-b-scale.patch` restores
# both switches); kept as the method for a switch's A/B.
# The FP8 x FP8 kernel's factor-path switches (bench/RESULTS.md v43) in one device call: the tests
# of each build, clock-free ncu cycles at two shapes, then interleaved sustained rounds at the cap.
# Built here first (each its own build folder; fp8_fp8_gemm.cu is the only object that differs):
#   make -j3 BUILD=build-bc  NVFLAGS_EXTRA=-DHFP4_FW_BS_CHUNK=1 build-bc/hfp4 build-bc/hfp4_gpu_tests
#   make -j3 BUILD=build-ab  NVFLAGS_EXTRA=-DHFP4_FW_A_BULK=1   build-ab/hfp4 build-ab/hfp4_gpu_tests
#   make -j3 BUILD=build-abc NVFLAGS_EXTRA="-DHFP4_FW_A_BULK=1 -DHFP4_FW_BS_CHUNK=1" build-abc/hfp4 build-abc/hfp4_gpu_tests
#   tar cJf build-pack/bins.tar.xz build/hfp4 build/libhfp4.so build-{bc,ab,abc}/hfp4 build-{bc,ab,abc}/hfp4_gpu_tests
# carry: build-pack (~15 MB). Usage on the device: bash bench/fw_factor_switches_on_device.sh
# (VARIANTS="bc ab abc", ROUNDS_UNTIL=150). Logs: all in $OUT/logs.tgz (tests and cycles also on stdout).
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p "$OUT"
[ -f build-pack/bins.tar.xz ] && tar xJf build-pack/bins.tar.xz
V=${VARIANTS:-bc ab abc}
for n in $V; do
    echo "== $n"
    timeout 90 build-$n/hfp4_gpu_tests --filter gpu_fp8_weights 2>&1 | grep -v " 0 bad" | tail -4
done > "$OUT/tests.txt" 2>&1
cat "$OUT/tests.txt"
# (the Python layer's torch-backed tests that this project's CPU machines skip: RESULTS v43 item 3)
[ -f build/libhfp4.so ] && HFP4_LIBRARY=$PWD/build/libhfp4.so timeout 120 python3 -m pytest -q python/tests \
    -m "not gpu" -k "clear or learning or weight_cache" 2>&1 | tail -3
bins="build/hfp4"
for n in $V; do bins="$bins build-$n/hfp4"; done
{ OUT=/tmp/ncu-fw bash bench/ncu_fw_cycles.sh $bins
  SHAPE=16384,7168,2048 OUT=/tmp/ncu-fw bash bench/ncu_fw_cycles.sh $bins; } > "$OUT/ncu_cycles.txt" 2>&1
cat "$OUT/ncu_cycles.txt"
BUILDS="main $V" ROUNDS_UNTIL=${ROUNDS_UNTIL:-150} \
    ARGS="bench --only dense --sf-layout mn --dense-shape 8192,8192,8192 --dense-shape 16384,7168,2048" \
    bash bench/diag_gap_on_device.sh
