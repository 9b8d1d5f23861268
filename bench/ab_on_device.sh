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
# REPEAT=N: N interleaved rounds of the benches (see below).
set -u
OUT=${OUT:-/tmp/hfp4-out}
ARGS=${ARGS:---only w13,w2,dense --tokens 32,4096,16384}
MAIN=${BUILD:-build}
ALT=${ALT:-build-alt}
mkdir -p "$OUT"
for t in $ALT/hfp4_gpu_tests-*; do
    [ -e "$t" ] || continue
    name=${t#"$ALT"/hfp4_gpu_tests-}
    envs=$(cat "$ALT/$name.env" 2>/dev/null)
    timeout ${TEST_TIMEOUT:-150} env $envs "$t" --fork > "$OUT/gpu_tests_$name.log" 2>&1
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
