/*
 * test_ref_gemm.c - hfp4_ref_gemm against an independent naive triple loop, bit-exact integer
 * GEMMs, and hfp4_check_problem's rejections.
 *
 * The fixture builds every operand from scratch (codes, scales, strides, grouping layouts) and
 * poisons everything the reference must not read (NaN codes and NaN scales in padding) or write
 * (a sentinel in D). The naive loop decodes with the public codecs and addresses scales with the
 * formula printed in include/hfp4.h, so it shares no code with the reference. Both compute
 * code x scale per operand in double and sum over K in ascending order, so outputs must agree
 * bit for bit; BF16 rounding is done here directly from double (no float step).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ---- fixture ---------------------------------------------------------------------------------- */

typedef struct spec {
    hfp4_grouping grouping;
    int64_t m, n, k;
    int32_t groups;
    hfp4_dtype a_dtype, a_sf; /* a_sf ignored for BF16 A */
    int a_gran_k, a_mn_major;
    hfp4_dtype b_dtype, b_sf;
    int b_gran_mn, b_mn_major; /* b_gran_mn: FP8 B only (1 or 128) */
    hfp4_dtype d_dtype;
    int with_c, c_is_d;
    int32_t m_alignment;
    int integer_values; /* 1: small multiples of 1/2, scales 2^-1..2^1 (exact in FP32 for k <= 160);
                           2: values in {-1, 0, 1}, scales {1, 2} (exact in BF16 for k <= 32, |C| <= 64) */
    int pad;            /* extra storage units in lds and group strides (poisoned) */
    int threads;
    uint64_t salt;
} spec;

typedef struct fixture {
    spec s;
    hfp4_gemm_problem p;
    void *bufs[16]; /* everything fx_alloc handed out (at most 10) */
    int nbufs;
    int32_t *layout;
    size_t d_bytes;
    unsigned char *d_before; /* D as it was just before the call */
    double *a_true, *b_true; /* integer mode: intended value x scale of every element */
    hfp4_rng rng;
} fixture;

/* Unused bytes after every fixture buffer. NOTE: why: the overlap tests (check_rejects_d_overlapping_an_input)
 * put D over one input and expect that input named; with buffers packed by malloc, a D of a few
 * hundred bytes also reached whichever buffer malloc had placed next, and the check named that one
 * first (a failure that came and went with the heap's layout: the same source passed in CI and
 * failed in another build of the test binary). Larger than any fixture's D. */
#define FX_GAP 4096

static void *fx_alloc(fixture *f, size_t bytes) {
    if (f->nbufs == (int)(sizeof f->bufs / sizeof f->bufs[0])) abort(); /* a test bug: raise the bound */
    void *p = malloc((bytes ? bytes : 1) + FX_GAP);
    f->bufs[f->nbufs++] = p;
    return p;
}

static int64_t align_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static uint64_t rnd(fixture *f, uint64_t n) { return hfp4_rng_next(&f->rng) % n; }

/* The scale of (g, row, K-group j), addressed exactly as include/hfp4.h states. */
static double sf_get(const hfp4_scales *s, int64_t g, int64_t row, int64_t j) {
    int64_t sr = row / s->gran_mn;
    switch (s->dtype) {
    case HFP4_DTYPE_FP32: return ((const float *)s->data)[g * s->stride_group + sr * s->stride_mn + j * s->stride_k];
    case HFP4_DTYPE_UE8M0:
        return hfp4_ue8m0_decode(((const uint8_t *)s->data)[g * s->stride_group + sr * s->stride_mn + j * s->stride_k]);
    case HFP4_DTYPE_UE8M0_PACKED: {
        uint32_t w = ((const uint32_t *)s->data)[g * s->stride_group + sr * s->stride_mn + (j / 4) * s->stride_k];
        return hfp4_ue8m0_decode((uint8_t)(w >> (8 * (j % 4))));
    }
    default: return 1.0;
    }
}

/* Scales for `groups` x `rows` x `k` at (gran_mn, gran_k): K-major (row stride = columns + pad) or
 * DeepGEMM's MN-major TMA-aligned layout. Unused storage (padding, unused packed bytes) is 0xFF:
 * NaN in every scale dtype, so reading it shows up as a NaN output. */
static void make_scales(fixture *f, hfp4_scales *s, hfp4_dtype dt, int gran_mn, int gran_k, int64_t groups,
                        int64_t rows, int64_t k, int mn_major) {
    int64_t srows = cdiv(rows, gran_mn), nk = cdiv(k, gran_k);
    int64_t cols = dt == HFP4_DTYPE_UE8M0_PACKED ? cdiv(nk, 4) : nk;
    size_t unit = dt == HFP4_DTYPE_UE8M0 ? 1 : 4;
    memset(s, 0, sizeof *s);
    s->dtype = dt;
    s->gran_mn = gran_mn;
    s->gran_k = gran_k;
    if (mn_major) {
        s->stride_mn = 1;
        s->stride_k = align_up(srows, 4);
        s->stride_group = s->stride_k * cols + f->s.pad;
    } else {
        s->stride_k = 1;
        s->stride_mn = cols + f->s.pad;
        s->stride_group = s->stride_mn * srows + f->s.pad;
    }
    size_t bytes = (size_t)(groups * s->stride_group) * unit;
    unsigned char *buf = (unsigned char *)fx_alloc(f, bytes);
    memset(buf, 0xFF, bytes);
    s->data = buf;
    for (int64_t g = 0; g < groups; g++)
        for (int64_t r = 0; r < srows; r++)
            for (int64_t j = 0; j < nk; j++) {
                int e = f->s.integer_values == 2 ? 127 + (int)rnd(f, 2)   /* 1, 2 */
                        : f->s.integer_values    ? 126 + (int)rnd(f, 3)   /* 2^-1 .. 2^1 */
                                                 : 123 + (int)rnd(f, 8);  /* 2^-4 .. 2^3 */
                int64_t off = g * s->stride_group + r * s->stride_mn;
                if (dt == HFP4_DTYPE_FP32) {
                    float v = f->s.integer_values ? ldexpf(1.0f, e - 127)
                                                  : (float)ldexp(1.0 + hfp4_rng_uniform(&f->rng), e - 127);
                    ((float *)buf)[off + j * s->stride_k] = v;
                } else if (dt == HFP4_DTYPE_UE8M0) {
                    buf[off + j * s->stride_k] = (uint8_t)e;
                } else {
                    uint32_t *w = (uint32_t *)buf + off + (j / 4) * s->stride_k;
                    if (j % 4 == 0) *w = 0xFFFFFFFFu;
                    *w = (*w & ~(0xFFu << (8 * (j % 4)))) | ((uint32_t)e << (8 * (j % 4)));
                }
            }
}

