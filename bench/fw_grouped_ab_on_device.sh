#!/usr/bin/env bash
# A/B of the FP8 x FP8 kernel's contiguous rows between two builds (build-old/hfp4 against
# build/hfp4, interleaved rounds until ~ROUNDS_UNTIL seconds), then the Python tests once.
# carry: build-pack (bins.tar.xz with build/hfp4, build/libhfp4.so, build/hfp4_gpu_tests, build-old/hfp4)
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p "$OUT"
[ -f build-pack/bins.tar.xz ] && tar xJf build-pack/bins.tar.xz
HFP4_LIBRARY=$PWD/build/libhfp4.so PYTHONPATH=python timeout 200 python3 -m pytest -q python/tests -p no:cacheprovider \
    > "$OUT/pytest.log" 2>&1
echo "pytest: exit $? ($(tail -n 1 "$OUT/pytest.log"))"
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -10
start=$(date +%s) round=0
while [ $(( $(date +%s) - start )) -lt ${ROUNDS_UNTIL:-380} ]; do
    round=$((round + 1))
    for b in build-old build; do
        timeout 120 $b/hfp4 bench --only w13,w2 --tokens ${TOKENS:-16384} --sf-layout mn 2>&1 |
            grep -E "^fp8_fp(8|4) +contiguous" | cut -c1-130 | sed "s|^|round $round $b: |" | tee -a "$OUT/ab.txt"
    done
done
