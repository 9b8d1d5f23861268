#!/usr/bin/env bash
# The FP8-weight path's few-row kernel (fp8_fp8_gemv.cu, bench/RESULTS.md v46) and the grouped forms'
# idle-warpgroup kernels as a per-shape choice, in one device call: every FP8-weight GPU test (the
# grouped ones run both kernels), compute-sanitizer memcheck and racecheck on the new paths, every
# Python test, then decode-sized dense rows with the few-row kernel and without it
# (HFP4_SM90_FP8_GEMV=0: the tile kernel), interleaved, and the grouped fp8_fp8 rows with the skip
# forced each way and left to the launcher.
# Built here first (carry build-pack):
#   make -j3 BUILD=build all build/hfp4_gpu_tests
#   tar cJf build-pack/bins.tar.xz build/hfp4 build/libhfp4.so build/hfp4_gpu_tests
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p "$OUT"
[ -f build-pack/bins.tar.xz ] && tar xJf build-pack/bins.tar.xz
timeout 120 build/hfp4 verify 2>&1 | tee "$OUT/verify.log" | tail -12   # (the FP4 and FP8-weight checks)
timeout 300 build/hfp4_gpu_tests --fork --filter gpu_fp8_weights 2>&1 | tee "$OUT/fp8_weights_tests.log" |
    grep -E "^(ok|FAIL|skip)|passed|bad|not \+0|beyond|written" | grep -v " 0 bad, 0 padding" | tail -12
for tool in memcheck racecheck; do
    for f in gpu_fp8_weights_gemv gpu_fp8_weights_contiguous gpu_fp8_weights_masked; do
        timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 build/hfp4_gpu_tests --filter $f \
            > "$OUT/sanitizer_${tool}_$f.log" 2>&1
        echo "compute-sanitizer $tool $f: exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_${tool}_$f.log" | tail -n 1))"
    done
done | tee "$OUT/sanitizers.txt"
HFP4_LIBRARY=$PWD/build/libhfp4.so PYTHONPATH=python timeout 200 python3 -m pytest -q python/tests -p no:cacheprovider \
    > "$OUT/pytest.log" 2>&1
echo "pytest: exit $? ($(tail -n 1 "$OUT/pytest.log"))"
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -10
shapes="--dense-shape 1,7168,2048 --dense-shape 8,7168,2048 --dense-shape 32,7168,2048 --dense-shape 64,7168,2048
        --dense-shape 1,4096,4096 --dense-shape 16,4096,4096 --dense-shape 1,32768,1024 --dense-shape 1,2048,7168"
for round in 1 2; do
    for gemv in 1 0; do
        HFP4_SM90_FP8_GEMV=$gemv timeout 150 build/hfp4 bench --only dense --sf-layout mn $shapes 2>&1 |
            grep -E "^fp8_fp8 +dense" | cut -c1-150 | sed "s|^|round $round gemv=$gemv: |"
    done
done | tee "$OUT/gemv_rows.txt"
# the few-row kernel's masked form (opt-in, HFP4_SM90_FP8_GEMV_MASKED=1) against the tile kernel's
# SKIP form at decode: fp8_fp8 masked rows, T = 1, 8, 32
for few in 0 1; do
    HFP4_SM90_FP8_GEMV_MASKED=$few timeout 150 build/hfp4 bench --only w13,w2 --tokens 1,8,32 --sf-layout mn 2>&1 |
        grep -E "^fp8_fp8 +masked" | cut -c1-130 | sed "s|^|gemv_masked=$few: |"
done | tee "$OUT/gemv_masked_rows.txt"
for skip in 0 1 auto; do
    if [ $skip = auto ]; then unset HFP4_SM90_FP8_WEIGHTS_SKIP_IDLE; else export HFP4_SM90_FP8_WEIGHTS_SKIP_IDLE=$skip; fi
    timeout 150 build/hfp4 bench --only w13,w2 --tokens 8,32,4096,16384 --sf-layout mn 2>&1 |
        grep -E "^fp8_fp8 " | cut -c1-130 | sed "s|^|skip=$skip: |"
done | tee "$OUT/skip_rows.txt"
