#!/usr/bin/env bash
# The FP8 x FP8 kernel's SM cycles per launch, clock-free (ncu --clock-control none, each launch
# alone), for several builds: bench/RESULTS.md v43. Usage: bash bench/ncu_fw_cycles.sh DIR/hfp4 ...
# (SHAPE=8192,8192,8192). Prints the median cycles, instructions and time of 8 launches per build.
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p "$OUT"
for b in "$@"; do
    n=$(dirname "$b")
    HFP4_BENCH_SETTLE_MS=0 HFP4_BENCH_WATCHDOG_S=0 timeout 150 ncu --clock-control none --csv --print-units base \
        --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__inst_executed.sum -k regex:fp8_fp8_gemm_kernel -c 8 \
        "$b" bench --only dense --sf-layout mn --dense-shape ${SHAPE:-8192,8192,8192} --iters 3 > "$OUT/cyc_$n.csv" 2> "$OUT/cyc_$n.err"
    awk -F'","' -v b="$n" '
        /gpu__time_duration.sum/ { gsub(/[",]/, "", $NF); t[n1++] = $NF + 0 }
        /sm__cycles_elapsed.max/ { gsub(/[",]/, "", $NF); c[n2++] = $NF + 0 }
        /smsp__inst_executed.sum/ { gsub(/[",]/, "", $NF); q[n3++] = $NF + 0 }
        function med(a, n,   i, j, x) { for (i = 1; i < n; i++) { x = a[i]; for (j = i - 1; j >= 0 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x } return n ? a[int(n / 2)] : 0 }
        END { printf "%-12s launches %2d  median %8.1f us  %10.0f cycles  %11.0f instructions\n", b, n1, med(t, n1) / 1000, med(c, n2), med(q, n3) }' "$OUT/cyc_$n.csv"
done | tee "$OUT/ncu_fw_cycles.txt"
