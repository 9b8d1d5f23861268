#!/usr/bin/env bash
# The FP8 x FP8 contiguous rows (V4-Flash w13 and w2, MN-major scales) of the given builds,
# interleaved round after round for ROUNDS_UNTIL seconds (default 150), each build with the SKIP
# kernels forced off and on; one line a row: "round R BUILD skip=S: <row>". Used by the A/B scripts
# (fw_layout_ahead_ab_on_device.sh; session 48's dynamic tile order, since removed: RESULTS v49).
#   bash bench/fw_contiguous_rounds.sh BUILD_A BUILD_B ...     (TOKENS=8,4096,16384)
set -u
start=$(date +%s) round=0
while [ $(( $(date +%s) - start )) -lt ${ROUNDS_UNTIL:-150} ]; do
    round=$((round + 1))
    for b in "$@"; do
        for skip in 0 1; do
            HFP4_SM90_FP8_WEIGHTS_SKIP_IDLE=$skip timeout 150 $b/hfp4 bench --only w13,w2 \
                --tokens ${TOKENS:-8,4096,16384} --sf-layout mn 2>&1 | grep -E "^fp8_fp8 +contiguous" |
                cut -c1-112 | sed "s|^|round $round $b skip=$skip: |"
        done
    done
done
