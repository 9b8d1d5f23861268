/*
 * demo_cpu.c - the CPU half of `hfp4 demo`: a small DeepSeek-V4-Flash-shaped MoE problem
 * (8 experts of the w2 shape sliced to N = 512, K = 2048; 48 tokens routed top-2) quantized the
 * way DeepSeek-V4 stores it (FP8 activations with 1x128 scales, FP4 experts with UE8M0 1x32
 * scales), multiplied by the CPU reference in the m-grouped contiguous layout, and checked against
 * the unquantized product with DeepGEMM's calc_diff (threshold 1e-2 for one FP4 operand).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hfp4.h"
#include "tool_common.h"

static uint64_t demo_rng = 0x9E3779B97F4A7C15ull;
static double demo_normal(void) {
    double u[2];
    for (int i = 0; i < 2; i++) {
        demo_rng ^= demo_rng << 13;
        demo_rng ^= demo_rng >> 7;
        demo_rng ^= demo_rng << 17;
        u[i] = ((demo_rng >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    }
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

int hfp4_cmd_demo_cpu(int argc, char **argv) {
    if (argc > 0) {
        fprintf(stderr, "hfp4 demo: unexpected argument '%s' (demo takes none)\n", argv[0]);
        return 2;
    }
    enum { E = 8, N = 512, K = 2048, TOKENS = 48, TOPK = 2, ALIGN = 128 };
    printf("hfp4 %s demo (CPU reference): %d experts of [N=%d, K=%d] FP4 weights, %d tokens routed top-%d\n",
           hfp4_version_string(), E, N, K, TOKENS, TOPK);
    /* route: token t goes to experts (t % E) and ((t * 3 + 1) % E) */
    int counts[E] = {0};
    int route[TOKENS][TOPK];
    for (int t = 0; t < TOKENS; t++) {
        route[t][0] = t % E;
        route[t][1] = (t * 3 + 1) % E == t % E ? (t + 1) % E : (t * 3 + 1) % E;
        for (int j = 0; j < TOPK; j++) counts[route[t][j]]++;
    }
    int64_t M = 0, start[E];
    for (int e = 0; e < E; e++) {
        start[e] = M;
        M += (counts[e] + ALIGN - 1) / ALIGN * ALIGN;
    }
    float *x = calloc((size_t)M * K, sizeof(float));
    float *w = malloc(sizeof(float) * E * N * K);
    int32_t *ids = malloc(sizeof(int32_t) * M);
    for (int64_t r = 0; r < M; r++) ids[r] = -1;
    int fill[E] = {0};
    for (int t = 0; t < TOKENS; t++) {
        float xt[K];
        for (int k = 0; k < K; k++) xt[k] = (float)demo_normal();
        for (int j = 0; j < TOPK; j++) {
            int e = route[t][j];
            int64_t r = start[e] + fill[e]++;
            memcpy(x + r * K, xt, sizeof xt);
            ids[r] = e;
        }
    }
    for (int64_t i = 0; i < (int64_t)E * N * K; i++) w[i] = (float)(demo_normal() * 0.02);

    int64_t sfa_k = K / 128, sfw_k = K / 32;
    uint8_t *a = malloc((size_t)M * K), *wq = malloc((size_t)E * N * K / 2), *wsf = malloc((size_t)E * N * sfw_k);
    float *asf = malloc(sizeof(float) * M * sfa_k);
    uint16_t *d = malloc(sizeof(uint16_t) * M * N);
    hfp4_scales sa = {asf, HFP4_DTYPE_FP32, 1, 128, sfa_k, 1, 0};
    hfp4_scales sw = {wsf, HFP4_DTYPE_UE8M0, 1, 32, sfw_k, 1, (int64_t)N * sfw_k};
    hfp4_status st = hfp4_quantize_fp8_per_token(x, HFP4_DTYPE_FP32, M, K, K, 0, a, K, &sa);
    for (int e = 0; st == HFP4_OK && e < E; e++) {
        hfp4_scales swe = sw;
        swe.data = wsf + (int64_t)e * N * sfw_k;
        st = hfp4_quantize_fp4_per_token(w + (int64_t)e * N * K, HFP4_DTYPE_FP32, N, K, K, 1, wq + (int64_t)e * N * K / 2,
                                         K / 2, &swe);
    }
    hfp4_gemm_problem p;
    memset(&p, 0, sizeof p);
    p.grouping = HFP4_GROUPING_CONTIGUOUS;
    p.m = M;
    p.n = N;
    p.k = K;
    p.num_groups = E;
    p.layout = ids;
    p.a = (hfp4_matrix){a, HFP4_DTYPE_FP8_E4M3, M, K, K, 0, sa};
    p.b = (hfp4_matrix){wq, HFP4_DTYPE_FP4_E2M1, N, K, K / 2, (int64_t)N * K / 2, sw};
    p.d = (hfp4_output){d, HFP4_DTYPE_BF16, N, 0, NULL};
    clock_t c0 = clock();
    if (st == HFP4_OK) st = hfp4_ref_gemm(&p, 0);
    double secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
    if (st != HFP4_OK) {
        fprintf(stderr, "demo: %s: %s\n", hfp4_status_name(st), hfp4_last_error());
        return 1;
    }
    /* calc_diff against the unquantized product (padding rows must be exactly zero) */
    double sxy = 0, sxx = 0, syy = 0;
    int64_t pad_bad = 0;
    for (int64_t r = 0; r < M; r++) {
        for (int n = 0; n < N; n++) {
            double got = hfp4_bf16_decode(d[r * N + n]);
            if (ids[r] < 0) {
                pad_bad += got != 0.0;
                continue;
            }
            double ref = 0;
            const float *xr = x + r * K, *wr = w + ((int64_t)ids[r] * N + n) * K;
            for (int k = 0; k < K; k++) ref += (double)xr[k] * wr[k];
            sxy += got * ref;
            sxx += got * got;
            syy += ref * ref;
        }
    }
    double diff = 1.0 - 2.0 * sxy / (sxx + syy);
    int ok = diff <= 1e-2 && pad_bad == 0;
    printf("  m-grouped contiguous: %lld rows (%d routed, padded to %d per expert), %.2f s of CPU time\n",
           (long long)M, TOKENS * TOPK, ALIGN, secs);
    printf("  calc_diff vs the unquantized product: %.2e (DeepGEMM's threshold for FP8 x FP4: 1e-2) -> %s\n", diff,
           diff <= 1e-2 ? "ok" : "FAIL");
    printf("  padding rows exactly zero: %s\n", pad_bad ? "FAIL" : "ok");
    free(x);
    free(w);
    free(ids);
    free(a);
    free(wq);
    free(wsf);
    free(asf);
    free(d);
    return ok ? 0 : 1;
}
