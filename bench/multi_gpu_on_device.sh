#!/usr/bin/env bash
# hfp4 on two GPUs of one process, in one device call on a machine with two Hopper GPUs (kind
# nvidia-h200-x2 or nvidia-h100-x2): the C GPU suite with every test's body run on device 0 and then
# device 1 in its own process (`--devices 0,1`, tests/harness.h; the library's per-device state is
# then used on a second device after the first, as under transformers' device_map="auto"), then
# python/tests/test_multi_gpu.py. Build first (make BUILD=build all build/hfp4_gpu_tests), carry the
# build folder, and run:   bash bench/multi_gpu_on_device.sh        (logs under $OUT, one file)
# (the suite takes about twice the one-GPU run, ~8 minutes: TIME_LIMIT bounds each test process)
set -u
OUT=${OUT:-/tmp/hfp4-out}
B=${BUILD:-build}
mkdir -p "$OUT/logs"
L=$OUT/logs
nvidia-smi --query-gpu=index,name,clocks.sm,power.limit --format=csv > "$L/env.txt" 2>&1
cat "$L/env.txt"
t0=$(date +%s)
timeout ${SUITE_TIMEOUT:-480} "$B/hfp4_gpu_tests" --fork --time-limit ${TIME_LIMIT:-300} --devices 0,1 \
    ${FILTER:+--filter $FILTER} > "$L/gpu_tests_devices01.log" 2>&1
echo "gpu tests --devices 0,1: exit $? ($(( $(date +%s) - t0 )) s): $(tail -n 1 "$L/gpu_tests_devices01.log")"
grep -E "^FAIL|FAIL " "$L/gpu_tests_devices01.log" | head -20
HFP4_LIBRARY="$PWD/$B/libhfp4.so" PYTHONPATH=python:python/tests timeout 300 python3 -m pytest -q \
    python/tests/test_multi_gpu.py -p no:cacheprovider -rs > "$L/pytest_multi_gpu.log" 2>&1
echo "pytest test_multi_gpu.py: exit $? ($(tail -n 1 "$L/pytest_multi_gpu.log"))"
grep -E "FAILED|Error" "$L/pytest_multi_gpu.log" | head -10
tar czf "$OUT/multi_gpu_logs.tgz" -C "$OUT" logs && rm -rf "$L"
