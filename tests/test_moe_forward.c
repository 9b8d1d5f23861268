/*
 * test_moe_forward.c - hfp4_moe_forward (a whole experts layer in one call) on the CPU: bit for bit
 * the steps it composes, run one by one on buffers of the test's own (route, quantize, hfp4_ref_gemm,
 * SwiGLU + quantize, hfp4_ref_gemm, combine), both gate|up layouts and scale granularities, with
 * expert-parallel sentinels; and its argument checks. Its numbers against a token-by-token reference
 * are checked in python/tests/test_experts.py (the experts backend runs it); the GPU form against
 * this one there and in the Python GPU tests.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "hfp4.h"

enum { E = 5, H = 256, I = 128, T = 7, K_TOP = 3 };

typedef struct layer {
    uint8_t w13[E * 2 * I * H / 2], w2[E * H * I / 2];
    uint8_t s13[E * 2 * I * H / 32], s2[E * H * I / 32];
    uint16_t x[T * H];
    int64_t ids[T * K_TOP];
    float weights[T * K_TOP];
} layer;

static hfp4_matrix fp4_weights(const uint8_t *w, const uint8_t *sf, int64_t n, int64_t k) {
    hfp4_matrix m;
    memset(&m, 0, sizeof m);
    m.data = w;
    m.dtype = HFP4_DTYPE_FP4_E2M1;
    m.rows = n;
    m.cols = k;
    m.ld = k / 2;
    m.stride_group = n * k / 2;
    m.scales.data = sf;
    m.scales.dtype = HFP4_DTYPE_UE8M0;
    m.scales.gran_mn = 1;
    m.scales.gran_k = 32;
    m.scales.stride_mn = k / 32;
    m.scales.stride_k = 1;
    m.scales.stride_group = n * k / 32;
    return m;
}

static void make_layer(layer *l, uint64_t seed) {
    hfp4_rng rng = hfp4_rng_make(seed);
    for (size_t i = 0; i < sizeof l->w13; i++) l->w13[i] = (uint8_t)(hfp4_rng_next(&rng) & 0xFF);
    for (size_t i = 0; i < sizeof l->w2; i++) l->w2[i] = (uint8_t)(hfp4_rng_next(&rng) & 0xFF);
    for (size_t i = 0; i < sizeof l->s13; i++) l->s13[i] = (uint8_t)(120 + hfp4_rng_next(&rng) % 6);
    for (size_t i = 0; i < sizeof l->s2; i++) l->s2[i] = (uint8_t)(120 + hfp4_rng_next(&rng) % 6);
    for (int i = 0; i < T * H; i++) l->x[i] = hfp4_bf16_encode((float)(hfp4_rng_normal(&rng) * 2.0));
    for (int t = 0; t < T; t++)
        for (int j = 0; j < K_TOP; j++) { /* distinct experts a token, some sentinels */
            l->ids[t * K_TOP + j] = (t + 2 * j) % E;
            l->weights[t * K_TOP + j] = (float)(0.1 + 0.8 * hfp4_rng_uniform(&rng));
        }
    l->ids[1] = E;      /* another rank's expert */
    l->ids[3 * K_TOP] = -1;
}

static hfp4_moe_forward_problem problem_of(const layer *l, int gran_k, hfp4_gate_up gu, float *out) {
    hfp4_moe_forward_problem p;
    memset(&p, 0, sizeof p);
    p.tokens = T;
    p.top_k = K_TOP;
    p.num_experts = E;
    p.x = l->x;
    p.x_dtype = HFP4_DTYPE_BF16;
    p.ldx = H;
    p.ids = l->ids;
    p.ids_int64 = 1;
    p.weights = l->weights;
    p.weights_dtype = HFP4_DTYPE_FP32;
    p.w13 = fp4_weights(l->w13, l->s13, 2 * I, H);
    p.w2 = fp4_weights(l->w2, l->s2, H, I);
    p.gate_up = gu;
    p.swiglu_limit = 3.0f;
    p.gran_k = gran_k;
    p.out = out;
    p.out_dtype = HFP4_DTYPE_FP32;
    p.ldo = H;
    return p;
}

