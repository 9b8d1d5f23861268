#!/usr/bin/env bash
# Prefill kernels compared per launch, clock-free: under ncu (--clock-control none; each launch
# alone, after ncu's default cache flush) every launch of the FP8 x FP4 kernel reports its time and
# the SM cycles it took. The bench's settling launches are turned off (HFP4_BENCH_SETTLE_MS=0), so
# the launches profiled are each row's warm-up and timed ones. Back-to-back bench rows at
# T = 16384 swing +-5 % with the power cap (bench/RESULTS.md v10, v11); cycles per launch do not.
# Usage:
#   bash bench/ncu_cycles.sh DIR/hfp4-a DIR/hfp4-b ...     (SECTIONS="w13 w2 dense", TOKENS=16384)
# Prints, per build and section, the median over the section's launches (contiguous and psum rows
# of a section pooled: the same items) of µs and of SM cycles (max over SMs), each its own median,
# and the clock their ratio implies; "launches 0" means ncu failed: see the .err file.
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p "$OUT"
for b in "$@"; do
    for sec in ${SECTIONS:-w13 w2 dense}; do
        csv="$OUT/ncu_$(basename "$b")_$sec.csv"
        HFP4_BENCH_SETTLE_MS=0 HFP4_BENCH_WATCHDOG_S=0 timeout 200 ncu --clock-control none --csv --print-units base --metrics gpu__time_duration.sum,sm__cycles_elapsed.max \
            -k regex:fp8_fp4_gemm_kernel -c ${LAUNCHES:-12} "$b" bench --only "$sec" --tokens ${TOKENS:-16384} --iters 3 \
            > "$csv" 2> "$csv.err"
        awk -F'","' -v b="$(basename "$b")" -v s="$sec" '
            /gpu__time_duration.sum/ { gsub(/"/, "", $NF); gsub(/,/, "", $NF); t[n1++] = $NF + 0 }
            /sm__cycles_elapsed.max/ { gsub(/"/, "", $NF); gsub(/,/, "", $NF); c[n2++] = $NF + 0 }
            function med(a, n,   i, j, x) { for (i = 1; i < n; i++) { x = a[i]; for (j = i - 1; j >= 0 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x } return n ? a[int(n / 2)] : 0 }
            END { tt = med(t, n1); cc = med(c, n2); printf "%-22s %-6s launches %2d  median %9.1f us  %11.0f cycles  %5.0f MHz\n", b, s, n1, tt / 1000, cc, tt ? cc / tt * 1000 : 0 }' "$csv"
    done
done | tee "$OUT/ncu_cycles.txt"
