/*
 * demo_cpu.c - the CPU half of `hfp4 demo`: a small DeepSeek-V4-Flash-shaped MoE experts layer (8
 * experts, hidden 1024, intermediate 256; 48 tokens routed top-2 with routing weights) through the
 * library's CPU forms of every step a GPU layer runs: hfp4_moe_route onto the contiguous layout,
 * hfp4_moe_quantize_rows (FP8 activations with 1x128 scales, as DeepSeek-V4's recipe; the experts
 * FP4 with UE8M0 1x32 scales, as the checkpoint stores them), the m-grouped GEMM gate|up
 * (hfp4_ref_gemm, D's padding rows left alone), hfp4_moe_swiglu_quantize_rows (V4's clamped SwiGLU
 * fused with the second quantization), the m-grouped GEMM down, hfp4_moe_combine; the tokens'
 * outputs are checked with DeepGEMM's calc_diff against the layer in double, once with the FP4
 * weights the GEMMs use and once unquantized.
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

/* the m-grouped contiguous GEMM of the layer's FP8 rows a [M, k] (scales sa) with the FP4 experts w
 * [E][n, k] (UE8M0 1x32 scales ws) into d [M, n] BF16, D's padding rows left alone */
static hfp4_status grouped_gemm(const int32_t *layout, int64_t M, int64_t n, int64_t k, int32_t E, const uint8_t *a,
                                const float *sa, const uint8_t *w, const uint8_t *ws, uint16_t *d) {
    hfp4_gemm_problem p;
    memset(&p, 0, sizeof p);
    p.grouping = HFP4_GROUPING_CONTIGUOUS;
    p.m = M;
    p.n = n;
    p.k = k;
    p.num_groups = E;
    p.layout = layout;
    p.m_alignment = 128;
    p.d_padding = HFP4_D_PADDING_ANY; /* (nothing reads them) */
    p.a = (hfp4_matrix){a, HFP4_DTYPE_FP8_E4M3, M, k, k, 0, {(void *)sa, HFP4_DTYPE_FP32, 1, 128, k / 128, 1, 0}};
    p.b = (hfp4_matrix){w, HFP4_DTYPE_FP4_E2M1, n, k, k / 2, n * k / 2,
                        {(void *)ws, HFP4_DTYPE_UE8M0, 1, 32, k / 32, 1, n * (k / 32)}};
    p.d = (hfp4_output){d, HFP4_DTYPE_BF16, n, 0, NULL};
    return hfp4_ref_gemm(&p, 0);
}

/* E experts' FP32 weights [E][n, k] as the checkpoint stores them: FP4 with UE8M0 1x32 scales */
static hfp4_status quantize_experts(const float *w, int32_t E, int64_t n, int64_t k, uint8_t *q, uint8_t *sf) {
    hfp4_status st = HFP4_OK;
    for (int32_t e = 0; st == HFP4_OK && e < E; e++) {
        hfp4_scales s = {sf + (int64_t)e * n * (k / 32), HFP4_DTYPE_UE8M0, 1, 32, k / 32, 1, 0};
        st = hfp4_quantize_fp4_per_token(w + (int64_t)e * n * k, HFP4_DTYPE_FP32, n, k, k, 1, q + (int64_t)e * n * k / 2,
                                         k / 2, &s);
    }
    return st;
}

/* the FP4 experts q (UE8M0 1x32 scales sf) decoded back to floats: the weights the GEMMs really use */
static void dequantize_experts(const uint8_t *q, const uint8_t *sf, int32_t E, int64_t n, int64_t k, float *w) {
    for (int64_t r = 0; r < (int64_t)E * n; r++)
        for (int64_t c = 0; c < k; c++) {
            const uint8_t byte = q[r * (k / 2) + c / 2];
            w[r * k + c] = hfp4_fp4_decode(c % 2 ? byte >> 4 : byte & 15) * hfp4_ue8m0_decode(sf[r * (k / 32) + c / 32]);
        }
}

/* the layer in double for each token (out [TOKENS][H]) with weights w1, w2:
 * sum_j w_j down_e(silu(min(gate_e(x), L)) * clamp(up_e(x), -L, L)), e the token's j-th expert */
static void reference_layer(const float *x, const float *w1, const float *w2, const int32_t *ids, const float *weights,
                            int tokens, int top_k, int64_t H, int64_t I, double limit, double *out) {
    double *h = malloc(sizeof(double) * I);
    for (int t = 0; t < tokens; t++) {
        double *o = out + (int64_t)t * H;
        for (int64_t c = 0; c < H; c++) o[c] = 0;
        for (int j = 0; j < top_k; j++) {
            const int64_t e = ids[t * top_k + j];
            const float *xr = x + (int64_t)t * H;
            for (int64_t i = 0; i < I; i++) {
                const float *wg = w1 + (e * 2 * I + i) * H, *wu = w1 + (e * 2 * I + I + i) * H;
                double g = 0, u = 0;
                for (int64_t k = 0; k < H; k++) g += (double)xr[k] * wg[k], u += (double)xr[k] * wu[k];
                g = g < limit ? g : limit;
                u = u < -limit ? -limit : u > limit ? limit : u;
                h[i] = g / (1.0 + exp(-g)) * u;
            }
            for (int64_t c = 0; c < H; c++) {
                const float *wd = w2 + (e * H + c) * I;
                double y = 0;
                for (int64_t i = 0; i < I; i++) y += h[i] * wd[i];
                o[c] += weights[t * top_k + j] * y;
            }
        }
    }
    free(h);
}