/* The same layer step by step on the test's own buffers */
static void by_steps(const hfp4_moe_forward_problem *p, float *out) {
    const int64_t S = T * K_TOP, m = hfp4_moe_layout_rows(S, E, 128), c1 = H / p->gran_k, c2 = I / p->gran_k;
    int32_t *pos = (int32_t *)malloc(4 * S), *lay = (int32_t *)malloc(4 * m);
    uint8_t *a1 = (uint8_t *)calloc((size_t)(m * H), 1), *a2 = (uint8_t *)calloc((size_t)(m * I), 1);
    float *sf1 = (float *)calloc((size_t)(m * c1), 4), *sf2 = (float *)calloc((size_t)(m * c2), 4);
    uint16_t *d1 = (uint16_t *)calloc((size_t)(m * 2 * I), 2), *d2 = (uint16_t *)calloc((size_t)(m * H), 2);
    CHECK_STATUS(hfp4_moe_route(p->ids, 1, S, E, 128, pos, lay, m), HFP4_OK);
    CHECK_STATUS(hfp4_moe_quantize_rows(p->x, HFP4_DTYPE_BF16, T, H, H, K_TOP, pos, S, p->gran_k, a1, H, sf1, m),
                 HFP4_OK);
    for (int second = 0; second < 2; second++) {
        hfp4_gemm_problem g;
        memset(&g, 0, sizeof g);
        g.grouping = HFP4_GROUPING_CONTIGUOUS;
        g.m = m;
        g.n = second ? H : 2 * I;
        g.k = second ? I : H;
        g.num_groups = E;
        g.layout = lay;
        g.m_alignment = 128;
        g.d_padding = HFP4_D_PADDING_ANY;
        g.a.data = second ? a2 : a1;
        g.a.dtype = HFP4_DTYPE_FP8_E4M3;
        g.a.rows = m;
        g.a.cols = g.k;
        g.a.ld = g.k;
        g.a.scales.data = second ? sf2 : sf1;
        g.a.scales.dtype = HFP4_DTYPE_FP32;
        g.a.scales.gran_mn = 1;
        g.a.scales.gran_k = p->gran_k;
        g.a.scales.stride_mn = second ? c2 : c1;
        g.a.scales.stride_k = 1;
        g.b = second ? p->w2 : p->w13;
        g.d.data = second ? (void *)d2 : (void *)d1;
        g.d.dtype = HFP4_DTYPE_BF16;
        g.d.ld = g.n;
        CHECK_STATUS(hfp4_ref_gemm(&g, 1), HFP4_OK);
        if (!second)
            CHECK_STATUS(hfp4_moe_swiglu_quantize_rows(d1, 2 * I, I, p->gate_up, p->swiglu_limit, pos, S, p->gran_k,
                                                       a2, I, sf2, m),
                         HFP4_OK);
    }
    CHECK_STATUS(hfp4_moe_combine(d2, H, m, H, pos, p->weights, HFP4_DTYPE_FP32, T, K_TOP, out, HFP4_DTYPE_FP32, H),
                 HFP4_OK);
    free(pos), free(lay), free(a1), free(a2), free(sf1), free(sf2), free(d1), free(d2);
}

TEST(moe_forward_is_its_steps) {
    static layer l;
    make_layer(&l, 77);
    for (int v = 0; v < 4; v++) {
        float *got = (float *)malloc(sizeof(float) * T * H), *want = (float *)malloc(sizeof(float) * T * H);
        for (int i = 0; i < T * H; i++) got[i] = NAN;
        hfp4_moe_forward_problem p = problem_of(&l, v & 1 ? 32 : 128,
                                                v & 2 ? HFP4_GATE_UP_INTERLEAVED : HFP4_GATE_UP_STACKED, got);
        size_t bytes = 0;
        CHECK_STATUS(hfp4_moe_forward_workspace_size(&p, &bytes), HFP4_OK);
        CHECK(bytes > 0 && bytes % 256 == 0);
        p.workspace = aligned_alloc(256, bytes);
        memset(p.workspace, 0xFF, bytes); /* (NaN everywhere: padding rows must not matter) */
        p.workspace_bytes = bytes;
        CHECK_STATUS(hfp4_moe_forward(&p), HFP4_OK);
        by_steps(&p, want);
        CHECK(memcmp(got, want, sizeof(float) * T * H) == 0);
        double norm = 0.0;
        for (int i = 0; i < T * H; i++) norm += fabs(got[i]);
        CHECK(isfinite(norm) && norm > 0.0);
        free(p.workspace), free(got), free(want);
    }
}

