/*
 * demo_cpu.c - the CPU half of `hfp4 demo`: one projection of a small DeepSeek-V4-Flash-shaped MoE
 * layer (8 experts of the w2 shape sliced to N = 512, K = 2048; 48 tokens routed top-2 with routing
 * weights) through the library's CPU forms of every step a GPU layer runs: hfp4_moe_route onto the
 * contiguous layout, hfp4_moe_quantize_rows (FP8 activations with 1x128 scales, as DeepSeek-V4's
 * recipe; the experts FP4 with UE8M0 1x32 scales, as the checkpoint stores them), the m-grouped
 * GEMM (hfp4_ref_gemm, D's padding rows left alone), hfp4_moe_combine; the tokens' outputs are
 * checked against the unquantized computation with DeepGEMM's calc_diff (threshold 1e-2 for one
 * FP4 operand).
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
    enum { E = 8, N = 512, K = 2048, TOKENS = 48, TOPK = 2, S = TOKENS * TOPK, ALIGN = 128 };
    printf("hfp4 %s demo (CPU reference): %d experts of [N=%d, K=%d] FP4 weights, %d tokens routed top-%d\n",
           hfp4_version_string(), E, N, K, TOKENS, TOPK);
    /* route: token t goes to experts (t % E) and ((t * 3 + 1) % E), weights 0.7 / 0.3 */
    int32_t ids[S];
    float weights[S];
    for (int t = 0; t < TOKENS; t++) {
        ids[t * TOPK] = t % E;
        ids[t * TOPK + 1] = (t * 3 + 1) % E == t % E ? (t + 1) % E : (t * 3 + 1) % E;
        weights[t * TOPK] = 0.7f;
        weights[t * TOPK + 1] = 0.3f;
    }
    const int64_t M = hfp4_moe_layout_rows(S, E, ALIGN), sfa_k = K / 128, sfw_k = K / 32;
    float *x = malloc(sizeof(float) * TOKENS * K), *w = malloc(sizeof(float) * E * N * K);
    for (int64_t i = 0; i < (int64_t)TOKENS * K; i++) x[i] = (float)demo_normal();
    for (int64_t i = 0; i < (int64_t)E * N * K; i++) w[i] = (float)(demo_normal() * 0.02);
    int32_t *pos = malloc(sizeof(int32_t) * S), *layout = malloc(sizeof(int32_t) * M);
    uint8_t *a = calloc((size_t)M * K, 1), *wq = malloc((size_t)E * N * K / 2), *wsf = malloc((size_t)E * N * sfw_k);
    float *asf = calloc((size_t)(M * sfa_k), sizeof(float)), *out = malloc(sizeof(float) * TOKENS * N);
    uint16_t *d = malloc(sizeof(uint16_t) * M * N);
    hfp4_scales sa = {asf, HFP4_DTYPE_FP32, 1, 128, sfa_k, 1, 0};
    hfp4_scales sw = {wsf, HFP4_DTYPE_UE8M0, 1, 32, sfw_k, 1, (int64_t)N * sfw_k};
    hfp4_status st = HFP4_OK;
    for (int e = 0; st == HFP4_OK && e < E; e++) { /* the experts, as the checkpoint stores them */
        hfp4_scales swe = sw;
        swe.data = wsf + (int64_t)e * N * sfw_k;
        st = hfp4_quantize_fp4_per_token(w + (int64_t)e * N * K, HFP4_DTYPE_FP32, N, K, K, 1, wq + (int64_t)e * N * K / 2,
                                         K / 2, &swe);
    }
    clock_t c0 = clock();
    if (st == HFP4_OK) st = hfp4_moe_route(ids, 0, S, E, ALIGN, pos, layout, M);
    if (st == HFP4_OK) st = hfp4_moe_quantize_rows(x, HFP4_DTYPE_FP32, TOKENS, K, K, TOPK, pos, S, 128, a, K, asf, M);
    hfp4_gemm_problem p;
    memset(&p, 0, sizeof p);
    p.grouping = HFP4_GROUPING_CONTIGUOUS;
    p.m = M;
    p.n = N;
    p.k = K;
    p.num_groups = E;
    p.layout = layout;
    p.m_alignment = ALIGN;
    p.d_padding = HFP4_D_PADDING_ANY; /* (the combine never reads them) */
    p.a = (hfp4_matrix){a, HFP4_DTYPE_FP8_E4M3, M, K, K, 0, sa};
    p.b = (hfp4_matrix){wq, HFP4_DTYPE_FP4_E2M1, N, K, K / 2, (int64_t)N * K / 2, sw};
    p.d = (hfp4_output){d, HFP4_DTYPE_BF16, N, 0, NULL};
    if (st == HFP4_OK) st = hfp4_ref_gemm(&p, 0);
    if (st == HFP4_OK)
        st = hfp4_moe_combine(d, N, M, N, pos, weights, HFP4_DTYPE_FP32, TOKENS, TOPK, out, HFP4_DTYPE_FP32, N);
    double secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
    if (st != HFP4_OK) {
        fprintf(stderr, "demo: %s: %s\n", hfp4_status_name(st), hfp4_last_error());
        return 1;
    }
    /* calc_diff of the tokens' outputs against the unquantized layer: sum_j w_j x_t W_e(j)^T */
    double sxy = 0, sxx = 0, syy = 0;
    for (int t = 0; t < TOKENS; t++)
        for (int n = 0; n < N; n++) {
            double ref = 0;
            for (int j = 0; j < TOPK; j++) {
                const float *xr = x + (int64_t)t * K, *wr = w + ((int64_t)ids[t * TOPK + j] * N + n) * K;
                double dot = 0;
                for (int k = 0; k < K; k++) dot += (double)xr[k] * wr[k];
                ref += weights[t * TOPK + j] * dot;
            }
            const double got = out[t * N + n];
            sxy += got * ref;
            sxx += got * got;
            syy += ref * ref;
        }
    double diff = 1.0 - 2.0 * sxy / (sxx + syy);
    int ok = diff <= 1e-2;
    printf("  route -> quantize -> m-grouped contiguous GEMM -> combine: %d routed rows in a %lld-row layout "
           "(%d-row expert segments), %.2f s of CPU time\n",
           S, (long long)M, ALIGN, secs);
    printf("  calc_diff of the %d tokens' outputs vs the unquantized layer: %.2e (DeepGEMM's threshold for FP8 x "
           "FP4: 1e-2) -> %s\n",
           TOKENS, diff, ok ? "ok" : "FAIL");
    free(x);
    free(w);
    free(pos);
    free(layout);
    free(a);
    free(wq);
    free(wsf);
    free(asf);
    free(out);
    free(d);
    return ok ? 0 : 1;
}