static const double fp4_magnitudes[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

/* One operand: `groups` x `rows` x `k` codes (FP8, BF16 or packed FP4), lds and group strides
 * padded and poisoned, scales as requested. In integer mode, true_out (if given) receives each
 * element's intended value times its intended scale, computed without the codecs. */
static void make_operand(fixture *f, hfp4_matrix *x, hfp4_dtype dt, hfp4_dtype sf, int gran_mn, int gran_k,
                         int64_t groups, int64_t rows, int64_t k, int mn_major, double **true_out) {
    memset(x, 0, sizeof *x);
    x->dtype = dt;
    x->rows = rows;
    x->cols = k;
    int64_t row_units = dt == HFP4_DTYPE_FP4_E2M1 ? k / 2 : k;
    size_t unit = dt == HFP4_DTYPE_BF16 ? 2 : 1;
    x->ld = row_units + f->s.pad;
    x->stride_group = groups > 1 ? rows * x->ld + f->s.pad : 0;
    int64_t units = (groups - 1) * x->stride_group + rows * x->ld;
    unsigned char *buf = (unsigned char *)fx_alloc(f, (size_t)units * unit);
    for (int64_t i = 0; i < units; i++) { /* poison: NaN for FP8/BF16; FP4 has no NaN, use 6 */
        if (dt == HFP4_DTYPE_BF16) ((uint16_t *)buf)[i] = 0x7FC0;
        else buf[i] = dt == HFP4_DTYPE_FP8_E4M3 ? 0x7F : 0x77;
    }
    x->data = buf;
    if (dt != HFP4_DTYPE_BF16) make_scales(f, &x->scales, sf, gran_mn, gran_k, groups, rows, k, mn_major);
    double *tv = NULL;
    if (true_out) tv = *true_out = (double *)fx_alloc(f, sizeof(double) * (size_t)(groups * rows * k));
    for (int64_t g = 0; g < groups; g++)
        for (int64_t r = 0; r < rows; r++) {
            int64_t base = g * x->stride_group + r * x->ld;
            for (int64_t kk = 0; kk < k; kk++) {
                double v = 0; /* intended value (integer mode) */
                if (dt == HFP4_DTYPE_FP4_E2M1) {
                    uint8_t code;
                    if (f->s.integer_values) {
                        /* 0, .5, 1, 1.5, 2 (mode 2: 0, 1), signed */
                        code = (uint8_t)((f->s.integer_values == 2 ? 2 * rnd(f, 2) : rnd(f, 5)) | (rnd(f, 2) << 3));
                        v = (code & 8 ? -1 : 1) * fp4_magnitudes[code & 7];
                    } else {
                        code = (uint8_t)rnd(f, 16); /* every code, -0 included */
                    }
                    uint8_t *byte = buf + base + kk / 2;
                    *byte = kk % 2 ? (uint8_t)((*byte & 0x0F) | (code << 4)) : code;
                } else if (dt == HFP4_DTYPE_FP8_E4M3) {
                    uint8_t code;
                    if (f->s.integer_values) {
                        v = f->s.integer_values == 2 ? (double)rnd(f, 3) - 1 : (double)rnd(f, 7) - 3;
                        code = hfp4_fp8_encode((float)v);
                    } else {
                        code = (uint8_t)rnd(f, 256);
                        if ((code & 0x7F) == 0x7F) code ^= 1; /* no NaN inside the matrix */
                    }
                    buf[base + kk] = code;
                } else {
                    if (f->s.integer_values) v = f->s.integer_values == 2 ? (double)rnd(f, 3) - 1 : (double)rnd(f, 7) - 3;
                    else v = hfp4_rng_normal(&f->rng);
                    ((uint16_t *)buf)[base + kk] = hfp4_bf16_encode((float)v);
                }
                if (tv) {
                    /* integer scales are 2^(e-127) with e chosen above; re-derive without the codecs */
                    double scale = 1.0;
                    if (dt != HFP4_DTYPE_BF16) {
                        const hfp4_scales *s = &x->scales;
                        int64_t sr = r / s->gran_mn, j = kk / s->gran_k;
                        int64_t off = g * s->stride_group + sr * s->stride_mn;
                        int e;
                        if (s->dtype == HFP4_DTYPE_FP32) {
                            frexp(((const float *)s->data)[off + j * s->stride_k], &e);
                            e += 126;
                        } else if (s->dtype == HFP4_DTYPE_UE8M0) {
                            e = ((const uint8_t *)s->data)[off + j * s->stride_k];
                        } else {
                            e = (int)((((const uint32_t *)s->data)[off + (j / 4) * s->stride_k] >> (8 * (j % 4))) & 0xFF);
                        }
                        scale = ldexp(1.0, e - 127);
                    }
                    tv[(g * rows + r) * k + kk] = v * scale;
                }
            }
        }
}

/* Grouping layouts ---------------------------------------------------------------------------- */

/* Contiguous: segments of random experts (any order), each starting at a multiple of the
 * alignment and padded with -1 to the next one, plus whole -1 tiles. Whatever the seed, the second
 * tile is all padding and, with G >= 3, the last expert is empty. */
static void make_contiguous(fixture *f, int32_t *l, int64_t m, int32_t groups, int64_t align) {
    int64_t r = 0;
    int32_t experts = groups >= 3 ? groups - 1 : groups;
    for (int step = 0; r < m; step++) { /* r is a multiple of align here */
        if (step == 1 || rnd(f, 5) == 0) {
            for (int64_t e = r + align < m ? r + align : m; r < e; r++) l[r] = -1; /* all-padding tile */
            continue;
        }
        int32_t expert = (int32_t)rnd(f, (uint64_t)experts);
        int64_t count = 1 + (int64_t)rnd(f, (uint64_t)(2 * align));
        if (count > m - r) count = m - r;
        for (int64_t e = r + count; r < e; r++) l[r] = expert;
        for (int64_t e = align_up(r, align) < m ? align_up(r, align) : m; r < e; r++) l[r] = -1;
    }
}

/* PSUM: psum[g] = align(psum[g-1]) + count_g with some empty groups; returns the m to use:
 * the last end plus random slack (sometimes below the aligned end, so its zero tail is clipped). */
static int64_t make_psum(fixture *f, int32_t *l, int32_t groups, int64_t align, int64_t max_count) {
    int64_t start = 0;
    for (int32_t g = 0; g < groups; g++) {
        /* group 0 is never empty (something is computed), group 1 always is (when G >= 3) */
        int64_t count = g == 1 && groups >= 3 ? 0
                        : g > 0 && rnd(f, 4) == 0 ? 0
                                                  : 1 + (int64_t)rnd(f, (uint64_t)max_count);
        l[g] = (int32_t)(start + count);
        start = align_up(start + count, align);
    }
    int64_t m = l[groups - 1] + (int64_t)rnd(f, (uint64_t)(2 * align));
    return m > 0 ? m : 1;
}

static void fx_build(fixture *f, const spec *s) {
    memset(f, 0, sizeof *f);
    f->s = *s;
    f->rng = hfp4_rng_make(s->salt);
    hfp4_gemm_problem *p = &f->p;
    p->grouping = s->grouping;
    p->n = s->n;
    p->k = s->k;
    p->num_groups = s->groups;
    p->m_alignment = s->m_alignment;
    int64_t align = s->m_alignment ? s->m_alignment : HFP4_DEFAULT_M_ALIGNMENT;
    int64_t m = s->m;
    if (s->grouping == HFP4_GROUPING_CONTIGUOUS) {
        f->layout = (int32_t *)fx_alloc(f, sizeof(int32_t) * (size_t)m);
        make_contiguous(f, f->layout, m, s->groups, align);
    } else if (s->grouping == HFP4_GROUPING_CONTIGUOUS_PSUM) {
        f->layout = (int32_t *)fx_alloc(f, sizeof(int32_t) * (size_t)s->groups);
        m = make_psum(f, f->layout, s->groups, align, s->m);
    } else if (s->grouping == HFP4_GROUPING_MASKED) {
        f->layout = (int32_t *)fx_alloc(f, sizeof(int32_t) * (size_t)s->groups);
        for (int32_t g = 0; g < s->groups; g++) {
            /* empty, full, or anything in between; with G >= 2 group 0 is empty and group 1 full */
            int kind = s->groups >= 2 && g < 2 ? g : (int)rnd(f, 4);
            f->layout[g] = kind == 0 ? 0 : kind == 1 ? (int32_t)m : (int32_t)rnd(f, (uint64_t)m + 1);
        }
    }
    p->m = m;
    p->layout = f->layout;
    int64_t a_groups = s->grouping == HFP4_GROUPING_MASKED ? s->groups : 1;
    double **at = s->integer_values ? &f->a_true : NULL, **bt = s->integer_values ? &f->b_true : NULL;
    make_operand(f, &p->a, s->a_dtype, s->a_sf, 1, s->a_gran_k, a_groups, m, s->k, s->a_mn_major, at);
    int b_fp8 = s->b_dtype == HFP4_DTYPE_FP8_E4M3;
    make_operand(f, &p->b, s->b_dtype, s->b_sf, b_fp8 ? s->b_gran_mn : 1, b_fp8 ? 128 : 32, s->groups, s->n, s->k,
                 s->b_mn_major, bt);

    hfp4_output *d = &p->d;
    size_t unit = s->d_dtype == HFP4_DTYPE_FP32 ? 4 : 2;
    d->dtype = s->d_dtype;
    d->ld = s->n + s->pad;
    d->stride_group = a_groups > 1 ? m * d->ld + s->pad : 0;
    int64_t units = (a_groups - 1) * d->stride_group + m * d->ld;
    f->d_bytes = (size_t)units * unit;
    d->data = fx_alloc(f, f->d_bytes);
    memset(d->data, 0xA5, f->d_bytes); /* sentinel: any byte the reference writes shows */
    if (s->with_c) {
        void *c = s->c_is_d ? d->data : fx_alloc(f, f->d_bytes);
        if (!s->c_is_d) memset(c, 0xFF, f->d_bytes); /* NaN outside the logical C */
        for (int64_t g = 0; g < a_groups; g++)
            for (int64_t r = 0; r < m; r++)
                for (int64_t j = 0; j < s->n; j++) {
                    int64_t idx = g * d->stride_group + r * d->ld + j;
                    double v = s->integer_values ? (double)rnd(f, 129) - 64 : 4.0 * hfp4_rng_normal(&f->rng);
                    if (unit == 4) ((float *)c)[idx] = (float)v;
                    else ((uint16_t *)c)[idx] = hfp4_bf16_encode((float)v);
                }
        d->c = c;
    }
    f->d_before = (unsigned char *)fx_alloc(f, f->d_bytes);
    memcpy(f->d_before, d->data, f->d_bytes);
}

static void fx_free(fixture *f) {
    for (int i = 0; i < f->nbufs; i++) free(f->bufs[i]);
    f->nbufs = 0;
}

static int d_untouched(const fixture *f) { return memcmp(f->p.d.data, f->d_before, f->d_bytes) == 0; }

/* ---- the independent naive reference -------------------------------------------------------- */

/* Round to nearest even straight from double to bfloat16 (8 significant bits). */
static uint16_t bf16_from_double(double x) {
    if (isnan(x)) return 0x7FC0;
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double ax = fabs(x);
    if (ax == 0) return sign;
    int e;
    frexp(ax, &e);
    int qe = e - 8 < -133 ? -133 : e - 8; /* quantum: 2^(e-8), subnormals 2^-133 */
    double q = ldexp(ax, -qe), fl = floor(q), rem = q - fl;
    if (rem > 0.5 || (rem == 0.5 && fmod(fl, 2.0) == 1.0)) fl += 1.0;
    double v = ldexp(fl, qe);
    if (v >= 0x1p128) return sign | 0x7F80;
    float fv = (float)v; /* exact */
    uint32_t u;
    memcpy(&u, &fv, sizeof u);
    return sign | (uint16_t)(u >> 16);
}

/* The value of element kk of row `row` of group g of x, decoded with the public codecs. */
static double naive_elem(const hfp4_matrix *x, int64_t g, int64_t row, int64_t kk) {
    int64_t base = g * x->stride_group + row * x->ld;
    if (x->dtype == HFP4_DTYPE_BF16) return hfp4_bf16_decode(((const uint16_t *)x->data)[base + kk]);
    double code;
    if (x->dtype == HFP4_DTYPE_FP8_E4M3) {
        code = hfp4_fp8_decode(((const uint8_t *)x->data)[base + kk]);
    } else {
        uint8_t byte = ((const uint8_t *)x->data)[base + kk / 2];
        code = hfp4_fp4_decode(kk % 2 ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 15));
    }
    return code * sf_get(&x->scales, g, row, kk / x->scales.gran_k);
}