TEST(moe_forward_rejections) {
    static layer l;
    make_layer(&l, 78);
    float out[4];
    hfp4_moe_forward_problem p = problem_of(&l, 128, HFP4_GATE_UP_STACKED, out);
    size_t bytes = 0;
    CHECK_REJECT(hfp4_moe_forward(NULL), HFP4_ERR_INVALID_ARGUMENT, "problem is NULL");
    CHECK_REJECT(hfp4_moe_forward_workspace_size(&p, NULL), HFP4_ERR_INVALID_ARGUMENT, "bytes is NULL");
    hfp4_moe_forward_problem q = p;
    q.gran_k = 64;
    CHECK_REJECT(hfp4_moe_forward_workspace_size(&q, &bytes), HFP4_ERR_INVALID_ARGUMENT, "gran_k = 64");
    q = p;
    q.w2.cols = 96;
    CHECK_REJECT(hfp4_moe_forward(&q), HFP4_ERR_INVALID_ARGUMENT, "w2 is 256 x 96");
    q = p;
    q.top_k = 0;
    CHECK_REJECT(hfp4_moe_forward(&q), HFP4_ERR_INVALID_ARGUMENT, "top_k = 0");
    q = p;
    q.ids_int64 = 2;
    CHECK_REJECT(hfp4_moe_forward(&q), HFP4_ERR_INVALID_ARGUMENT, "ids_int64 = 2");
    q = p;
    q.w13.cols = q.w2.rows = (int64_t)1 << 62; /* (sizes that would overflow the workspace's) */
    CHECK_REJECT(hfp4_moe_forward_workspace_size(&q, &bytes), HFP4_ERR_INVALID_ARGUMENT, "H and I in [1, 2^24]");
    q = p;
    q.m_alignment = 12;
    CHECK_REJECT(hfp4_moe_forward(&q), HFP4_ERR_INVALID_ARGUMENT, "m_alignment = 12");
    CHECK_STATUS(hfp4_moe_forward_workspace_size(&p, &bytes), HFP4_OK);
    char *ws = (char *)aligned_alloc(256, bytes + 256);
    q = p;
    q.workspace = ws;
    q.workspace_bytes = bytes - 1;
    CHECK_REJECT(hfp4_moe_forward(&q), HFP4_ERR_INVALID_ARGUMENT, "workspace_bytes");
    q.workspace = ws + 16;
    q.workspace_bytes = bytes;
    CHECK_REJECT(hfp4_moe_forward(&q), HFP4_ERR_INVALID_ARGUMENT, "256-byte aligned");
    q = p;
    q.workspace = ws;
    q.workspace_bytes = bytes;
    q.x_dtype = HFP4_DTYPE_FP8_E4M3; /* (a step's own check: named after the step) */
    CHECK_REJECT(hfp4_moe_forward(&q), HFP4_ERR_INVALID_ARGUMENT, "x_dtype");
    q = p;
    q.tokens = 0; /* nothing to do, out untouched, no workspace needed */
    out[0] = 5.0f;
    CHECK_STATUS(hfp4_moe_forward(&q), HFP4_OK);
    CHECK(out[0] == 5.0f);
    /* the GPU form: the same checks first, then NO_DEVICE without a GPU */
    q = p;
    q.gran_k = 16;
    CHECK_REJECT(hfp4_moe_forward_gpu(&q, NULL), HFP4_ERR_INVALID_ARGUMENT, "hfp4_moe_forward_gpu: gran_k = 16");
    free(ws);
}
