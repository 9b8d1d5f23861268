#!/usr/bin/env bash
# One device call does everything GPU-side: the GPU tests, compute-sanitizer on a small set, the
# demo and the benchmark (table and JSON). Build here first (make && make ${BUILD:-build}/hfp4_gpu_tests),
# carry build/ (or build-pack/, see below), and run:   bash bench/run_on_device.sh        (logs go to $OUT, default /tmp/hfp4-out)
# Options via env: BUILD=dir (default build), SKIP_TESTS=1, SKIP_PYTEST=1, SKIP_SANITIZER=1, SKIP_BENCH=1,
# SANITIZER_FILTERS="gpu_grouped ..." (the compute-sanitizer set), BENCH_JSON=1 (also write bench.json; BENCH_JSON_ONLY=1 writes only it), BENCH_ARGS="--only w13", NCU=1 (profile decode and prefill
# launches, NCU_TOKENS="1 32 4096"; reports, detail pages and stall CSVs in $OUT/ncu_*), TILE64=1 (also test and time with the token tile
# capped at 64), DECODE1=1 (also test and time the one-CTA-per-SM variant of the 8-token decode tile),
# MICRO=1 (run ${BUILD}/wgmma_ceiling: make BUILD=... BUILD/wgmma_ceiling, and carry it),
# PYROUTE=1 (also time fp8_fp4_gemm_nt's FP8 route against its FP4 kernel from Python, bench/python_fp8_route.py),
# PEERS=1 (also time the FP8 grouped GEMMs torch ships for SM90 against issue 5's yardstick,
# bench/peers_grouped_fp8.py), CLOCKS=1 (log the SM clock, power, temperature and throttle reasons every 200 ms while the bench
# runs, to $OUT/clocks.csv: the H200 at its 700 W limit may slow the later sections of a long run).
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p "$OUT"
# binaries carried as one archive (build-pack/bins.tar.xz: tar cJf of build/hfp4, build/libhfp4.so,
# build/hfp4_gpu_tests) replace the tree's build/ outputs
[ -f build-pack/bins.tar.xz ] && tar xJf build-pack/bins.tar.xz
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv
    git rev-parse HEAD 2>/dev/null || echo "commit: unknown (no .git)"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
rc=0
if [ -z "${SKIP_TESTS:-}" ]; then
    # (a test still running after 150 s is stopped and reported as failed: the whole suite takes ~190 s)
    timeout 500 ${BUILD:-build}/hfp4_gpu_tests --fork --time-limit 150 2>&1 | tee "$OUT/gpu_tests.log" | grep -E "^(ok|FAIL|skip)|passed|FAIL " || rc=1
fi
if [ -z "${SKIP_PYTEST:-}" ]; then
    # the Python layer (torch + CUDA tests included; the image has torch and pytest)
    HFP4_LIBRARY="$PWD/${BUILD:-build}/libhfp4.so" PYTHONPATH=python timeout 300 python3 -m pytest -q python/tests \
        -p no:cacheprovider > "$OUT/pytest.log" 2>&1
    echo "pytest: exit $? ($(tail -n 1 "$OUT/pytest.log"))"
fi
if [ -n "${TILE64:-}" ]; then
    # token tiles capped at 64 (the default goes to 128): its own test pass and prefill rows
    HFP4_SM90_MAX_TOKEN_TILE=64 timeout 400 ${BUILD:-build}/hfp4_gpu_tests --fork 2>&1 | tee "$OUT/gpu_tests_tile64.log" |
        grep -E "passed|FAIL " || rc=1
    HFP4_SM90_MAX_TOKEN_TILE=64 timeout 200 ${BUILD:-build}/hfp4 bench --tokens 4096,16384 --only w13,w2,dense 2>&1 |
        tee "$OUT/bench_tile64.txt"
