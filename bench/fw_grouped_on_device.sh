#!/usr/bin/env bash
# The FP8 x FP8 kernel's grouped forms (m-grouped contiguous, RESULTS v45; masked) in one device
# call: their tests and the dense FP8-weight tests, compute-sanitizer memcheck and racecheck on the
# grouped ones, the Python tests, then the dense and grouped rows as a check that nothing moved.
# Built here first:
#   make -j3 BUILD=build all build/hfp4_gpu_tests
#   tar cJf build-pack/bins.tar.xz build/hfp4 build/libhfp4.so build/hfp4_gpu_tests
# carry: build-pack. Usage on the device: bash bench/fw_grouped_on_device.sh   (logs under $OUT)
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p "$OUT"
[ -f build-pack/bins.tar.xz ] && tar xJf build-pack/bins.tar.xz
timeout 200 build/hfp4_gpu_tests --fork --filter gpu_fp8_weights 2>&1 | tee "$OUT/fp8_weights_tests.log" |
    grep -E "^(ok|FAIL|skip)|passed|bad|not \+0|beyond|written" | grep -v " 0 bad, 0 padding" | tail -30
for tool in memcheck racecheck; do
    for f in gpu_fp8_weights_contiguous gpu_fp8_weights_masked; do
        timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 build/hfp4_gpu_tests --filter $f \
            > "$OUT/sanitizer_${tool}_$f.log" 2>&1
        echo "compute-sanitizer $tool $f: exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_${tool}_$f.log" | tail -n 1))"
    done
done
# the Python layer (hfp4.deep_gemm's grouped entries with FP8 weights among them): every test
HFP4_LIBRARY=$PWD/build/libhfp4.so PYTHONPATH=python timeout 200 python3 -m pytest -q python/tests -p no:cacheprovider \
    > "$OUT/pytest.log" 2>&1
echo "pytest: exit $? ($(tail -n 1 "$OUT/pytest.log"))"
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -10
timeout 120 build/hfp4 bench --only dense --sf-layout mn --dense-shape 8192,8192,8192 2>&1 |
    grep -E "^fp8_fp(8|4) +dense" | tee "$OUT/dense_rows.txt" | cut -c1-150
# the grouped rows (fp8_fp8 contiguous next to the FP4 ones, T >= 4096; fp8_fp8 masked at decode)
timeout 150 build/hfp4 bench --only w13,w2 --tokens 1,8,32,128,16384 --sf-layout mn \
    > "$OUT/grouped_bench.txt" 2>&1
grep -E "^fp8_fp(8|4) +(contiguous|masked) " "$OUT/grouped_bench.txt" | cut -c1-170
# where the grouped FP8 form loses against dense (RESULTS v45: 0.83x cuBLASLt over computed rows):
# the dense FP8 x FP8 kernel at the grouped launch's computed rows (~114688 at V4-Flash T = 16384),
# K = 4096, with the 128-row tile forced, next to the same cuBLASLt baseline
HFP4_SM90_FP8_WEIGHTS_TILE=128 timeout 120 build/hfp4 bench --only dense --sf-layout mn \
    --dense-shape 114688,4096,4096 --dense-shape 114688,4096,2048 2>&1 | grep -E "^fp8_fp8 +dense" | cut -c1-150
