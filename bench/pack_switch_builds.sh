#!/usr/bin/env bash
# Builds this tree's binaries and switch variants of it for one device call, and packs them (stripped,
# xz) into b9/bins.tar.xz: the call's carry is limited to 64 MiB and its run tool returns at most 8
# files, so binaries go as one archive and logs come back as one (see bench/ab_on_device.sh).
#   [MICROS="fp8_ss_gemm ..."] bash bench/pack_switch_builds.sh [name:"-DFLAG=V ..." ...] [alias=name:"ENV=V ..." ...]
#   e.g. bash bench/pack_switch_builds.sh window2:"-DHFP4_SM90_LAND_WINDOW=2" window0:"-DHFP4_SM90_LAND_WINDOW=0"
# gives b9/build/{hfp4,hfp4_gpu_tests,libhfp4.so} (this tree as it is) and b9/alt/hfp4-<name>,
# b9/alt/hfp4_gpu_tests-<name> (each build in b8/<name>, kept for bench/sass_same.sh). On the device:
#   tar xJf b9/bins.tar.xz && OUT=$OUT/ab ALT=alt BUILD=build bash bench/ab_on_device.sh
# (carry ["b9"]; b8/ and b9/ are ignored by git). Names containing "no-" are timed, not tested.
# NO_TESTS="name ...": those builds are timed, not tested (their suites would repeat another's).
# alias=name:"ENV=V": build `name`'s hfp4 (an earlier item, or "main" for this tree) again under the
# name `alias`, timed with that environment (alt/alias.env, which ab_on_device.sh reads), not tested;
# e.g. window2-1cta=window2:"HFP4_SM90_DECODE_2CTA=0".
set -eu
ROOT=$(git rev-parse --show-toplevel)
cd "$ROOT"
JOBS=$(nproc)
make -j"$JOBS" BUILD=build build/hfp4 build/hfp4_gpu_tests build/libhfp4.so > /tmp/pack_main.log 2>&1 ||
    { echo "build of this tree failed: /tmp/pack_main.log" >&2; exit 1; }
rm -rf b9/build b9/alt
mkdir -p b9/build b9/alt
cp build/hfp4 build/hfp4_gpu_tests build/libhfp4.so b9/build/
# MICROS="fp8_ss_gemm ...": micro-benchmarks of this tree (bench/micro), packed as build/<name>
for micro in ${MICROS:-}; do
    make -j"$JOBS" BUILD=build "build/$micro" > "/tmp/pack_$micro.log" 2>&1 ||
        { echo "build of $micro failed: /tmp/pack_$micro.log" >&2; exit 1; }
    cp "build/$micro" b9/build/
done
for item in "$@"; do
    name=${item%%:*}
    flags=${item#*:}
    [ "$name" != "$item" ] || { echo "expected name:\"flags\", got '$item'" >&2; exit 2; }
    case $name in
    *=*)
        alias=${name%%=*} base=${name#*=}
        src=b9/alt/hfp4-$base
        [ "$base" != main ] || src=b9/build/hfp4
        [ -e "$src" ] || { echo "alias $alias: no build '$base' before it" >&2; exit 2; }
        cp "$src" "b9/alt/hfp4-$alias"
        echo "$flags" > "b9/alt/$alias.env"
        continue
        ;;
    esac
    make -j"$JOBS" BUILD="b8/$name" NVFLAGS_EXTRA="$flags" "b8/$name/hfp4" "b8/$name/hfp4_gpu_tests" \
        > "/tmp/pack_$name.log" 2>&1 || { echo "build $name ($flags) failed: /tmp/pack_$name.log" >&2; exit 1; }
    cp "b8/$name/hfp4" "b9/alt/hfp4-$name"
    case " ${NO_TESTS:-} " in *" $name "*) continue ;; esac # (timed only: its code is another build's)
    case $name in *no-*) ;; *) cp "b8/$name/hfp4_gpu_tests" "b9/alt/hfp4_gpu_tests-$name" ;; esac
done
strip b9/build/* b9/alt/hfp4* 2>/dev/null || true
tar cJf b9/bins.tar.xz -C b9 build alt
rm -rf b9/build b9/alt
ls -la b9/bins.tar.xz
