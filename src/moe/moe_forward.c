/*
 * moe_forward.c - a whole experts layer in one call (hfp4.h, hfp4_moe_forward): the MoE glue's
 * steps and the two grouped GEMMs composed on the caller's workspace, with the CPU forms (and
 * hfp4_ref_gemm) or the _gpu forms (and hfp4_gemm). Why one call: an eager decode step pays ~7 us of
 * host time for every library call made from Python (bench/RESULTS.md v35); this makes seven one.
 *
 * The workspace holds, each region 256-byte aligned: row_pos [S] and layout [m_pad] (int32), the
 * two GEMMs' activation scales [m_pad][ceil(H / gran_k)] and [m_pad][ceil(I / gran_k)] (FP32), their
 * FP8 activations [m_pad][H] and [m_pad][I], and their BF16 outputs [m_pad][2I] and [m_pad][H];
 * S = T top_k routed rows, m_pad = hfp4_moe_layout_rows(S, E, alignment). Padding rows of the
 * activations stay unwritten (hfp4.h: no other row reads them) and the GEMMs leave D's alone.
 */
#include <stdint.h>
#include <string.h>

#include "internal.h"

/* Where each region starts in the workspace, and its size */
typedef struct moe_forward_shape {
    int64_t tokens, routed_rows, hidden, inter, m_pad, c1, c2;
    int32_t alignment;
    size_t off_pos, off_layout, off_sf1, off_sf2, off_a1, off_a2, off_d1, off_d2, bytes;
} moe_forward_shape;

static size_t region(size_t *at, int64_t bytes) {
    const size_t start = *at;
    *at += ((size_t)bytes + 255) / 256 * 256;
    return start;
}

static hfp4_status forward_shape(const char *fn, const hfp4_moe_forward_problem *p, moe_forward_shape *s) {
    HFP4_CHECK_ARG(p != NULL, "%s: problem is NULL", fn);
    HFP4_CHECK_ARG(p->tokens >= 0 && p->tokens <= ((int64_t)1 << 34), "%s: tokens = %lld must be in [0, 2^34]", fn,
                   (long long)p->tokens);
    HFP4_CHECK_ARG(p->top_k >= 1 && p->top_k <= 1024, "%s: top_k = %d must be in [1, 1024]", fn, (int)p->top_k);
    HFP4_CHECK_ARG(p->num_experts >= 1, "%s: num_experts = %d must be >= 1", fn, (int)p->num_experts);
    HFP4_CHECK_ARG(p->gran_k == 32 || p->gran_k == 128, "%s: gran_k = %d must be 32 or 128", fn, (int)p->gran_k);
    const int32_t a = p->m_alignment ? p->m_alignment : HFP4_DEFAULT_M_ALIGNMENT;
    HFP4_CHECK_ARG(a > 0 && a % 8 == 0, "%s: m_alignment = %d must be a positive multiple of 8 (or 0: 128)", fn,
                   (int)p->m_alignment);
    const int64_t h = p->w13.cols, i2 = p->w13.rows;
    /* (H, I <= 2^24 and m_pad < 2^31 keep every region's size, and their sum, far inside int64) */
    HFP4_CHECK_ARG(h >= 1 && h <= ((int64_t)1 << 24) && i2 >= 2 && i2 <= ((int64_t)1 << 25) && i2 % 2 == 0,
                   "%s: w13 is %lld x %lld; it must be [2I, H] a group, 2I even, H and I in [1, 2^24]", fn,
                   (long long)i2, (long long)h);
    HFP4_CHECK_ARG(p->ids_int64 == 0 || p->ids_int64 == 1, "%s: ids_int64 = %d must be 0 (int32) or 1 (int64)", fn,
                   p->ids_int64);
    HFP4_CHECK_ARG(p->w2.rows == h && p->w2.cols == i2 / 2,
                   "%s: w2 is %lld x %lld; after w13 [%lld, %lld] it must be [H = %lld, I = %lld] a group", fn,
                   (long long)p->w2.rows, (long long)p->w2.cols, (long long)i2, (long long)h, (long long)h,
                   (long long)(i2 / 2));
    s->tokens = p->tokens;
    s->routed_rows = p->tokens * p->top_k;
    s->hidden = h;
    s->inter = i2 / 2;
    s->alignment = a;
    s->m_pad = hfp4_moe_layout_rows(s->routed_rows, p->num_experts, a);
    HFP4_CHECK_ARG(s->m_pad >= 0 && s->m_pad < ((int64_t)1 << 31),
                   "%s: tokens = %lld x top_k = %d over %d experts need %lld layout rows (int32 row places: < 2^31)",
                   fn, (long long)p->tokens, (int)p->top_k, (int)p->num_experts, (long long)s->m_pad);
    s->c1 = (h + p->gran_k - 1) / p->gran_k;
    s->c2 = (s->inter + p->gran_k - 1) / p->gran_k;
    size_t at = 0;
    s->off_pos = region(&at, 4 * s->routed_rows);
    s->off_layout = region(&at, 4 * s->m_pad);
    s->off_sf1 = region(&at, 4 * s->m_pad * s->c1);
    s->off_sf2 = region(&at, 4 * s->m_pad * s->c2);
    s->off_a1 = region(&at, s->m_pad * h);
    s->off_a2 = region(&at, s->m_pad * s->inter);
    s->off_d1 = region(&at, 2 * s->m_pad * i2);
    s->off_d2 = region(&at, 2 * s->m_pad * h);
    s->bytes = at;
    return HFP4_OK;
}

hfp4_status hfp4_moe_forward_workspace_size(const hfp4_moe_forward_problem *problem, size_t *bytes) {
    const char *fn = "hfp4_moe_forward_workspace_size";
    HFP4_CHECK_ARG(bytes != NULL, "%s: bytes is NULL", fn);
    moe_forward_shape s;
    HFP4_TRY(forward_shape(fn, problem, &s));
    *bytes = s.bytes;
    return HFP4_OK;
}