/* What row r of D group g must become: expert >= 0, -1 zeros, -2 untouched (include/hfp4.h). */
static int naive_action(const hfp4_gemm_problem *p, int64_t g, int64_t r) {
    int64_t align = p->m_alignment ? p->m_alignment : HFP4_DEFAULT_M_ALIGNMENT;
    switch (p->grouping) {
    case HFP4_GROUPING_NONE: return 0;
    case HFP4_GROUPING_CONTIGUOUS: return p->layout[r];
    case HFP4_GROUPING_MASKED: return r < p->layout[g] ? (int)g : -2;
    case HFP4_GROUPING_CONTIGUOUS_PSUM: {
        int64_t start = 0;
        for (int32_t gg = 0; gg < p->num_groups; gg++) {
            int64_t end = p->layout[gg];
            if (r >= start && r < end) return gg;
            if (r >= end && r < align_up(end, align)) return -1;
            start = align_up(end, align);
        }
        return -2;
    }
    }
    return -2;
}

/* The D the problem must produce, as bytes: D's previous contents with computed and zeroed
 * elements replaced. integer mode takes operand values from a_true/b_true instead of decoding. */
static unsigned char *naive_expected(const fixture *f) {
    const hfp4_gemm_problem *p = &f->p;
    const hfp4_output *d = &p->d;
    unsigned char *want = (unsigned char *)malloc(f->d_bytes);
    memcpy(want, f->d_before, f->d_bytes);
    int64_t d_groups = p->grouping == HFP4_GROUPING_MASKED ? p->num_groups : 1;
    for (int64_t g = 0; g < d_groups; g++)
        for (int64_t r = 0; r < p->m; r++) {
            int action = naive_action(p, g, r);
            if (action == -2) continue;
            for (int64_t j = 0; j < p->n; j++) {
                int64_t idx = g * d->stride_group + r * d->ld + j;
                double acc = 0.0;
                if (action >= 0) {
                    for (int64_t kk = 0; kk < p->k; kk++) {
                        double av = f->a_true ? f->a_true[(g * p->m + r) * p->k + kk] : naive_elem(&p->a, g, r, kk);
                        double bv = f->b_true ? f->b_true[((int64_t)action * p->n + j) * p->k + kk]
                                              : naive_elem(&p->b, action, j, kk);
                        acc += av * bv;
                    }
                    if (d->c)
                        acc += d->dtype == HFP4_DTYPE_FP32
                                   ? (double)((const float *)(d->c == d->data ? (const void *)f->d_before : d->c))[idx]
                                   : (double)hfp4_bf16_decode(
                                         ((const uint16_t *)(d->c == d->data ? (const void *)f->d_before : d->c))[idx]);
                }
                if (d->dtype == HFP4_DTYPE_FP32) {
                    float v = (float)acc;
                    memcpy(want + idx * 4, &v, 4);
                } else {
                    uint16_t v = bf16_from_double(acc);
                    memcpy(want + idx * 2, &v, 2);
                }
            }
        }
    return want;
}

static const char *dt_name(hfp4_dtype d) { return hfp4_dtype_name(d); }

static void describe(const spec *s, char *buf, size_t len) {
    snprintf(buf, len,
             "grouping %d m %lld n %lld k %lld G %d | A %s sf %s gk %d %s | B %s sf %s gmn %d %s | D %s c %d%s | "
             "align %d int %d pad %d threads %d salt %llu",
             (int)s->grouping, (long long)s->m, (long long)s->n, (long long)s->k, (int)s->groups, dt_name(s->a_dtype),
             dt_name(s->a_sf), s->a_gran_k, s->a_mn_major ? "mn" : "k", dt_name(s->b_dtype), dt_name(s->b_sf),
             s->b_gran_mn, s->b_mn_major ? "mn" : "k", dt_name(s->d_dtype), s->with_c, s->c_is_d ? "(=d)" : "",
             (int)s->m_alignment, s->integer_values, s->pad, s->threads, (unsigned long long)s->salt);
}

/* Builds `s`, runs the reference, compares every byte of D with the naive expectation. Returns
 * the number of elements that differ (0 on success). */
static int run_case(const spec *s) {
    fixture f;
    fx_build(&f, s);
    char what[512];
    describe(s, what, sizeof what);
    hfp4_status st = hfp4_ref_gemm(&f.p, s->threads);
    CHECK_MSG(st == HFP4_OK, "%s: hfp4_ref_gemm -> %s (%s)", what, hfp4_status_name(st), hfp4_last_error());
    int bad = 0;
    if (st == HFP4_OK) {
        unsigned char *want = naive_expected(&f);
        size_t unit = s->d_dtype == HFP4_DTYPE_FP32 ? 4 : 2;
        int64_t per_group = f.p.d.stride_group ? f.p.d.stride_group : (int64_t)(f.d_bytes / unit);
        for (size_t e = 0; e < f.d_bytes / unit; e++) {
            if (memcmp(want + e * unit, (unsigned char *)f.p.d.data + e * unit, unit) == 0) continue;
            if (bad++ == 0) {
                uint32_t got = 0, exp = 0;
                memcpy(&got, (unsigned char *)f.p.d.data + e * unit, unit);
                memcpy(&exp, want + e * unit, unit);
                int64_t g = (int64_t)e / per_group, rem = (int64_t)e % per_group;
                CHECK_MSG(0, "%s: first mismatch at group %lld row %lld col %lld: got 0x%x want 0x%x", what,
                          (long long)g, (long long)(rem / f.p.d.ld), (long long)(rem % f.p.d.ld), got, exp);
            }
        }
        if (bad) CHECK_MSG(0, "%s: %d elements differ", what, bad);
        free(want);
    }
    fx_free(&f);
    return bad;
}

static spec base_spec(void) {
    spec s;
    memset(&s, 0, sizeof s);
    s.grouping = HFP4_GROUPING_NONE;
    s.m = 3;
    s.n = 7;
    s.k = 96;
    s.groups = 1;
    s.a_dtype = HFP4_DTYPE_FP8_E4M3;
    s.a_sf = HFP4_DTYPE_FP32;
    s.a_gran_k = 128;
    s.b_dtype = HFP4_DTYPE_FP4_E2M1;
    s.b_sf = HFP4_DTYPE_UE8M0;
    s.b_gran_mn = 1;
    s.d_dtype = HFP4_DTYPE_BF16;
    s.threads = 1;
    return s;
}

static const int64_t odd_m[3] = {1, 3, 129}, odd_n[3] = {1, 7, 130}, odd_k[3] = {32, 96, 160};
static const hfp4_dtype sf_dtypes[3] = {HFP4_DTYPE_FP32, HFP4_DTYPE_UE8M0, HFP4_DTYPE_UE8M0_PACKED};
static const int thread_counts[4] = {1, 2, 3, 0};

/* ---- (a) reference vs naive ----------------------------------------------------------------- */

TEST(ref_dense_fp8_a_fp4_b_matches_naive) {
    /* every A scale dtype x major x gran_k with every B scale dtype x major; output, C and the
     * odd shapes rotate through the cases so each value of each is covered */
    int i = 0;
    for (int asf = 0; asf < 3; asf++)
        for (int am = 0; am < 2; am++)
            for (int agk = 0; agk < 2; agk++)
                for (int bsf = 0; bsf < 3; bsf++)
                    for (int bm = 0; bm < 2; bm++, i++) {
                        spec s = base_spec();
                        s.a_sf = sf_dtypes[asf];
                        s.a_mn_major = am;
                        s.a_gran_k = agk ? 128 : 32;
                        s.b_sf = sf_dtypes[bsf];
                        s.b_mn_major = bm;
                        s.m = odd_m[i % 3];
                        s.n = odd_n[(i / 3) % 3];
                        s.k = odd_k[(i / 9) % 3];
                        s.d_dtype = i % 2 ? HFP4_DTYPE_FP32 : HFP4_DTYPE_BF16;
                        s.with_c = (i / 2) % 2;
                        s.pad = i % 5;
                        s.threads = thread_counts[i % 4];
                        s.salt = 100 + (uint64_t)i;
                        run_case(&s);
                    }
}

