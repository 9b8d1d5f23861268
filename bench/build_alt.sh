#!/usr/bin/env bash
# Builds the binaries bench/ab_on_device.sh compares, one per experimental branch, into build-alt/
# (stripped, to fit the device call's 64 MiB carry limit), each from a git worktree under ../wt-*.
#   bash bench/build_alt.sh [branch[:env] ...]     default: the list below
# A ":VAR=value" suffix writes build-alt/<branch>.env, the environment ab_on_device.sh runs it with;
# "-tests" after the branch name (e.g. decode-dual-tests) also builds hfp4_gpu_tests (decode-splitk's
# run with the split forced: hfp4_gpu_tests-decode-splitk-forced).
set -eu
ROOT=$(git rev-parse --show-toplevel)
cd "$ROOT"
# (session 2's list: ss-converter-tests:HFP4_SM90_SS=1 diag-bounds decode-dual-tests
#  decode-3cta-tests:HFP4_SM90_DECODE_3CTA=1 decode-splitk-tests:HFP4_SM90_SPLITK=1 decode-trim-tests
#  epilogue-vector-tests gran32-multiacc-tests:HFP4_SM90_MAX_TOKEN_TILE=64 — measured in session 3)
LIST=${*:-"split2-tests g32-units-tests"}
mkdir -p build-alt
for item in $LIST; do
    spec=${item%%:*}
    env=""
    [ "$spec" != "$item" ] && env=${item#*:}
    branch=${spec%-tests}
    # the branch's worktree if it has one (a branch can be checked out only once), else ../wt-<branch>
    wt=$(git worktree list --porcelain | awk -v b="refs/heads/$branch" '/^worktree /{w=$2} $0=="branch "b{print w}')
    if [ -z "$wt" ]; then
        wt="$ROOT/../wt-$branch"
        git worktree add -q "$wt" "$branch"
    fi
    targets="b/hfp4"
    [ "$branch" != "$spec" ] && targets="$targets b/hfp4_gpu_tests"
    flags=""
    [ "$branch" = diag-bounds ] && flags="-DHFP4_DIAG_NO_CONVERT"
    make -C "$wt" -j"$(nproc)" BUILD=b NVFLAGS_EXTRA="$flags" $targets > "/tmp/build_alt_$branch.log" 2>&1
    name=$branch
    [ "$branch" = diag-bounds ] && name=no-convert
    cp "$wt/b/hfp4" "build-alt/hfp4-$name"
    if [ "$branch" != "$spec" ]; then
        tname=$name
        if [ "$branch" = decode-splitk ]; then
            # its tests run with the split forced in every cluster, so the hand-over slots rotate
            tname=decode-splitk-forced
            echo "HFP4_SM90_SPLITK=2" > build-alt/$tname.env
        fi
        cp "$wt/b/hfp4_gpu_tests" "build-alt/hfp4_gpu_tests-$tname"
    fi
    [ -n "$env" ] && echo "$env" > "build-alt/$name.env"
    echo "built $name ${env:+($env)}"
done
strip build-alt/hfp4* 2>/dev/null || true
du -sh build-alt
