#!/usr/bin/env bash
# The FP8 x FP8 contiguous kernels with their consumers' layout reads a tile ahead
# (HFP4_FW_LAYOUT_AHEAD=1, fp8_fp8_gemm.cu: fw_layout_ahead; the default since bench/RESULTS.md v48)
# against the tile-start reads, in one device call. As run for v47/v48 "build" was main with the
# reads at each tile start; to repeat it now, build "build" with NVFLAGS_EXTRA=-DHFP4_FW_LAYOUT_AHEAD=0:
# the FP8-weight tests on the A/B build (compute-sanitizer memcheck on the contiguous test), then the
# fp8_fp8 contiguous rows of both builds interleaved, with the SKIP kernels forced each way (the
# suspect for their -6/-7 % at V4-Flash T = 16384 is the idle test's L2 round trip at every tile
# start, read behind the branch on the expert: bench/RESULTS.md v47). Then (KW_SWEEP=0 skips it)
# the masked few-row form's warps a row group forced to 1, 2, 4, 8 at T = 1, 8, 32 next to the tile
# kernel (its T = 8 loss: each unit restarts its loads, RESULTS v47 ready list).
# Built here first (carry build-pack):
#   make -j3 BUILD=build all build/hfp4_gpu_tests
#   cp -a build build-ahead && touch src/kernels/sm90/fp8_fp8_gemm.cu &&
#     make -j3 BUILD=build-ahead NVFLAGS_EXTRA=-DHFP4_FW_LAYOUT_AHEAD=1 all build-ahead/hfp4_gpu_tests
#   tar cJf build-pack/bins.tar.xz build/hfp4 build/libhfp4.so build-ahead/hfp4 build-ahead/libhfp4.so \
#     build-ahead/hfp4_gpu_tests
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p "$OUT"
[ -f build-pack/bins.tar.xz ] && tar xJf build-pack/bins.tar.xz
timeout 240 build-ahead/hfp4_gpu_tests --fork --filter gpu_fp8_weights 2>&1 | tee "$OUT/ahead_tests.log" |
    grep -E "^(ok|FAIL|skip)|passed" | tail -8
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 build-ahead/hfp4_gpu_tests \
    --filter gpu_fp8_weights_contiguous > "$OUT/ahead_memcheck.log" 2>&1
echo "memcheck contiguous (ahead): exit $? ($(grep 'ERROR SUMMARY' "$OUT/ahead_memcheck.log" | tail -n 1))"
ROUNDS_UNTIL=${ROUNDS_UNTIL:-180} bash bench/fw_contiguous_rounds.sh build build-ahead | tee "$OUT/ahead_ab.txt"
if [ "${KW_SWEEP:-1}" = 1 ]; then
    for kw in 1 2 4 8 auto; do
        if [ $kw = auto ]; then unset HFP4_SM90_FP8_GEMV_KW; else export HFP4_SM90_FP8_GEMV_KW=$kw; fi
        HFP4_SM90_FP8_GEMV_MASKED=1 timeout 120 build/hfp4 bench --only w13,w2 --tokens 1,8,32 --sf-layout mn 2>&1 |
            grep -E "^fp8_fp8 +masked" | cut -c1-112 | sed "s|^|kw=$kw: |"
    done
    unset HFP4_SM90_FP8_GEMV_KW
    timeout 120 build/hfp4 bench --only w13,w2 --tokens 1,8,32 --sf-layout mn 2>&1 |
        grep -E "^fp8_fp8 +masked" | cut -c1-112 | sed "s|^|tile kernel: |"
fi | tee "$OUT/gemv_masked_kw.txt"