TEST(ref_dense_bf16_a_matches_naive) {
    int i = 0;
    for (int b = 0; b < 7; b++)
        for (int out = 0; out < 2; out++, i++) {
            spec s = base_spec();
            s.a_dtype = HFP4_DTYPE_BF16;
            s.a_sf = HFP4_DTYPE_NONE;
            if (b < 3) { /* FP4 B with each scale dtype */
                s.b_sf = sf_dtypes[b];
            } else { /* FP8 B: (128,128) and (1,128), FP32 and UE8M0 */
                s.b_dtype = HFP4_DTYPE_FP8_E4M3;
                s.b_sf = b % 2 ? HFP4_DTYPE_FP32 : HFP4_DTYPE_UE8M0;
                s.b_gran_mn = b < 5 ? 128 : 1;
            }
            s.b_mn_major = i % 2;
            s.m = odd_m[i % 3];
            s.n = odd_n[(i + 1) % 3];
            s.k = odd_k[(i / 3) % 3];
            s.d_dtype = out ? HFP4_DTYPE_FP32 : HFP4_DTYPE_BF16;
            s.with_c = (i / 2) % 2;
            s.pad = 2;
            s.threads = thread_counts[i % 4];
            s.salt = 200 + (uint64_t)i;
            run_case(&s);
        }
}

TEST(ref_dense_fp8_b_matches_naive) {
    /* n = 130 and k = 160 put rows and columns in two 128-blocks, with a partial last block */
    int i = 0;
    for (int gmn = 0; gmn < 2; gmn++)
        for (int bsf = 0; bsf < 2; bsf++)
            for (int bm = 0; bm < 2; bm++)
                for (int agk = 0; agk < 2; agk++, i++) {
                    spec s = base_spec();
                    s.b_dtype = HFP4_DTYPE_FP8_E4M3;
                    s.b_gran_mn = gmn ? 128 : 1;
                    s.b_sf = bsf ? HFP4_DTYPE_UE8M0 : HFP4_DTYPE_FP32;
                    s.b_mn_major = bm;
                    s.a_gran_k = agk ? 128 : 32;
                    s.a_sf = sf_dtypes[i % 3];
                    s.a_mn_major = (i / 3) % 2;
                    s.m = odd_m[i % 3];
                    s.n = i % 2 ? 130 : odd_n[(i / 2) % 3];
                    s.k = i % 4 < 2 ? 160 : odd_k[i % 3];
                    s.d_dtype = (i / 2) % 2 ? HFP4_DTYPE_FP32 : HFP4_DTYPE_BF16;
                    s.with_c = i % 3 == 0;
                    s.pad = i % 3;
                    s.threads = thread_counts[i % 4];
                    s.salt = 300 + (uint64_t)i;
                    run_case(&s);
                }
}

TEST(ref_contiguous_matches_naive) {
    static const int32_t aligns[4] = {8, 16, 0, 32}; /* 0 = default 128 */
    for (int i = 0; i < 16; i++) {
        spec s = base_spec();
        s.grouping = HFP4_GROUPING_CONTIGUOUS;
        s.m_alignment = aligns[i % 4];
        s.groups = 1 + i % 5;
        s.m = s.m_alignment == 0 ? 129 + 128 * (i % 3) : 1 + (int64_t)(i * 37 % 200);
        s.n = odd_n[i % 3];
        s.k = odd_k[(i / 3) % 3];
        s.a_sf = sf_dtypes[i % 3];
        s.a_mn_major = i % 2;
        s.a_gran_k = (i / 2) % 2 ? 32 : 128;
        s.b_sf = sf_dtypes[(i + 1) % 3];
        s.b_mn_major = (i / 4) % 2;
        if (i % 7 == 6) { /* FP8 weights grouped too */
            s.b_dtype = HFP4_DTYPE_FP8_E4M3;
            s.b_sf = HFP4_DTYPE_FP32;
            s.b_gran_mn = 128;
        }
        s.d_dtype = i % 2 ? HFP4_DTYPE_BF16 : HFP4_DTYPE_FP32;
        s.with_c = (i / 2) % 2;
        s.pad = i % 3;
        s.threads = thread_counts[i % 4];
        s.salt = 400 + (uint64_t)i;
        run_case(&s);
    }
}

TEST(ref_contiguous_padding_rows_are_exact_zeros) {
    /* with C present, -1 rows must still be +0 (C is not added), and an all-padding layout is valid */
    spec s = base_spec();
    s.grouping = HFP4_GROUPING_CONTIGUOUS;
    s.groups = 2;
    s.m = 24;
    s.m_alignment = 8;
    s.with_c = 1;
    s.d_dtype = HFP4_DTYPE_FP32;
    s.salt = 450;
    fixture f;
    fx_build(&f, &s);
    for (int r = 0; r < 24; r++) f.layout[r] = r < 5 ? 1 : r < 8 ? -1 : r < 16 ? -1 : 0; /* 1 x5, pad, tile, 0 x8 */
    CHECK_STATUS(hfp4_ref_gemm(&f.p, 2), HFP4_OK);
    const float *d = (const float *)f.p.d.data;
    int zeros_ok = 1;
    for (int r = 5; r < 16; r++)
        for (int j = 0; j < 7; j++) {
            uint32_t u;
            memcpy(&u, &d[r * f.p.d.ld + j], 4);
            zeros_ok &= u == 0;
        }
    CHECK(zeros_ok);
    fx_free(&f);

    fx_build(&f, &s);
    for (int r = 0; r < 24; r++) f.layout[r] = -1;
    CHECK_STATUS(hfp4_ref_gemm(&f.p, 1), HFP4_OK);
    unsigned char *want = naive_expected(&f);
    CHECK(memcmp(want, f.p.d.data, f.d_bytes) == 0);
    free(want);
    fx_free(&f);
}

TEST(ref_psum_matches_naive) {
    static const int32_t aligns[3] = {8, 0, 16};
    for (int i = 0; i < 12; i++) {
        spec s = base_spec();
        s.grouping = HFP4_GROUPING_CONTIGUOUS_PSUM;
        s.m_alignment = aligns[i % 3];
        s.groups = 1 + i % 4;
        s.m = s.m_alignment == 0 ? 160 : 40; /* max rows per group */
        s.n = odd_n[i % 3];
        s.k = odd_k[(i / 3) % 3];
        s.a_sf = sf_dtypes[(i + 2) % 3];
        s.a_mn_major = i % 2;
        s.a_gran_k = i % 2 ? 32 : 128;
        s.b_sf = sf_dtypes[i % 3];
        s.b_mn_major = (i / 2) % 2;
        s.d_dtype = (i / 2) % 2 ? HFP4_DTYPE_BF16 : HFP4_DTYPE_FP32;
        s.with_c = i % 2;
        s.pad = 1;
        s.threads = thread_counts[i % 4];
        s.salt = 500 + (uint64_t)i;
        run_case(&s);
    }
}

/* A fixture with m rows of A and D and G experts, then switched to the psum form with `psum`. */
static void fx_psum(fixture *f, int64_t m, int32_t groups, int32_t align, const int32_t *psum, uint64_t salt) {
    spec s = base_spec();
    s.grouping = HFP4_GROUPING_CONTIGUOUS; /* same buffers as psum; its layout has m >= G entries */
    s.groups = groups;
    s.m = m;
    s.m_alignment = align;
    s.d_dtype = HFP4_DTYPE_FP32;
    s.salt = salt;
    fx_build(f, &s);
    f->p.grouping = HFP4_GROUPING_CONTIGUOUS_PSUM;
    memcpy(f->layout, psum, sizeof(int32_t) * (size_t)groups);
}

TEST(ref_psum_zero_tail_stops_at_m_and_rows_after_are_untouched) {
    static const int32_t psum_sets[3][3] = {{5, 16, 20}, {0, 0, 3}, {16, 20, 32}};
    static const int64_t ms[3] = {26, 10, 40};
    for (int t = 0; t < 3; t++) {
        fixture f;
        fx_psum(&f, ms[t], 3, 16, psum_sets[t], 550 + (uint64_t)t);
        CHECK_STATUS(hfp4_ref_gemm(&f.p, 1), HFP4_OK);
        unsigned char *want = naive_expected(&f);
        CHECK_MSG(memcmp(want, f.p.d.data, f.d_bytes) == 0, "psum set %d differs from the naive result", t);
        free(want);
        const float *d = (const float *)f.p.d.data;
        size_t row_bytes = (size_t)f.p.d.ld * 4;
        if (t == 0) /* zeros: rows 5..15 (group 0's tail) and 20..25 (group 2's, clipped at m = 26) */
            CHECK(d[5 * f.p.d.ld + 3] == 0.0f && d[15 * f.p.d.ld] == 0.0f && d[20 * f.p.d.ld] == 0.0f &&
                  d[25 * f.p.d.ld + 6] == 0.0f);
        if (t == 2) /* rows 32..39 lie after every group: untouched */
            CHECK(memcmp((unsigned char *)f.p.d.data + 32 * row_bytes, f.d_before + 32 * row_bytes, 8 * row_bytes) == 0);
        fx_free(&f);
    }
}

