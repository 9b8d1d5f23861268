#!/usr/bin/env bash
# The FP8 x FP8 kernel's m-grouped contiguous form (bench/RESULTS.md v44, built but not yet run) in one
# device call: its tests and the dense FP8-weight tests, compute-sanitizer memcheck and racecheck on
# the grouped ones, then the dense rows as a check that nothing moved. Built here first:
#   make -j3 BUILD=build all build/hfp4_gpu_tests
#   tar cJf build-pack/bins.tar.xz build/hfp4 build/libhfp4.so build/hfp4_gpu_tests
# carry: build-pack. Usage on the device: bash bench/fw_grouped_on_device.sh   (logs under $OUT)
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p "$OUT"
[ -f build-pack/bins.tar.xz ] && tar xJf build-pack/bins.tar.xz
timeout 200 build/hfp4_gpu_tests --fork --filter gpu_fp8_weights 2>&1 | tee "$OUT/fp8_weights_tests.log" |
    grep -E "^(ok|FAIL|skip)|passed|bad|not \+0|beyond|written" | grep -v " 0 bad, 0 padding" | tail -30
# its speed: the experts rows with the grouped form on (fp8_fp8 contiguous rows, T >= 4096)
timeout 150 build/hfp4 bench --only w13,w2 --tokens 4096,16384 --sf-layout mn \
    > "$OUT/grouped_bench.txt" 2>&1
grep -E "contiguous|^#|baseline" "$OUT/grouped_bench.txt" | cut -c1-170 | head -30
for tool in memcheck racecheck; do
    timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 build/hfp4_gpu_tests --filter gpu_fp8_weights_contiguous \
        > "$OUT/sanitizer_$tool.log" 2>&1
    echo "compute-sanitizer $tool: exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | tail -n 1))"
done
# the Python entry (hfp4.deep_gemm's contiguous GEMM with FP8 weights): its emulated and GPU tests
HFP4_LIBRARY=$PWD/build/libhfp4.so PYTHONPATH=python timeout 200 python3 -m pytest -q python/tests -p no:cacheprovider \
    -m "gpu or not gpu" -k "fp8_weights_contiguous or fp8_weights_dense or test_errors" 2>&1 | tail -4
timeout 120 build/hfp4 bench --only dense --sf-layout mn --dense-shape 8192,8192,8192 2>&1 |
    grep -E "^fp8_fp(8|4) +dense" | tee "$OUT/dense_rows.txt" | cut -c1-150