/* One grouped GEMM of the layer: FP8 rows a (FP32 scales sf, cols k) x the expert weights w into
 * BF16 d [m_pad][w.rows], padding rows left alone */
static hfp4_status layer_gemm(const hfp4_moe_forward_problem *p, const moe_forward_shape *s, const int32_t *layout,
                              const uint8_t *a, const float *sf, int64_t k, int64_t c, const hfp4_matrix *w, void *d,
                              int gpu, hfp4_stream stream) {
    hfp4_gemm_problem g;
    memset(&g, 0, sizeof g);
    g.grouping = HFP4_GROUPING_CONTIGUOUS;
    g.m = s->m_pad;
    g.n = w->rows;
    g.k = k;
    g.num_groups = p->num_experts;
    g.layout = layout;
    g.m_alignment = s->alignment;
    g.d_padding = HFP4_D_PADDING_ANY;
    const int64_t hit = s->routed_rows < p->num_experts ? s->routed_rows : p->num_experts;
    g.expected_m = (s->routed_rows + hit - 1) / hit; /* rows per hit expert under even routing: a tile hint */
    g.a.data = a;
    g.a.dtype = HFP4_DTYPE_FP8_E4M3;
    g.a.rows = s->m_pad;
    g.a.cols = k;
    g.a.ld = k;
    g.a.scales.data = sf;
    g.a.scales.dtype = HFP4_DTYPE_FP32;
    g.a.scales.gran_mn = 1;
    g.a.scales.gran_k = p->gran_k;
    g.a.scales.stride_mn = c;
    g.a.scales.stride_k = 1;
    g.b = *w;
    g.d.data = d;
    g.d.dtype = HFP4_DTYPE_BF16;
    g.d.ld = w->rows;
    return gpu ? hfp4_gemm(&g, stream) : hfp4_ref_gemm(&g, 0);
}

static hfp4_status moe_forward(const char *fn, const hfp4_moe_forward_problem *p, int gpu, hfp4_stream stream) {
    moe_forward_shape s;
    HFP4_TRY(forward_shape(fn, p, &s));
    if (s.tokens == 0) return HFP4_OK; /* (no rows: out has none either, and no workspace is needed) */
    HFP4_CHECK_ARG(p->workspace != NULL && (uintptr_t)p->workspace % 256 == 0,
                   "%s: workspace = %p must be a 256-byte aligned buffer", fn, p->workspace);
    HFP4_CHECK_ARG(p->workspace_bytes >= s.bytes, "%s: workspace_bytes = %zu; this layer needs %zu "
                   "(hfp4_moe_forward_workspace_size)", fn, p->workspace_bytes, s.bytes);
    char *ws = (char *)p->workspace;
    int32_t *pos = (int32_t *)(ws + s.off_pos), *layout = (int32_t *)(ws + s.off_layout);
    float *sf1 = (float *)(ws + s.off_sf1), *sf2 = (float *)(ws + s.off_sf2);
    uint8_t *a1 = (uint8_t *)(ws + s.off_a1), *a2 = (uint8_t *)(ws + s.off_a2);
    void *d1 = ws + s.off_d1, *d2 = ws + s.off_d2;
    const int64_t S = s.routed_rows, m = s.m_pad, h = s.hidden, i = s.inter;
    const int32_t e = p->num_experts, k = p->top_k, g = p->gran_k;
    if (gpu) {
        HFP4_TRY(hfp4_moe_route_gpu(p->ids, p->ids_int64, S, e, s.alignment, pos, layout, m, stream));
        HFP4_TRY(hfp4_moe_quantize_rows_gpu(p->x, p->x_dtype, s.tokens, h, p->ldx, k, pos, S, g, a1, h, sf1, m,
                                            stream));
    } else {
        HFP4_TRY(hfp4_moe_route(p->ids, p->ids_int64, S, e, s.alignment, pos, layout, m));
        HFP4_TRY(hfp4_moe_quantize_rows(p->x, p->x_dtype, s.tokens, h, p->ldx, k, pos, S, g, a1, h, sf1, m));
    }
    HFP4_TRY(layer_gemm(p, &s, layout, a1, sf1, h, s.c1, &p->w13, d1, gpu, stream));
    if (gpu)
        HFP4_TRY(hfp4_moe_swiglu_quantize_rows_gpu(d1, 2 * i, i, p->gate_up, p->swiglu_limit, pos, S, g, a2, i, sf2,
                                                   m, stream));
    else
        HFP4_TRY(hfp4_moe_swiglu_quantize_rows(d1, 2 * i, i, p->gate_up, p->swiglu_limit, pos, S, g, a2, i, sf2, m));
    HFP4_TRY(layer_gemm(p, &s, layout, a2, sf2, i, s.c2, &p->w2, d2, gpu, stream));
    if (gpu)
        return hfp4_moe_combine_gpu(d2, h, m, h, pos, p->weights, p->weights_dtype, s.tokens, k, p->out, p->out_dtype,
                                    p->ldo, stream);
    return hfp4_moe_combine(d2, h, m, h, pos, p->weights, p->weights_dtype, s.tokens, k, p->out, p->out_dtype,
                            p->ldo);
}

hfp4_status hfp4_moe_forward(const hfp4_moe_forward_problem *problem) {
    return moe_forward("hfp4_moe_forward", problem, 0, NULL);
}

hfp4_status hfp4_moe_forward_gpu(const hfp4_moe_forward_problem *problem, hfp4_stream stream) {
    return moe_forward("hfp4_moe_forward_gpu", problem, 1, stream);
}