TEST(ref_masked_matches_naive) {
    for (int i = 0; i < 12; i++) {
        spec s = base_spec();
        s.grouping = HFP4_GROUPING_MASKED;
        s.groups = 1 + i % 4;
        s.m = odd_m[i % 3];
        s.n = odd_n[(i + 2) % 3];
        s.k = odd_k[(i / 3) % 3];
        s.a_sf = sf_dtypes[i % 3];
        s.a_mn_major = (i / 2) % 2;
        s.a_gran_k = i % 2 ? 128 : 32;
        s.b_sf = sf_dtypes[(i + 1) % 3];
        s.b_mn_major = i % 2;
        if (i % 5 == 4) {
            s.a_dtype = HFP4_DTYPE_BF16;
            s.a_sf = HFP4_DTYPE_NONE;
        }
        if (i % 6 == 5) {
            s.b_dtype = HFP4_DTYPE_FP8_E4M3;
            s.b_sf = HFP4_DTYPE_UE8M0;
            s.b_gran_mn = 1;
        }
        s.d_dtype = (i / 2) % 2 ? HFP4_DTYPE_FP32 : HFP4_DTYPE_BF16;
        s.with_c = i % 3 != 0;
        s.pad = 3;
        s.threads = thread_counts[i % 4];
        s.salt = 600 + (uint64_t)i;
        run_case(&s);
    }
}

TEST(ref_thread_count_does_not_change_the_result) {
    spec s = base_spec();
    s.grouping = HFP4_GROUPING_CONTIGUOUS;
    s.groups = 3;
    s.m = 129;
    s.m_alignment = 8;
    s.n = 33;
    s.k = 96;
    s.d_dtype = HFP4_DTYPE_FP32;
    s.with_c = 1;
    s.salt = 700;
    unsigned char *first = NULL;
    for (int t = 0; t < 4; t++) {
        fixture f;
        fx_build(&f, &s);
        CHECK_STATUS(hfp4_ref_gemm(&f.p, thread_counts[t]), HFP4_OK);
        if (!first) {
            first = (unsigned char *)malloc(f.d_bytes);
            memcpy(first, f.p.d.data, f.d_bytes);
        } else {
            CHECK_MSG(memcmp(first, f.p.d.data, f.d_bytes) == 0, "threads = %d changed D", thread_counts[t]);
        }
        fx_free(&f);
    }
    free(first);
}

TEST(ref_c_may_be_d) {
    for (int i = 0; i < 4; i++) {
        spec s = base_spec();
        s.grouping = i < 2 ? HFP4_GROUPING_NONE : HFP4_GROUPING_MASKED;
        s.groups = i < 2 ? 1 : 2;
        s.m = 17;
        s.d_dtype = i % 2 ? HFP4_DTYPE_FP32 : HFP4_DTYPE_BF16;
        s.with_c = 1;
        s.c_is_d = 1;
        s.threads = 2;
        s.salt = 800 + (uint64_t)i;
        run_case(&s);
    }
}

/* ---- rounding -------------------------------------------------------------------------------- */

TEST(ref_rounds_once_to_bf16) {
    /* sum = 1 + 2^-8 + 2^-30: just above the bf16 tie between 1 and 1 + 2^-7. Rounding through
     * float first would land exactly on the tie and round to 1 (even); once-rounding gives 1+2^-7. */
    spec s = base_spec();
    s.m = 1;
    s.n = 1;
    s.k = 64;
    s.a_sf = HFP4_DTYPE_FP32;
    s.a_gran_k = 32;
    s.b_sf = HFP4_DTYPE_FP32;
    s.salt = 900;
    for (int neg = 0; neg < 2; neg++) {
        fixture f;
        fx_build(&f, &s);
        hfp4_gemm_problem *p = &f.p;
        uint8_t *a = (uint8_t *)p->a.data, *b = (uint8_t *)p->b.data;
        memset(a, 0, 64);
        memset(b, 0, 32);
        a[0] = hfp4_fp8_encode(neg ? -1.0f : 1.0f); /* K-group 0 */
        a[32] = hfp4_fp8_encode(neg ? -1.0f : 1.0f); /* K-group 1 */
        b[0] = 0x02;                                 /* element 0 = 1.0 */
        b[16] = 0x02;                                /* element 32 = 1.0 */
        ((float *)p->a.scales.data)[0] = 1.0f;
        ((float *)p->a.scales.data)[p->a.scales.stride_k] = 1.0f;
        ((float *)p->b.scales.data)[0] = 1.0f + 0x1p-8f;
        ((float *)p->b.scales.data)[p->b.scales.stride_k] = 0x1p-30f;
        CHECK_STATUS(hfp4_ref_gemm(p, 1), HFP4_OK);
        uint16_t got = *(uint16_t *)p->d.data;
        CHECK_MSG(got == (neg ? 0xBF81 : 0x3F81), "neg %d: got 0x%04x", neg, got);
        fx_free(&f);
    }
}

/* ---- (b) bit-exact integer GEMMs ------------------------------------------------------------- */

TEST(ref_bit_exact_integer_gemms) {
    /* small integer / half-integer codes, power-of-two scales: every product and sum is exact, so D
     * must equal the exact result (computed from the intended values, not through any decoder). */
    int i = 0;
    for (int grouping = 0; grouping < 4; grouping++)
        for (int out = 0; out < 2; out++)
            for (int bk = 0; bk < 2; bk++, i++) {
                spec s = base_spec();
                s.grouping = (hfp4_grouping)grouping;
                s.groups = grouping == 0 ? 1 : 3;
                s.m = grouping == HFP4_GROUPING_CONTIGUOUS_PSUM ? 12 : 19;
                s.m_alignment = 8;
                s.n = 9;
                s.integer_values = out ? 1 : 2;
                s.d_dtype = out ? HFP4_DTYPE_FP32 : HFP4_DTYPE_BF16;
                /* BF16 holds integers up to 256 exactly: keep K short there */
                s.k = out ? 160 : 32;
                s.a_sf = sf_dtypes[i % 3];
                s.a_gran_k = i % 2 ? 32 : 128;
                s.a_mn_major = (i / 3) % 2;
                s.b_sf = sf_dtypes[(i + 1) % 3];
                if (bk) {
                    s.b_dtype = HFP4_DTYPE_FP8_E4M3;
                    s.b_sf = i % 4 < 2 ? HFP4_DTYPE_UE8M0 : HFP4_DTYPE_FP32;
                    s.b_gran_mn = i % 3 ? 128 : 1;
                }
                s.with_c = 1;
                s.threads = thread_counts[i % 4];
                s.salt = 1000 + (uint64_t)i;
                fixture f;
                fx_build(&f, &s);
                /* make sure some row is computed whatever the seed (both edits keep the layout valid) */
                if (grouping == HFP4_GROUPING_MASKED) f.layout[0] = (int32_t)f.p.m;
                if (grouping == HFP4_GROUPING_CONTIGUOUS && f.layout[0] < 0) f.layout[0] = 0;
                CHECK_STATUS(hfp4_ref_gemm(&f.p, s.threads), HFP4_OK);
                unsigned char *want = naive_expected(&f); /* from a_true/b_true: exact sums */
                const hfp4_output *d = &f.p.d;
                int64_t dg = grouping == HFP4_GROUPING_MASKED ? s.groups : 1;
                int exact = 1, computed = 0;
                for (int64_t g = 0; g < dg; g++)
                    for (int64_t r = 0; r < f.p.m; r++) {
                        int act = naive_action(&f.p, g, r);
                        if (act < 0) continue;
                        computed++;
                        for (int64_t j = 0; j < f.p.n; j++) {
                            int64_t idx = g * d->stride_group + r * d->ld + j;
                            double v = out ? ((float *)want)[idx] : hfp4_bf16_decode(((uint16_t *)want)[idx]);
                            /* recompute the sum without rounding and compare */
                            double acc = 0;
                            for (int64_t kk = 0; kk < f.p.k; kk++)
                                acc += f.a_true[(g * f.p.m + r) * f.p.k + kk] * f.b_true[((int64_t)act * f.p.n + j) * f.p.k + kk];
                            acc += out ? ((const float *)d->c)[idx] : hfp4_bf16_decode(((const uint16_t *)d->c)[idx]);
                            exact &= v == acc;
                        }
                    }
                CHECK_MSG(exact, "case %d: the integer results were not exactly representable", i);
                CHECK_MSG(computed > 0, "case %d: no row was computed", i);
                CHECK_MSG(memcmp(want, d->data, f.d_bytes) == 0, "case %d (grouping %d, out %s, B %s): D is not bit-exact",
                          i, grouping, dt_name(s.d_dtype), dt_name(s.b_dtype));
                free(want);
                fx_free(&f);
            }
}

/* ---- (c) rejections -------------------------------------------------------------------------- */