fi
if [ -n "${DECODE1:-}" ]; then
    # the 8-token decode tile with one CTA per SM (the default runs two): its own test pass and decode rows
    HFP4_SM90_DECODE_2CTA=0 timeout 400 ${BUILD:-build}/hfp4_gpu_tests --fork 2>&1 | tee "$OUT/gpu_tests_decode1.log" |
        grep -E "passed|FAIL " || rc=1
    HFP4_SM90_DECODE_2CTA=0 timeout 200 ${BUILD:-build}/hfp4 bench --tokens 1,8,32 --only w13,w2 2>&1 |
        tee "$OUT/bench_decode1.txt"
fi
if [ -z "${SKIP_SANITIZER:-}" ] && command -v compute-sanitizer >/dev/null; then
    for tool in memcheck racecheck; do
        # a representative set: every scale form and output, the grouped layouts, the V4 decode shapes
        for f in ${SANITIZER_FILTERS:-gpu_dense_scale gpu_grouped gpu_deepseek_v4 gpu_persistent}; do
            timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 ${BUILD:-build}/hfp4_gpu_tests --filter $f \
                > "$OUT/sanitizer_${tool}_$f.log" 2>&1
            echo "compute-sanitizer $tool $f: exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_${tool}_$f.log" | tail -n 1))"
        done
    done
fi
if [ -n "${CLOCKS:-}" ]; then
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
        --format=csv -lms 200 > "$OUT/clocks.csv" 2>&1 &
    SMI_PID=$!
fi
if [ -z "${SKIP_BENCH:-}" ]; then
    [ -n "${BENCH_JSON_ONLY:-}" ] || timeout 300 ${BUILD:-build}/hfp4 bench ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.txt"
    if [ -n "${BENCH_JSON:-}${BENCH_JSON_ONLY:-}" ]; then
        timeout 300 ${BUILD:-build}/hfp4 bench --json ${BENCH_ARGS:-} > "$OUT/bench.json" 2> "$OUT/bench_json.err"
    fi
fi
[ -n "${SMI_PID:-}" ] && kill "$SMI_PID" 2>/dev/null
if [ -n "${PYROUTE:-}" ]; then
    HFP4_LIBRARY="$PWD/${BUILD:-build}/libhfp4.so" PYTHONPATH=python timeout 200 python3 bench/python_fp8_route.py 2>&1 |
        tee "$OUT/python_fp8_route.txt"
fi
if [ -n "${PEERS:-}" ]; then
    (cd bench && timeout 250 python3 peers_grouped_fp8.py 2>&1) | tee "$OUT/peers_grouped_fp8.txt"
fi
if [ -n "${MICRO:-}" ] && [ -x "${BUILD:-build}/wgmma_ceiling" ]; then
    # the consumer loop's skeleton without memory traffic (bench/micro/wgmma_ceiling.cu)
    timeout 60 ${BUILD:-build}/wgmma_ceiling 2>&1 | tee "$OUT/wgmma_ceiling.txt"
fi
if [ -n "${NCU:-}" ] && command -v ncu >/dev/null; then
    # one decode (masked, T = 1 and 32) and one prefill (contiguous, T = 4096) launch of the w13 GEMM,
    # clocks left alone; the first matching launch of each bench process is the warm-up call. The
    # text pages are written here too (details, and per-SASS-line stall samples as CSV), so no
    # second device call is needed to read the reports.
    for t in ${NCU_TOKENS:-1 32 4096}; do
        HFP4_BENCH_WATCHDOG_S=0 timeout 240 ncu --clock-control none --set full --import-source yes -k regex:fp8_fp4_gemm_kernel -c 1 \
            -o "$OUT/ncu_w13_T$t" ${BUILD:-build}/hfp4 bench --only w13 --tokens $t --iters 3 > "$OUT/ncu_T$t.log" 2>&1
        echo "ncu T=$t: exit $?"
        ncu --import "$OUT/ncu_w13_T$t.ncu-rep" --page details > "$OUT/ncu_T$t.txt" 2>&1
        ncu --import "$OUT/ncu_w13_T$t.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu_src_T$t.csv" 2>&1
    done
fi
exit $rc
