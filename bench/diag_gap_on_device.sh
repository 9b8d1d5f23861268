#!/usr/bin/env bash
# Where the FP8 x FP4 prefill kernel's time goes past its consumer loop (bench/RESULTS.md v38), in one
# device call. Timing-only builds (results wrong on purpose), built here first:
#   make -j3 BUILD=build-fl NVFLAGS_EXTRA=-DHFP4_DIAG_FEW_LOADS build-fl/hfp4      (an item's chunks past
#       the first STAGES reuse their stage: real data without the memory traffic)
#   (-DHFP4_DIAG_FEW_LOADS=2: the activation tiles only, the weights still copied)
#   make -j3 BUILD=build-ne NVFLAGS_EXTRA=-DHFP4_DIAG_NO_EPILOGUE build-ne/hfp4    (no stores of D)
#   make -j3 BUILD=build-fn NVFLAGS_EXTRA="-DHFP4_DIAG_FEW_LOADS -DHFP4_DIAG_NO_EPILOGUE" build-fn/hfp4
#   make BUILD=build-dev build-dev/consumer_structures                           (the loop alone)
# carry: build/hfp4 build-fl/hfp4 build-ne/hfp4 build-fn/hfp4 build-dev/consumer_structures (~60 MB).
# Interleaved rounds of the prefill rows until ROUNDS_UNTIL seconds, then the loop micro on random
# operands (its ceiling in the same call) when build-dev/consumer_structures was carried. Logs: $OUT/logs.tgz.
# BUILDS="main fl fa" picks the builds (build-<name>, main = build); an entry NAME@VAR=VALUE runs build
# NAME with that environment (comparison switches: "main main@HFP4_BENCH_FP8_FILL=narrow"); ARGS replaces
# the bench arguments.
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p "$OUT"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
A=${ARGS:-"bench --only dense,w13,w2 --tokens 4096,16384 --sf-layout mn --routing-seed 1"}
r=1
while [ "$(el)" -lt "${ROUNDS_UNTIL:-240}" ]; do
    for b in ${BUILDS:-main fl ne fn}; do
        name=${b%%@*}; envs=; [ "$name" != "$b" ] && envs=${b#*@}
        d=build-$name; [ $name = main ] && d=build
        env $envs timeout 120 $d/hfp4 $A > "$OUT/bench_$(echo $b | tr '@=' '__').$r.txt" 2>&1
        echo "round $r $b rc=$? at $(el)s"
    done
    r=$((r + 1))
done
[ -x build-dev/consumer_structures ] && MICRO_RANDOM=1 MICRO_WARM_MS=1500 timeout 90 build-dev/consumer_structures > "$OUT/micro_random.txt" 2>&1
echo "micro rc=$? at $(el)s"
cd "$OUT" && tar czf logs.tgz ./*.txt && rm -f ./*.txt