/* A small valid problem of each grouping: m 16, n 8, k 64, G 2 (dense 1), align 8, pad 2
 * (psum: fx_psum's shapes, n 7, k 96, with groups [0,5) and [8,16)). */
static void fx_valid(fixture *f, hfp4_grouping grouping) {
    spec s = base_spec();
    s.grouping = grouping;
    s.groups = grouping == HFP4_GROUPING_NONE ? 1 : 2;
    s.m = 16;
    s.n = 8;
    s.k = 64;
    s.a_gran_k = 32;
    s.m_alignment = 8;
    s.pad = 2;
    s.salt = 77;
    if (grouping == HFP4_GROUPING_CONTIGUOUS_PSUM) {
        static const int32_t psum[2] = {5, 16}; /* groups [0,5) and [8,16) */
        fx_psum(f, 16, 2, 8, psum, 77);
        return;
    }
    fx_build(f, &s);
    if (grouping == HFP4_GROUPING_CONTIGUOUS)
        for (int r = 0; r < f->p.m; r++) f->layout[r] = r < 5 ? 0 : r < 8 ? -1 : 1;
    if (grouping == HFP4_GROUPING_MASKED) {
        f->layout[0] = 3;
        f->layout[1] = 16;
    }
}

/* Runs the reference on a copy of f->p changed by `mutate` (which names it p_): the status must be
 * `want`, the message must mention `needle`, and D must be untouched. */
