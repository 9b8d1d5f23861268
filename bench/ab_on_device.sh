#!/usr/bin/env bash
# Compares builds of hfp4 in one device call (same GPU, same minutes, so small differences mean
# something). Put the binaries to compare under build-alt/ as hfp4-<name> (and, to test them too,
# hfp4_gpu_tests-<name>), build main as usual, carry both folders, and run:
#   bash bench/ab_on_device.sh                 (logs under $OUT, default /tmp/hfp4-out)
# Builds of other branches: `git worktree add ../wt <branch> && make -C ../wt BUILD=b b/hfp4`, then
# copy ../wt/b/hfp4 to build-alt/hfp4-<branch>. Binaries whose names contain "no-" are diagnostic
# builds with wrong results (bench/diag_bounds.sh on branch diag-bounds): they are timed, not tested.
# A file build-alt/<name>.env (e.g. "HFP4_SM90_SS=1") sets the environment of that build's runs.
# ALT=dir takes the builds from another folder (to carry a subset under the 64 MiB limit).
# REPEAT=N: N interleaved rounds of the benches (see below). At the end: ab_summary.txt (every
# build's mean and range per row over the rounds) and ab_logs.tgz (all logs in one file).
# Pass --routing-seed in ARGS when calls are to be compared with each other: without it a token
# count's routing depends on which other counts the same run draws first (RESULTS v26).
# MAIN_TESTS=1: main's own GPU suite first. MICROS="fp8_ss_gemm ...": after the rounds, those
# micro-benchmarks from main's folder (bench/micro; pack them with MICROS= in pack_switch_builds.sh),
# each next to `hfp4 bench $MICRO_BENCH_ARGS` of main (default --only dense) for its baselines.
set -u
OUT=${OUT:-/tmp/hfp4-out}
ARGS=${ARGS:---only w13,w2,dense --tokens 32,4096,16384}
MAIN=${BUILD:-build}
ALT=${ALT:-build-alt}
mkdir -p "$OUT"
if [ -n "${MAIN_TESTS:-}" ]; then
    timeout ${TEST_TIMEOUT:-400} "$MAIN/hfp4_gpu_tests" --fork --time-limit 150 > "$OUT/gpu_tests_main.log" 2>&1
    echo "gpu tests main: exit $? ($(tail -n 1 "$OUT/gpu_tests_main.log"))"
fi
for t in $ALT/hfp4_gpu_tests-*; do
    [ -e "$t" ] || continue
    name=${t#"$ALT"/hfp4_gpu_tests-}
    envs=$(cat "$ALT/$name.env" 2>/dev/null)
    # (the whole suite takes ~190 s; a test still running after 150 s is stopped and reported)
    timeout ${TEST_TIMEOUT:-400} env $envs "$t" --fork --time-limit 150 > "$OUT/gpu_tests_$name.log" 2>&1
    echo "gpu tests $name: exit $? ($(tail -n 1 "$OUT/gpu_tests_$name.log"))"
done
# REPEAT=N runs the builds' benches N times, interleaved (A B A B ...): run-to-run spread on the
# H200 reaches 10-50 % at T = 4096 between calls, so only interleaved repeats tell small gains
# from noise. Logs: bench_<name>.txt (first round), bench_<name>.<r>.txt (later rounds).
for r in $(seq 1 "${REPEAT:-1}"); do
for b in "$MAIN/hfp4" $ALT/hfp4-*; do
    [ -e "$b" ] || continue
    name=$(basename "$b")
    envs=$(cat "$ALT/${name#hfp4-}.env" 2>/dev/null)
    log="$OUT/bench_$name.txt"
    [ "$r" = 1 ] || log="$OUT/bench_$name.$r.txt"
    echo "== $name $envs${REPEAT:+ (round $r)}"
    timeout 150 env $envs "$b" bench $ARGS 2>&1 | tee "$log" | grep -E "^fp8" | cut -c1-150
done
done
if [ -n "${MICROS:-}" ]; then
    # (HFP4_SM90_FP8_WEIGHTS=1: the dense section's FP8-weight row, the library kernel the
    # fp8_ss_gemm micro prefigures, even where the environment turned it off)
    timeout 120 env HFP4_SM90_FP8_WEIGHTS=1 "$MAIN/hfp4" bench ${MICRO_BENCH_ARGS:---only dense} \
        > "$OUT/bench_micro_baselines.txt" 2>&1
    grep -E "^(fp8|cublas|dense)" "$OUT/bench_micro_baselines.txt" | cut -c1-150
    for m in $MICROS; do
        timeout 120 "$MAIN/$m" > "$OUT/micro_$m.txt" 2>&1
        echo "micro $m: exit $?"
        cut -c1-260 "$OUT/micro_$m.txt"
    done
fi
# A summary over the rounds (every build's mean and range per row: TFLOP/s, TB/s for the rows below
# 4096 tokens, and for long rows the mean rate sustained over the bench's energy window, which at the
# H200's power cap is the fairer comparison: bench/RESULTS.md v36), then the logs packed into one
# file: the device tool returns at most 8 files.
for f in "$OUT"/bench_hfp4*.txt; do
    [ -e "$f" ] || continue
    b=$(basename "$f" .txt); b=${b#bench_}; b=${b%.[0-9]*}
    awk -v b="$b" '/^fp8/ { if ($2 == "dense") { key = $2 " " $3 " " $5 "x" $6 "x" $7; t = $10; s = $11 }
                             else { key = $2 " " $3 " m=" $4; t = $9; s = $10 }
                             sus = 0; if (match($0, /\[sustained [0-9.]+/)) sus = substr($0, RSTART + 11, RLENGTH - 11)
                             print b "\t" key "\t" t "\t" s "\t" sus }' "$f"
done | sort -k2,2 -k1,1 | awk -F'\t' '
    { k = $2 "\t" $1; n[k]++; sum[k] += $3; ssum[k] += $4; if ($5 > 0) { nsus[k]++; sus[k] += $5 }
      if (!(k in lo) || $3 < lo[k]) lo[k] = $3; if (!(k in hi) || $3 > hi[k]) hi[k] = $3; order[k] = NR }
    END { for (k in n) printf "%s\t%.1f TFLOP/s (%.1f-%.1f, %d rounds)\t%.3f TB/s\t%s\n", k, sum[k] / n[k], lo[k], hi[k],
                              n[k], ssum[k] / n[k], nsus[k] ? sprintf("sustained %.1f TFLOP/s", sus[k] / nsus[k]) : "" }' |
    sort | tee "$OUT/ab_summary.txt"
(
    cd "$OUT" || exit
    logs=""
    for f in bench_*.txt gpu_tests_*.log micro_*.txt; do [ -e "$f" ] && logs="$logs $f"; done
    [ -n "$logs" ] && tar czf ab_logs.tgz $logs && rm -f $logs
)