/* DeepGEMM's calc_diff: 1 - 2 <a, b> / (<a, a> + <b, b>) */
static double calc_diff(const float *got, const double *ref, int64_t count) {
    double sxy = 0, sxx = 0, syy = 0;
    for (int64_t i = 0; i < count; i++) sxy += got[i] * ref[i], sxx += (double)got[i] * got[i], syy += ref[i] * ref[i];
    return 1.0 - 2.0 * sxy / (sxx + syy);
}

int hfp4_cmd_demo_cpu(int argc, char **argv) {
    if (argc > 0) {
        fprintf(stderr, "hfp4 demo: unexpected argument '%s' (demo takes none)\n", argv[0]);
        return 2;
    }
    enum { E = 8, H = 1024, I = 256, TOKENS = 48, TOPK = 2, S = TOKENS * TOPK, ALIGN = 128 };
    const float LIMIT = 10.0f; /* DeepSeek-V4's swiglu_limit */
    printf("hfp4 %s demo (CPU reference): an experts layer, %d experts (gate|up [%d, %d], down [%d, %d], FP4), "
           "%d tokens routed top-%d\n",
           hfp4_version_string(), E, 2 * I, H, H, I, TOKENS, TOPK);
    /* route: token t goes to experts (t % E) and ((t * 3 + 1) % E), weights 0.7 / 0.3 */
    int32_t ids[S];
    float weights[S];
    for (int t = 0; t < TOKENS; t++) {
        ids[t * TOPK] = t % E;
        ids[t * TOPK + 1] = (t * 3 + 1) % E == t % E ? (t + 1) % E : (t * 3 + 1) % E;
        weights[t * TOPK] = 0.7f;
        weights[t * TOPK + 1] = 0.3f;
    }
    const int64_t M = hfp4_moe_layout_rows(S, E, ALIGN);
    float *x = malloc(sizeof(float) * TOKENS * H), *w1 = malloc(sizeof(float) * E * 2 * I * H);
    float *w2 = malloc(sizeof(float) * E * H * I), *out = malloc(sizeof(float) * TOKENS * H);
    for (int64_t i = 0; i < (int64_t)TOKENS * H; i++) x[i] = (float)demo_normal();
    for (int64_t i = 0; i < (int64_t)E * 2 * I * H; i++) w1[i] = (float)(demo_normal() * 0.05);
    for (int64_t i = 0; i < (int64_t)E * H * I; i++) w2[i] = (float)(demo_normal() * 0.05);
    int32_t *pos = malloc(sizeof(int32_t) * S), *layout = malloc(sizeof(int32_t) * M);
    uint8_t *q1 = malloc((size_t)E * 2 * I * H / 2), *s1 = malloc((size_t)E * 2 * I * H / 32);
    uint8_t *q2 = malloc((size_t)E * H * I / 2), *s2 = malloc((size_t)E * H * I / 32);
    uint8_t *a1 = calloc((size_t)(M * H), 1), *a2 = calloc((size_t)(M * I), 1);
    float *sa1 = calloc((size_t)(M * H / 128), sizeof(float)), *sa2 = calloc((size_t)(M * I / 128), sizeof(float));
    uint16_t *d1 = malloc(sizeof(uint16_t) * M * 2 * I), *d2 = malloc(sizeof(uint16_t) * M * H);
    hfp4_status st = quantize_experts(w1, E, 2 * I, H, q1, s1);
    if (st == HFP4_OK) st = quantize_experts(w2, E, H, I, q2, s2);
    clock_t c0 = clock();
    if (st == HFP4_OK) st = hfp4_moe_route(ids, 0, S, E, ALIGN, pos, layout, M);
    if (st == HFP4_OK) st = hfp4_moe_quantize_rows(x, HFP4_DTYPE_FP32, TOKENS, H, H, TOPK, pos, S, 128, a1, H, sa1, M);
    if (st == HFP4_OK) st = grouped_gemm(layout, M, 2 * I, H, E, a1, sa1, q1, s1, d1);
    if (st == HFP4_OK) st = hfp4_moe_swiglu_quantize_rows(d1, 2 * I, I, HFP4_GATE_UP_STACKED, LIMIT, pos, S, 128, a2, I, sa2, M);
    if (st == HFP4_OK) st = grouped_gemm(layout, M, H, I, E, a2, sa2, q2, s2, d2);
    if (st == HFP4_OK)
        st = hfp4_moe_combine(d2, H, M, H, pos, weights, HFP4_DTYPE_FP32, TOKENS, TOPK, out, HFP4_DTYPE_FP32, H);
    double secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
    /* the same layer in one call (hfp4_moe_forward, whose _gpu form an engine or the Python backend
     * calls on the device): the steps above, composed by the library on one workspace */
    float *out1 = malloc(sizeof(float) * TOKENS * H);
    void *ws = NULL;
    hfp4_moe_forward_problem fp;
    memset(&fp, 0, sizeof fp);
    fp.tokens = TOKENS, fp.top_k = TOPK, fp.num_experts = E;
    fp.x = x, fp.x_dtype = HFP4_DTYPE_FP32, fp.ldx = H;
    fp.ids = ids, fp.weights = weights, fp.weights_dtype = HFP4_DTYPE_FP32;
    fp.w13 = (hfp4_matrix){q1, HFP4_DTYPE_FP4_E2M1, 2 * I, H, H / 2, 2 * I * H / 2,
                           {s1, HFP4_DTYPE_UE8M0, 1, 32, H / 32, 1, 2 * I * (H / 32)}};
    fp.w2 = (hfp4_matrix){q2, HFP4_DTYPE_FP4_E2M1, H, I, I / 2, H * I / 2,
                          {s2, HFP4_DTYPE_UE8M0, 1, 32, I / 32, 1, H * (I / 32)}};
    fp.gate_up = HFP4_GATE_UP_STACKED, fp.swiglu_limit = LIMIT, fp.gran_k = 128, fp.m_alignment = ALIGN;
    fp.out = out1, fp.out_dtype = HFP4_DTYPE_FP32, fp.ldo = H;
    if (st == HFP4_OK) st = hfp4_moe_forward_workspace_size(&fp, &fp.workspace_bytes);
    if (st == HFP4_OK && !(ws = fp.workspace = aligned_alloc(256, fp.workspace_bytes))) st = HFP4_ERR_OUT_OF_MEMORY;
    if (st == HFP4_OK) st = hfp4_moe_forward(&fp);
    if (st != HFP4_OK) {
        fprintf(stderr, "demo: %s: %s\n", hfp4_status_name(st), hfp4_last_error());
        return 1;
    }
    const int one_call_same = memcmp(out1, out, sizeof(float) * TOKENS * H) == 0;
    free(out1), free(ws);
    /* two checks of the tokens' outputs, in double: against the layer with the FP4 weights the GEMMs
     * use (what remains is the FP8 activations' and BF16 outputs' rounding: the pipeline's own
     * error), and against the unquantized layer (adds the checkpoint's FP4 rounding of the weights,
     * three times over: gate, up, down) */
    double *ref = malloc(sizeof(double) * TOKENS * H);
    float *wd1 = malloc(sizeof(float) * E * 2 * I * H), *wd2 = malloc(sizeof(float) * E * H * I);
    dequantize_experts(q1, s1, E, 2 * I, H, wd1);
    dequantize_experts(q2, s2, E, H, I, wd2);
    reference_layer(x, wd1, wd2, ids, weights, TOKENS, TOPK, H, I, LIMIT, ref);
    const double diff_q = calc_diff(out, ref, (int64_t)TOKENS * H);
    reference_layer(x, w1, w2, ids, weights, TOKENS, TOPK, H, I, LIMIT, ref);
    const double diff_u = calc_diff(out, ref, (int64_t)TOKENS * H);
    const int ok = diff_q <= 3e-3 && diff_u <= 5e-2 && one_call_same;
    printf("  route -> quantize -> grouped GEMM gate|up -> SwiGLU + quantize -> grouped GEMM down -> combine: %d "
           "routed rows in a %lld-row layout (%d-row expert segments), %.2f s of CPU time\n",
           S, (long long)M, ALIGN, secs);
    printf("  calc_diff of the %d tokens' outputs vs the same layer in double with the FP4 weights: %.2e (limit 3e-3: "
           "two FP8 e4m3 quantizations, ~5e-4 each); vs the unquantized layer: %.2e (limit 5e-2: FP4 weights in three "
           "projections; DeepGEMM's for one: 1e-2) -> %s\n",
           TOKENS, diff_q, diff_u, ok ? "ok" : "FAIL");
    printf("  the same layer in one call (hfp4_moe_forward, the CPU form of hfp4_moe_forward_gpu): %s\n",
           one_call_same ? "identical to the steps, bit for bit" : "DIFFERS from the steps (FAIL)");
    free(ref), free(wd1), free(wd2);
    free(x), free(w1), free(w2), free(out), free(pos), free(layout), free(q1), free(s1), free(q2), free(s2);
    free(a1), free(a2), free(sa1), free(sa2), free(d1), free(d2);
    return ok ? 0 : 1;
}