#define EXPECT_STATUS(f, want, needle, mutate)                                                       \
    do {                                                                                             \
        hfp4_gemm_problem p_ = (f)->p;                                                               \
        mutate;                                                                                      \
        CHECK_REJECT(hfp4_ref_gemm(&p_, 1), want, needle);                                           \
        CHECK_MSG(d_untouched(f), "D was written by a rejected call (%s)", #mutate);                 \
    } while (0)
#define EXPECT_INVALID(f, needle, mutate) EXPECT_STATUS(f, HFP4_ERR_INVALID_ARGUMENT, needle, mutate)

TEST(ref_valid_baselines_pass) {
    /* the rejection tests below mutate these; they must be valid to begin with */
    for (int g = 0; g < 4; g++) {
        fixture f;
        fx_valid(&f, (hfp4_grouping)g);
        CHECK_STATUS(hfp4_check_problem(&f.p, 0), HFP4_OK);
        CHECK_STATUS(hfp4_check_problem(&f.p, 1), HFP4_OK);
        unsigned char *want = naive_expected(&f);
        CHECK_STATUS(hfp4_ref_gemm(&f.p, 1), HFP4_OK);
        CHECK(memcmp(want, f.p.d.data, f.d_bytes) == 0);
        free(want);
        fx_free(&f);
    }
}

TEST(check_rejects_null_pointers) {
    CHECK_REJECT(hfp4_ref_gemm(NULL, 1), HFP4_ERR_INVALID_ARGUMENT, "problem is NULL");
    CHECK_REJECT(hfp4_check_problem(NULL, 1), HFP4_ERR_INVALID_ARGUMENT, "hfp4_gemm: problem is NULL");
    fixture f;
    fx_valid(&f, HFP4_GROUPING_MASKED);
    EXPECT_INVALID(&f, "a.data is NULL", p_.a.data = NULL);
    EXPECT_INVALID(&f, "b.data is NULL", p_.b.data = NULL);
    EXPECT_INVALID(&f, "d.data is NULL", p_.d.data = NULL);
    EXPECT_INVALID(&f, "a.scales.data is NULL", p_.a.scales.data = NULL);
    EXPECT_INVALID(&f, "b.scales.data is NULL", p_.b.scales.data = NULL);
    EXPECT_INVALID(&f, "layout is NULL", p_.layout = NULL);
    fx_free(&f);
}

TEST(check_rejects_bad_sizes) {
    fixture f;
    fx_valid(&f, HFP4_GROUPING_NONE);
    EXPECT_INVALID(&f, "problem->m = 0", p_.m = 0);
    EXPECT_INVALID(&f, "problem->m = -1", p_.m = -1);
    EXPECT_INVALID(&f, "problem->n = 0", p_.n = 0);
    EXPECT_INVALID(&f, "problem->n = -3", p_.n = -3);
    EXPECT_INVALID(&f, "problem->k = 0", p_.k = 0);
    EXPECT_INVALID(&f, "problem->k = -32", p_.k = -32);
    EXPECT_INVALID(&f, "a.rows = 16 must equal m = 15", p_.m = 15);
    EXPECT_INVALID(&f, "b.rows = 8 must equal n = 9", p_.n = 9; p_.d.ld = 20);
    EXPECT_INVALID(&f, "a.cols = 64 must equal k = 96", p_.k = 96);
    EXPECT_INVALID(&f, "b.cols = 64 must equal k = 96", p_.k = 96; p_.a.cols = 96; p_.a.ld = 96;
                   p_.a.scales.stride_mn = 8);
    CHECK_REJECT(hfp4_ref_gemm(&f.p, -1), HFP4_ERR_INVALID_ARGUMENT, "num_threads = -1");
    CHECK(d_untouched(&f));
    EXPECT_INVALID(&f, "grouping = 7", p_.grouping = (hfp4_grouping)7);
    EXPECT_INVALID(&f, "expected_m = -1", p_.expected_m = -1);
    EXPECT_INVALID(&f, "d_padding = 1 must be", p_.d_padding = HFP4_D_PADDING_ANY); /* dense */
    EXPECT_INVALID(&f, "d_padding = 2 must be", p_.d_padding = (hfp4_d_padding)2);
    fx_free(&f);

    /* K not a multiple of 32 with FP4 weights, everything else consistent (BF16 A has no scales) */
    spec s = base_spec();
    s.a_dtype = HFP4_DTYPE_BF16;
    s.a_sf = HFP4_DTYPE_NONE;
    s.k = 96;
    s.pad = 8;
    s.salt = 78;
    fx_build(&f, &s);
    EXPECT_INVALID(&f, "problem->k = 100 must be a multiple of 32 for FP4 weights",
                   p_.k = 100; p_.a.cols = 100; p_.b.cols = 100);
    fx_free(&f);
}

TEST(check_rejects_small_leading_dimensions_and_group_strides) {
    fixture f;
    fx_valid(&f, HFP4_GROUPING_MASKED);
    EXPECT_INVALID(&f, "a.ld = 63 must be >= k = 64", p_.a.ld = 63);
    EXPECT_INVALID(&f, "b.ld = 31 must be >= 32", p_.b.ld = 31);
    EXPECT_INVALID(&f, "d.ld = 7 must be >= n = 8", p_.d.ld = 7);
    EXPECT_INVALID(&f, "a.stride_group", p_.a.stride_group = 16 * p_.a.ld - 1);
    EXPECT_INVALID(&f, "b.stride_group", p_.b.stride_group = 8 * p_.b.ld - 1);
    EXPECT_INVALID(&f, "d.stride_group", p_.d.stride_group = 16 * p_.d.ld - 1);
    EXPECT_INVALID(&f, "a.stride_group", p_.a.stride_group = 0);
    fx_free(&f);
    fx_valid(&f, HFP4_GROUPING_CONTIGUOUS);
    EXPECT_INVALID(&f, "b.stride_group = 0", p_.b.stride_group = 0);
    fx_free(&f);
}

/* Strides so large that an offset would overflow int64: rejected before any address is formed (they
 * crashed the reference before; found by a fuzzing review) */
TEST(check_rejects_overflowing_strides) {
    const int64_t huge = (int64_t)1 << 62;
    fixture f;
    fx_valid(&f, HFP4_GROUPING_NONE);
    EXPECT_INVALID(&f, "a.ld = 4611686018427387904", p_.a.ld = huge);
    EXPECT_INVALID(&f, "a.ld = 9223372036854775807", p_.a.ld = INT64_MAX);
    EXPECT_INVALID(&f, "d.ld = 4611686018427387904", p_.d.ld = huge);
    EXPECT_INVALID(&f, "b.ld = 4611686018427387904", p_.b.ld = huge);
    EXPECT_INVALID(&f, "b.scales strides", p_.b.scales.stride_mn = INT64_MAX);
    EXPECT_INVALID(&f, "b.scales strides", p_.b.scales.stride_k = (int64_t)1 << 61);
    EXPECT_INVALID(&f, "a.scales strides", p_.a.scales.stride_mn = huge);
    EXPECT_INVALID(&f, "problem->k = 9223372036854775806 must be <= 2^40",
                   p_.k = INT64_MAX - 1; p_.a.cols = INT64_MAX - 1; p_.b.cols = INT64_MAX - 1);
    fx_free(&f);
    fx_valid(&f, HFP4_GROUPING_MASKED);
    EXPECT_INVALID(&f, "a.ld", p_.a.stride_group = huge);
    EXPECT_INVALID(&f, "d.ld", p_.d.stride_group = huge);
    EXPECT_INVALID(&f, "a.scales strides", p_.a.scales.stride_group = huge);
    fx_free(&f);
}

/* Sizes past 2^40 and negative group strides are named as such, not as a span past 2^60 that
 * blames ld (found by an API review) */
TEST(check_names_huge_sizes_and_negative_group_strides) {
    const int64_t big = ((int64_t)1 << 40) + 1, huge = (int64_t)1 << 62;
    fixture f;
    fx_valid(&f, HFP4_GROUPING_NONE);
    EXPECT_INVALID(&f, "problem->m = 1099511627777 must be <= 2^40", p_.m = p_.a.rows = big);
    EXPECT_INVALID(&f, "problem->m = 4611686018427387904 must be <= 2^40", p_.m = p_.a.rows = huge);
    EXPECT_INVALID(&f, "problem->n = 9223372036854775807 must be <= 2^40", p_.n = p_.b.rows = INT64_MAX;
                   p_.d.ld = INT64_MAX);
    EXPECT_INVALID(&f, "problem->k = 4611686018427387904 must be <= 2^40", p_.k = p_.a.cols = p_.b.cols = huge;
                   p_.a.ld = huge; p_.b.ld = huge / 2);
    /* dense: "0 when one group", so a negative one is garbage, named as such */
    EXPECT_INVALID(&f, "problem->a.stride_group = -1 must be >= 0", p_.a.stride_group = -1);
    EXPECT_INVALID(&f, "problem->b.stride_group = -1 must be >= 0", p_.b.stride_group = -1);
    EXPECT_INVALID(&f, "problem->d.stride_group = -5 must be >= 0", p_.d.stride_group = -5);
    /* 2^40 itself is a size, not an error of its own (here the shapes then disagree) */
    EXPECT_INVALID(&f, "a.rows = 16 must equal m = 1099511627776", p_.m = (int64_t)1 << 40);
    fx_free(&f);
    fx_valid(&f, HFP4_GROUPING_MASKED);
    EXPECT_INVALID(&f, "problem->a.stride_group = -1 must be >= 0", p_.a.stride_group = -1);
    EXPECT_INVALID(&f, "problem->d.stride_group = -1 must be >= 0", p_.d.stride_group = -1);
    EXPECT_INVALID(&f, "problem->b.stride_group = -1 must be >= 0", p_.b.stride_group = -1);
    fx_free(&f);
}

/* Runs both forms of the check (host, and device pointers as hfp4_gemm runs it) on a copy of f->p
 * changed by `mutate`: both must reject with a message that mentions `needle`. */
#define EXPECT_INVALID_BOTH(f, needle, mutate)                                                      \
    do {                                                                                             \
        hfp4_gemm_problem p_ = (f)->p;                                                               \
        mutate;                                                                                      \
        CHECK_REJECT(hfp4_check_problem(&p_, 0), HFP4_ERR_INVALID_ARGUMENT, needle);                 \
        CHECK_REJECT(hfp4_check_problem(&p_, 1), HFP4_ERR_INVALID_ARGUMENT, needle);                 \
        CHECK_REJECT(hfp4_ref_gemm(&p_, 1), HFP4_ERR_INVALID_ARGUMENT, needle);                      \
        CHECK_MSG(d_untouched(f), "D was written by a rejected call (%s)", #mutate);                 \
    } while (0)

/* Pointers not aligned to their element size: on the GPU they became a sticky misaligned-address
 * fault after HFP4_OK (found by an API review), so both forms of the check reject them. */
TEST(check_rejects_misaligned_pointers) {
    fixture f;
    fx_valid(&f, HFP4_GROUPING_MASKED); /* A FP8 + FP32 scales, B FP4 + UE8M0 scales, D BF16 */
    char *d = (char *)f.p.d.data;
    const char *sa = (const char *)f.p.a.scales.data, *sb = (const char *)f.p.b.scales.data;
    EXPECT_INVALID_BOTH(&f, "d.data = ", p_.d.data = d + 1);
    EXPECT_INVALID_BOTH(&f, "must be 2-byte aligned for bf16", p_.d.data = d + 1);
    EXPECT_INVALID_BOTH(&f, "must be 4-byte aligned for fp32", p_.d.dtype = HFP4_DTYPE_FP32; p_.d.data = d + 2);
    EXPECT_INVALID_BOTH(&f, "d.c = ", p_.d.c = d + 1);
    EXPECT_INVALID_BOTH(&f, "must be 4-byte aligned for fp32", p_.d.dtype = HFP4_DTYPE_FP32; p_.d.c = d + 6);
    EXPECT_INVALID_BOTH(&f, "a.scales.data = ", p_.a.scales.data = sa + 1);
    EXPECT_INVALID_BOTH(&f, "must be 4-byte aligned for fp32 scales", p_.a.scales.data = sa + 2);
    EXPECT_INVALID_BOTH(&f, "must be 4-byte aligned for ue8m0_packed scales",
                        p_.b.scales.dtype = HFP4_DTYPE_UE8M0_PACKED; p_.b.scales.data = sb + 1);
    EXPECT_INVALID_BOTH(&f, "a.data = ", p_.a.dtype = HFP4_DTYPE_BF16; p_.a.scales.dtype = HFP4_DTYPE_NONE;
                        p_.a.data = (const char *)p_.a.data + 1);
    EXPECT_INVALID_BOTH(&f, "layout = ", p_.layout = (const int32_t *)((const char *)f.layout + 2));
    EXPECT_INVALID_BOTH(&f, "must be 4-byte aligned (int32)", p_.layout = (const int32_t *)((const char *)f.layout + 1));
    /* byte-sized units have no alignment: UE8M0 bytes and FP8 codes anywhere (the device form reads
     * nothing, so the shifted buffers need no extra room) */
    hfp4_gemm_problem q = f.p;
    q.b.scales.data = sb + 1;
    q.a.data = (const char *)q.a.data + 1;
    CHECK_STATUS(hfp4_check_problem(&q, 1), HFP4_OK);
    fx_free(&f);

    fx_valid(&f, HFP4_GROUPING_NONE); /* a dense problem ignores its layout, aligned or not */
    hfp4_gemm_problem r = f.p;
    r.layout = (const int32_t *)((const char *)f.p.d.data + 1);
    CHECK_STATUS(hfp4_check_problem(&r, 1), HFP4_OK);
    fx_free(&f);
}

TEST(check_rejects_d_overlapping_an_input) {
    fixture f;
    fx_valid(&f, HFP4_GROUPING_NONE);
    EXPECT_INVALID(&f, "overlaps a.data", p_.d.data = (void *)p_.a.data);
    EXPECT_INVALID(&f, "overlaps b.data", p_.d.data = (void *)((const uint8_t *)p_.b.data + 8));
    /* the scale arrays are inputs too: a D on top of them rewrote scales still to be read (found by
     * an API review: the reference returned HFP4_OK with garbage) */
    EXPECT_INVALID(&f, "overlaps a.scales.data", p_.d.data = (void *)p_.a.scales.data);
    EXPECT_INVALID(&f, "overlaps b.scales.data", p_.d.data = (void *)p_.b.scales.data);
    /* D ending inside the scales, starting before them */
    EXPECT_INVALID(&f, "overlaps b.scales.data", p_.d.data = (void *)((const uint8_t *)p_.b.scales.data - 2));
    fx_free(&f);

    fx_valid(&f, HFP4_GROUPING_MASKED);
    EXPECT_INVALID(&f, "overlaps layout", p_.d.data = (void *)f.layout);
    EXPECT_INVALID(&f, "overlaps a.scales.data", p_.d.data = (void *)p_.a.scales.data);
    EXPECT_INVALID(&f, "overlaps b.scales.data", p_.d.data = (void *)p_.b.scales.data);
    /* with device pointers nothing is compared (the GPU plan tests use one dummy buffer) */
    hfp4_gemm_problem q = f.p;
    q.d.data = (void *)f.layout;
    CHECK_STATUS(hfp4_check_problem(&q, 1), HFP4_OK);
    fx_free(&f);
}

/* C may be D (accumulate in place) or apart from it; a C that overlaps D elsewhere was read after
 * D's writes reached it (found by an API review: c = d + 1 returned HFP4_OK with wrong sums) */
TEST(check_rejects_c_partially_overlapping_d) {
    fixture f;
    fx_valid(&f, HFP4_GROUPING_MASKED);
    char *d = (char *)f.p.d.data;
    EXPECT_INVALID(&f, "d.c = ", p_.d.c = d + 2);
    EXPECT_INVALID(&f, "overlaps d.data", p_.d.c = d + 2);
    /* C sharing only D's last element (the fixture's D buffer also holds the last row's padding) */
    const hfp4_output *o = &f.p.d;
    const int64_t last = (int64_t)(f.p.num_groups - 1) * o->stride_group + (f.p.m - 1) * o->ld + f.p.n - 1;
    EXPECT_INVALID(&f, "overlaps d.data", p_.d.c = d + 2 * last);
    EXPECT_INVALID(&f, "overlaps d.data", p_.d.c = d - 2); /* (the address is only compared, never read) */
    hfp4_gemm_problem q = f.p;
    q.d.c = d;
    CHECK_STATUS(hfp4_check_problem(&q, 0), HFP4_OK);
    q.d.c = d + 2 * (last + 1); /* right after D's last element: apart */
    CHECK_STATUS(hfp4_check_problem(&q, 0), HFP4_OK);
    fx_free(&f);
}

TEST(check_rejects_bad_scales) {
    fixture f;
    fx_valid(&f, HFP4_GROUPING_MASKED); /* A FP32 K-major (1,32), B UE8M0 K-major (1,32) */
    EXPECT_INVALID(&f, "a.scales strides", p_.a.scales.stride_mn = 1);
    EXPECT_INVALID(&f, "a.scales strides", p_.a.scales.stride_mn = -1);
    EXPECT_INVALID(&f, "b.scales strides", p_.b.scales.stride_k = 0);
    EXPECT_INVALID(&f, "a.scales.stride_group", p_.a.scales.stride_group = 16 * 2 - 1);
    EXPECT_INVALID(&f, "b.scales.stride_group", p_.b.scales.stride_group = 0);
    EXPECT_INVALID(&f, "a.scales.gran_k = 64 must be 32 or 128", p_.a.scales.gran_k = 64);
    EXPECT_INVALID(&f, "a.scales.gran_mn = 2, expected 1", p_.a.scales.gran_mn = 2);
    EXPECT_INVALID(&f, "b.scales.gran_k = 128, expected 32", p_.b.scales.gran_k = 128);
    EXPECT_INVALID(&f, "b.scales.gran_mn = 128, expected 1", p_.b.scales.gran_mn = 128);
    EXPECT_INVALID(&f, "a.scales.dtype = none", p_.a.scales.dtype = HFP4_DTYPE_NONE);
    EXPECT_INVALID(&f, "b.scales.dtype = bf16", p_.b.scales.dtype = HFP4_DTYPE_BF16);
    EXPECT_INVALID(&f, "a.scales.dtype = fp32 (1) must be none for bf16", p_.a.dtype = HFP4_DTYPE_BF16);
    fx_free(&f);

    /* FP8 weights: (128,128) or (1,128) only, FP32 or UE8M0 */
    spec s = base_spec();
    s.b_dtype = HFP4_DTYPE_FP8_E4M3;
    s.b_sf = HFP4_DTYPE_FP32;
    s.b_gran_mn = 128;
    s.k = 160;
    s.salt = 79;
    fx_build(&f, &s);
    CHECK_STATUS(hfp4_ref_gemm(&f.p, 1), HFP4_OK);
    memcpy(f.d_before, f.p.d.data, f.d_bytes);
    EXPECT_INVALID(&f, "b.scales.gran_mn = 64 must be 1 or 128", p_.b.scales.gran_mn = 64);
    EXPECT_INVALID(&f, "b.scales.gran_k = 32, expected 128", p_.b.scales.gran_k = 32);
    EXPECT_INVALID(&f, "b.scales.dtype = ue8m0_packed", p_.b.scales.dtype = HFP4_DTYPE_UE8M0_PACKED);
    EXPECT_INVALID(&f, "b.ld = 159 must be >= 160", p_.b.ld = 159);
    fx_free(&f);
}

TEST(check_rejects_bad_dtypes_and_group_counts) {
    fixture f;
    fx_valid(&f, HFP4_GROUPING_NONE);
    EXPECT_INVALID(&f, "a.dtype = fp4_e2m1", p_.a.dtype = HFP4_DTYPE_FP4_E2M1);
    EXPECT_INVALID(&f, "b.dtype = bf16", p_.b.dtype = HFP4_DTYPE_BF16);
    EXPECT_INVALID(&f, "d.dtype = fp8_e4m3", p_.d.dtype = HFP4_DTYPE_FP8_E4M3);
    EXPECT_INVALID(&f, "d.dtype = none", p_.d.dtype = HFP4_DTYPE_NONE);
    EXPECT_INVALID(&f, "d.dtype = int32", p_.d.dtype = HFP4_DTYPE_INT32);
    EXPECT_INVALID(&f, "num_groups = 0", p_.num_groups = 0);
    EXPECT_INVALID(&f, "num_groups = 2 must be 1 for a dense", p_.num_groups = 2);
    fx_free(&f);
    fx_valid(&f, HFP4_GROUPING_MASKED);
    EXPECT_INVALID(&f, "num_groups = 0", p_.num_groups = 0);
    EXPECT_INVALID(&f, "num_groups = -1", p_.num_groups = -1);
    fx_free(&f);
}

TEST(check_rejects_bad_contiguous_layouts) {
    fixture f;
    fx_valid(&f, HFP4_GROUPING_CONTIGUOUS); /* rows: 0 x5, -1 x3, 1 x8; G = 2, align 8 */
    EXPECT_INVALID(&f, "m_alignment = 12", p_.m_alignment = 12);
    EXPECT_INVALID(&f, "m_alignment = -8", p_.m_alignment = -8);
    EXPECT_INVALID(&f, "layout[15] = 2 (expert of row 15) is outside [-1, 2)", f.layout[15] = 2);
    f.layout[15] = 1;
    EXPECT_INVALID(&f, "layout[6] = -2", f.layout[6] = -2);
    f.layout[6] = -1;
    /* expert 1 starting at row 6 instead of 8 */
    EXPECT_INVALID(&f, "starts a segment of expert 1 at row 6", f.layout[6] = 1; f.layout[7] = 1);
    f.layout[6] = f.layout[7] = -1;
    /* an expert switch without padding at an unaligned row */
    EXPECT_INVALID(&f, "row 12", f.layout[12] = 0);
    f.layout[12] = 1;
    /* the default alignment (128) rejects the same layout: expert 1 starts at 8 */
    EXPECT_INVALID(&f, "m_alignment = 128", p_.m_alignment = 0);
    /* with device pointers the layout is not read, so only the host form rejects it */
    f.layout[3] = 5;
    CHECK_STATUS(hfp4_check_problem(&f.p, 1), HFP4_OK);
    CHECK_REJECT(hfp4_check_problem(&f.p, 0), HFP4_ERR_INVALID_ARGUMENT, "hfp4_ref_gemm: problem->layout[3] = 5");
    f.layout[3] = 0;
    CHECK_STATUS(hfp4_check_problem(&f.p, 0), HFP4_OK);
    fx_free(&f);
}

TEST(check_rejects_bad_psum_and_masked_layouts) {
    fixture f;
    static const int32_t psum[3] = {5, 12, 17}; /* groups [0,5) [8,12) [16,17) */
    fx_psum(&f, 20, 3, 8, psum, 80);
    CHECK_STATUS(hfp4_check_problem(&f.p, 0), HFP4_OK);
    EXPECT_INVALID(&f, "layout[1] = 4 (psum end of group 1) is before the group's start 8", f.layout[1] = 4);
    EXPECT_INVALID(&f, "layout[1] = 5 (psum end of group 1) is before the group's start 8", f.layout[1] = 5);
    EXPECT_INVALID(&f, "layout[2] = 21 (psum end of group 2) is outside [0, m = 20]", f.layout[1] = 12; f.layout[2] = 21);
    EXPECT_INVALID(&f, "layout[0] = -1", f.layout[2] = 17; f.layout[0] = -1);
    f.layout[0] = 5;
    /* an empty group after an aligned end is fine; psum = {8, 8, 17} */
    f.layout[0] = 8;
    f.layout[1] = 8;
    CHECK_STATUS(hfp4_check_problem(&f.p, 0), HFP4_OK);
    fx_free(&f);

    fx_valid(&f, HFP4_GROUPING_MASKED);
    EXPECT_INVALID(&f, "layout[0] = -1 (masked_m of group 0) is outside [0, m = 16]", f.layout[0] = -1);
    EXPECT_INVALID(&f, "layout[1] = 17 (masked_m of group 1) is outside [0, m = 16]", f.layout[0] = 3; f.layout[1] = 17);
    f.layout[1] = 16;
    f.layout[0] = 0; /* masked_m = 0 is valid */
    CHECK_STATUS(hfp4_check_problem(&f.p, 0), HFP4_OK);
    fx_free(&f);
}

TEST(ref_sm90_weights_malformed_requests_are_invalid) {
    fixture f;
    fx_valid(&f, HFP4_GROUPING_NONE);
    EXPECT_INVALID(&f, "b.scales.data is NULL", p_.b.dtype = HFP4_DTYPE_FP4_E2M1_SM90; p_.b.ld = 0;
                   p_.b.scales.data = NULL);
    /* a malformed request is INVALID even with SM90 weights */
    EXPECT_INVALID(&f, "multiple of 32", p_.b.dtype = HFP4_DTYPE_FP4_E2M1_SM90; p_.k = p_.a.cols = p_.b.cols = 48;
                   p_.a.scales.stride_mn = 4);
    EXPECT_INVALID(&f, "b.scales.dtype = ue8m0_packed (6) must be ue8m0 or fp32",
                   p_.b.dtype = HFP4_DTYPE_FP4_E2M1_SM90; p_.b.scales.dtype = HFP4_DTYPE_UE8M0_PACKED);
    EXPECT_INVALID(&f, "b.rows = 8 must equal n = 4", p_.b.dtype = HFP4_DTYPE_FP4_E2M1_SM90; p_.n = 4);
    fx_free(&f);
}
