#!/usr/bin/env bash
# The activation-multicast experiment (src/kernels/sm90/a_multicast.cuh) in one device call: the
# GPU tests that launch the 128-token tile, on the multicast build, then interleaved prefill rounds
# of main, the multicast build, and the multicast build with it switched off (codegen control).
# The code is bench/patches/v39-a-multicast.patch (not on main: measured +1 % dense, 0 grouped,
# bench/RESULTS.md v39); git apply it, then build here first:
#   make -j3 BUILD=build all build/hfp4_gpu_tests
#   make -j3 BUILD=build-mc NVFLAGS_EXTRA=-DHFP4_SM90_A_MULTICAST build-mc/hfp4 build-mc/hfp4_gpu_tests
# carry: build/hfp4 build-mc/hfp4 build-mc/hfp4_gpu_tests. Logs: $OUT/logs.tgz.
set -u
OUT=${OUT:-/tmp/hfp4-out}
mkdir -p "$OUT"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for f in gpu_dense gpu_output gpu_tma gpu_persistent gpu_mn_major gpu_folded gpu_grouped_contiguous gpu_contiguous \
         gpu_grouped_psum gpu_tiles_with gpu_per32 gpu_deepseek_v4_pro gpu_chained gpu_two_streams gpu_moe_forward; do
    timeout 120 build-mc/hfp4_gpu_tests --fork --filter "$f" >> "$OUT/tests_mc.txt" 2>&1
    echo "tests $f rc=$? at $(el)s"
done
[ -n "${SANITIZE:-}" ] && timeout 200 compute-sanitizer --tool "${SANITIZE}" build-mc/hfp4_gpu_tests --filter gpu_dense_shapes \
    > "$OUT/sanitize_mc.txt" 2>&1 && echo "sanitizer rc=$? at $(el)s"
A=${ARGS:-"bench --only dense,w13,w2 --tokens 4096,16384 --sf-layout mn --routing-seed 1"}
r=1
while [ "$(el)" -lt "${ROUNDS_UNTIL:-420}" ]; do
    timeout 120 build/hfp4 $A > "$OUT/bench_main.$r.txt" 2>&1; echo "round $r main rc=$? at $(el)s"
    timeout 120 build-mc/hfp4 $A > "$OUT/bench_mc.$r.txt" 2>&1; echo "round $r mc rc=$? at $(el)s"
    HFP4_SM90_A_MULTICAST=0 timeout 120 build-mc/hfp4 $A > "$OUT/bench_mcoff.$r.txt" 2>&1; echo "round $r mcoff rc=$? at $(el)s"
    r=$((r + 1))
done
cd "$OUT" && tar czf logs.tgz ./*.txt && rm -f ./*.txt
