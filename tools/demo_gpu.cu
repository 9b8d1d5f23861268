/*
 * demo_gpu.cu - the GPU half of `hfp4 demo` and `hfp4 verify`: DeepSeek-V4-Flash expert GEMMs on
 * the SM90 kernels, every element checked against the exact CPU reference, then timed.
 */
#include <stdio.h>

#include "../tests/gpu/gemm_fixture.h"
#include "tool_common.h"

extern "C" int hfp4_have_hopper(void) {
    hfp4_device_info info;
    return hfp4_device_query(0, &info) == HFP4_OK && info.has_sm90_kernels;
}

static int run_checks(void) {
    struct {
        const char *label;
        hfp4_grouping g;
        int64_t m, n, k;
        int32_t groups;
    } cases[] = {
        {"V4-Flash w13, decode (masked, 256 experts)", HFP4_GROUPING_MASKED, 3, 4096, 4096, 256},
        {"V4-Flash w2,  decode (masked, 256 experts)", HFP4_GROUPING_MASKED, 3, 4096, 2048, 256},
        {"V4-Flash w13, prefill (contiguous, 32 experts)", HFP4_GROUPING_CONTIGUOUS, 1024, 4096, 4096, 32},
        {"V4-Flash w2,  prefill (contiguous, 32 experts)", HFP4_GROUPING_CONTIGUOUS, 1024, 4096, 2048, 32},
    };
    int failures = 0;
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gemm_case c;
        memset(&c, 0, sizeof c);
        c.grouping = cases[i].g;
        c.m = cases[i].m;
        c.n = cases[i].n;
        c.k = cases[i].k;
        c.groups = cases[i].groups;
        c.a_gran = 128;
        c.a_scale = HFP4_DTYPE_FP32;
        c.w_pow2 = 1;
        c.d_dtype = HFP4_DTYPE_BF16;
        c.seed = 42 + i;
        gemm_host h;
        fx_build(&h, &c);
        gemm_result r = fx_run(&h);
        int ok = r.status == HFP4_OK && r.bad_elements == 0 && r.rel_frob <= 2e-3 && r.repack_match;
        printf("  %-48s rel. error %.2e, bad elements %lld -> %s\n", cases[i].label, r.rel_frob,
               (long long)r.bad_elements, ok ? "ok" : "FAIL");
        if (r.status != HFP4_OK) printf("    %s: %s\n", hfp4_status_name(r.status), hfp4_last_error());
        failures += !ok;
        fx_free(&h);
    }
    return failures;
}

extern "C" int hfp4_cmd_verify(int argc, char **argv) {
    if (argc > 0) {
        fprintf(stderr, "hfp4 verify: unexpected argument '%s' (verify takes none)\n", argv[0]);
        return 2;
    }
    if (!hfp4_have_hopper()) {
        fprintf(stderr, "hfp4 verify: no Hopper (SM90) GPU here; nothing to verify\n");
        return 3;
    }
    printf("FP4 expert weights (FP8 x FP4):\n");
    int failures = run_checks();
    printf("FP8 weights, 128 x 128 block scales (FP8 x FP8):\n");
    failures += hfp4_verify_fp8_weights();
    return failures ? 1 : 0;
}

extern "C" int hfp4_cmd_demo_gpu(int argc, char **argv) {
    (void)argc;
    (void)argv;
    printf("\nHopper GPU found: SM90 FP8 x FP4 kernels vs the exact CPU reference (every element)\n");
    int failures = run_checks();
    if (failures) return 1;
    printf("\nSpeed (DeepSeek-V4-Flash experts, E = 256, top-6, uniform routing; baselines in the same run):\n");
    /* the demo's speed table: the V4-Flash expert GEMMs only (hfp4 bench has the full matrix) */
    char a0[] = "--quick", a1[] = "--iters", a2[] = "10", a3[] = "--only", a4[] = "w13,w2";
    char *args[] = {a0, a1, a2, a3, a4};
    return hfp4_cmd_bench(5, args);
}
