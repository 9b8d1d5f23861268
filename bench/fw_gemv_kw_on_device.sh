#!/usr/bin/env bash
# The few-row FP8 kernel's row groups (fp8_fp8_gemv.cu, bench/RESULTS.md v46): its GPU test (every
# warps-a-row-group count forced, then the launcher's), memcheck, then decode-sized dense rows for
# each forced count, the launcher's choice and the tile kernel (HFP4_SM90_FP8_GEMV=0), interleaved
# (SHAPES, VARIANTS and ROUNDS override the defaults below; the copy rate of each run is kept).
# Built here first (carry build-pack):
#   make -j3 BUILD=build all build/hfp4_gpu_tests
#   tar cJf build-pack/bins.tar.xz build/hfp4 build/libhfp4.so build/hfp4_gpu_tests
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p "$OUT"
[ -f build-pack/bins.tar.xz ] && tar xJf build-pack/bins.tar.xz
timeout 200 build/hfp4_gpu_tests --fork --filter gpu_fp8_weights 2>&1 | tee "$OUT/fp8_weights_tests.log" |
    grep -E "^(ok|FAIL|skip)|passed|bad|beyond|written" | grep -v " 0 bad, 0 padding" | tail -8
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 build/hfp4_gpu_tests --filter gpu_fp8_weights_gemv \
    > "$OUT/memcheck_gemv.log" 2>&1
echo "memcheck gemv: exit $? ($(grep -E 'ERROR SUMMARY' "$OUT/memcheck_gemv.log" | tail -n 1))"
shapes=${SHAPES:-"--dense-shape 1,7168,2048 --dense-shape 8,7168,2048 --dense-shape 16,7168,2048 --dense-shape 1,4096,4096
        --dense-shape 16,4096,4096 --dense-shape 1,32768,1024 --dense-shape 1,2048,7168 --dense-shape 1,1536,7168"}
for round in $(seq 1 ${ROUNDS:-2}); do
    for v in ${VARIANTS:-auto 1 2 4 8 tile}; do
        case $v in
        auto) env="" ;;
        tile) env="HFP4_SM90_FP8_GEMV=0" ;;
        *) env="HFP4_SM90_FP8_GEMV_KW=$v" ;;
        esac
        env $env timeout 150 build/hfp4 bench --only dense --sf-layout mn $shapes 2>&1 |
            grep -E "^fp8_fp8 +dense|copy" | cut -c1-150 | sed "s|^|round $round kw=$v: |"
    done
done > "$OUT/gemv_kw_rows.txt"
grep copy "$OUT/gemv_kw_rows.txt" | head -1
grep -v copy "$OUT/gemv_kw_rows.txt" | awk '{print $3, $8, $9, $10, $12}' | sort -k2,2n -k3,3n -k4,4n -k1,1 | awk '{k=$1" "$2"x"$3"x"$4; s[k]+=$5; n[k]++} END {for (k in s) printf "%s %.2f\n", k, s[k]/n[k]}' | sort -k2,2 -k1,1
grep "round 1 kw=auto\|round 1 kw=tile" "$OUT/gemv_kw_rows.txt" | cut -c1-160
