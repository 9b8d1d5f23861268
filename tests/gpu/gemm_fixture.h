/*
 * gemm_fixture.h - builds random FP8 x FP4 GEMM problems on the host, runs them on the GPU and
 * checks every element against an exact double-precision reference (shared by the GPU tests and
 * the demo/bench checks). Host C++ compiled by nvcc; C-style.
 */
#pragma once
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hfp4.h"
#include "internal.h"

typedef struct gemm_case {
    hfp4_grouping grouping;
    int64_t m, n, k;      /* masked: m = max rows per group */
    int32_t groups;
    int32_t a_gran;       /* 32 or 128 */
    hfp4_dtype a_scale;   /* FP32, UE8M0, UE8M0_PACKED */
    int w_pow2;           /* 0: arbitrary FP32 scales; 1: powers of two within 7 binades (folded
                             chunks, one base per row for all of K); 2: powers of two over 30
                             binades plus all-zero groups (mostly per-32 chunks); 3: powers of two
                             within 3 binades per 128-K chunk but ~23 over K (every chunk folded,
                             the row's base changes from chunk to chunk); 4: 7 binades, except
                             30 binades in every other chunk of every third 128-row tile (folded
                             and per-32 chunks in one tile, all-folded tiles next to them); 5: 7
                             binades, except 30 binades in chunk 33 (K >= 4352) of every other
                             128-row tile (a tile's only per-32 chunk past its 32nd) */
    hfp4_dtype d_dtype;   /* BF16 or FP32 */
    int with_c;
    int32_t alignment;    /* contiguous forms */
    int32_t extra_rows;   /* psum: rows of A and D after the last group (must stay untouched); contiguous:
                             padding rows (-1) after the last segment (written as zeros) */
    int32_t d_pad;        /* D and C rows are n + d_pad elements apart; the pad must stay untouched */
    int64_t expected_m;   /* hfp4_gemm_problem.expected_m (0: none), which picks the token tile */
    int d_padding_any;    /* contiguous forms: d_padding = HFP4_D_PADDING_ANY, so D's padding rows may
                             keep the poison or be zeros (their only allowed values) */
    int a_mn_major;       /* FP32 activation scales MN-major (DeepGEMM's TMA-aligned layout: stride_mn 1,
                             stride_k = rows rounded up to 4) instead of K-major; 2: the same one float
                             past a 16-byte boundary (the kernels' block copies must not apply); 3:
                             stride_k = rows, not rounded (k-group blocks aligned only now and then) */
    const int32_t *rows;  /* masked: every group's masked_m instead of random ones; contiguous and psum:
                             every group's rows (before alignment padding) */
    int holes;            /* contiguous: rows 3, 10, 17, ... (i % 7 == 3) of every segment are padding
                             (-1) too, so real rows are not one prefix of their tile; never a row i % 8
                             == 0 (an 8-token tile's first row: DeepGEMM's contract makes such a tile
                             all padding, and the narrow-block split's 8-token launch follows it) */
    int chain;            /* a second GEMM launched right after the first on the same stream, no
                             sync between (programmatic dependent launch lets them overlap):
                             1: with the first's D as its C, into a D of its own (read after write;
                             needs with_c = 0); 2: writing its D over the first's C (write after
                             read; needs with_c = 1); 3: the same GEMM at the same time on a second
                             stream, into a poisoned D of its own: both Ds must be equal, bit for bit
                             (the two launches overlap only where the first's CTAs leave SMs free;
                             that they never share a counter is gpu_dyn_slots's check) */
    uint32_t flags;       /* hfp4_gemm_flags' for every GEMM of the case (0: hfp4_gemm's) */
    int late_a;           /* A and its scales are written by a kernel launched just before the GEMM that
                             lets its dependents start at once and writes them only ~50 us later (the
                             GEMM must wait for it: HFP4_GEMM_OVERLAP_PREVIOUS covers b and layout only) */
    uint64_t seed;
} gemm_case;

typedef struct gemm_host {
    gemm_case cs;
    uint8_t *a;           /* [G or 1][m][k] fp8 codes, ld = k                       */
    float *a_sf;          /* [G or 1][m][ceil(k/gran)] (K-major) FP32 values            */
    uint8_t *a_sf_bytes;  /* UE8M0 bytes version (when a_scale != FP32)                 */
    uint32_t *a_sf_packed;
    uint8_t *w;           /* [G][n][k/2]                                              */
    float *w_sf;          /* [G][n][k/32]                                             */
    int32_t *layout;      /* ids [m] / psum [G] / masked_m [G]                         */
    int64_t a_rows_total; /* rows in A (G*m for masked)                                */
    float *c;             /* [rows_total][n] C values (also rounded to BF16 when D is) */
    double *ref;          /* [rows_total][n], NAN where the row must stay untouched     */
    double *ref_l1;       /* [rows_total][n]: sum_k |a_k w_k| (the dot product's magnitude) */
    int64_t sf_k;
} gemm_host;

static uint64_t fx_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}
static double fx_uniform(uint64_t *s) { return (double)(fx_next(s) >> 11) * (1.0 / 9007199254740992.0); }
static double fx_normal(uint64_t *s) {
    double u1 = fx_uniform(s), u2 = fx_uniform(s);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static float fx_pow2(uint64_t *s, int lo, int hi) { return ldexpf(1.0f, lo + (int)(fx_next(s) % (uint64_t)(hi - lo + 1))); }

/* Fills the row groups of the grouped layouts with random sizes (some empty). */
static void fx_make_layout(gemm_host *h, uint64_t *s) {
    gemm_case *c = &h->cs;
    if (c->grouping == HFP4_GROUPING_MASKED) {
        h->layout = (int32_t *)malloc(sizeof(int32_t) * c->groups);
        for (int g = 0; g < c->groups; g++) {
            int64_t r = (int64_t)(fx_next(s) % (uint64_t)(c->m + 1));
            if (g % 5 == 1) r = 0;
            if (c->groups > 64 && g % 16 != 0) r = 0; /* big expert counts: few experts hit, as in decode */
            if (g == 0) r = c->m;
            h->layout[g] = c->rows ? c->rows[g] : (int32_t)r;
        }
        h->a_rows_total = c->groups * c->m;
        return;
    }
    if (c->grouping == HFP4_GROUPING_NONE) {
        h->layout = NULL;
        h->a_rows_total = c->m;
        return;
    }
    /* contiguous forms: c->m is the rough total; build segments */
    int64_t a = c->alignment ? c->alignment : HFP4_DEFAULT_M_ALIGNMENT;
    int64_t *sizes = (int64_t *)malloc(sizeof(int64_t) * c->groups);
    int64_t per = c->m / c->groups + 1, total = 0;
    for (int g = 0; g < c->groups; g++) {
        sizes[g] = (int64_t)(fx_next(s) % (uint64_t)(2 * per + 1));
        if (g % 4 == 2) sizes[g] = 0;
        if (c->rows) sizes[g] = c->rows[g];
        total += (sizes[g] + a - 1) / a * a;
    }
    c->m = (total > 0 ? total : a) + c->extra_rows;
    if (c->grouping == HFP4_GROUPING_CONTIGUOUS) {
        h->layout = (int32_t *)malloc(sizeof(int32_t) * c->m);
        for (int64_t r = 0; r < c->m; r++) h->layout[r] = -1;
        int64_t row = 0;
        for (int g = 0; g < c->groups; g++) {
            for (int64_t i = 0; i < sizes[g]; i++) h->layout[row + i] = c->holes && i % 7 == 3 && i % 8 != 0 ? -1 : g;
            row += (sizes[g] + a - 1) / a * a;
        }
    } else {
        h->layout = (int32_t *)malloc(sizeof(int32_t) * c->groups);
        int64_t row = 0;
        for (int g = 0; g < c->groups; g++) {
            int64_t start = (row + a - 1) / a * a;
            row = start + sizes[g];
            h->layout[g] = (int32_t)row;
        }
    }
    h->a_rows_total = c->m;
    free(sizes);
}

/* The expert of row r of A, or -1 (padding / outside groups), and whether D's row must be zero. */
static int fx_row_expert(const gemm_host *h, int64_t r, int *zero_row, int *untouched) {
    const gemm_case *c = &h->cs;
    *zero_row = 0;
    *untouched = 0;
    if (c->grouping == HFP4_GROUPING_NONE) return 0;
    if (c->grouping == HFP4_GROUPING_CONTIGUOUS) {
        int id = h->layout[r];
        if (id < 0) *zero_row = 1;
        return id;
    }
    if (c->grouping == HFP4_GROUPING_MASKED) {
        int64_t g = r / c->m, i = r % c->m;
        if (i >= h->layout[g]) *untouched = 1;
        return (int)g;
    }
    int64_t a = c->alignment ? c->alignment : HFP4_DEFAULT_M_ALIGNMENT;
    int64_t start = 0;
    for (int g = 0; g < c->groups; g++) {
        int64_t end = h->layout[g];
        int64_t aligned_end = (end + a - 1) / a * a;
        if (r >= start && r < end) return g;
        if (r >= end && r < aligned_end && r >= start) {
            *zero_row = 1;
            return -1;
        }
        start = aligned_end;
    }
    *untouched = 1;
    return -1;
}

typedef struct fx_ref_job {
    gemm_host *h;
    float **wdec; /* per group: [n][k] dequantized weights (exact in FP32), NULL if unused */
} fx_ref_job;

static void fx_ref_row(void *arg, int64_t r) {
    fx_ref_job *job = (fx_ref_job *)arg;
    gemm_host *h = job->h;
    const gemm_case *c = &h->cs;
    int zero_row, untouched;
    int e = fx_row_expert(h, r, &zero_row, &untouched);
    double *out = h->ref + r * c->n;
    double *l1 = h->ref_l1 + r * c->n;
    for (int64_t j = 0; j < c->n; j++) l1[j] = 0.0;
    if (untouched) {
        for (int64_t j = 0; j < c->n; j++) out[j] = NAN;
        return;
    }
    if (zero_row) {
        for (int64_t j = 0; j < c->n; j++) out[j] = 0.0;
        return;
    }
    double *arow = (double *)malloc(sizeof(double) * c->k);
    for (int64_t kk = 0; kk < c->k; kk++)
        arow[kk] = (double)hfp4_fp8_decode(h->a[r * c->k + kk]) * h->a_sf[r * h->sf_k + kk / c->a_gran];
    const float *w = job->wdec[e];
    for (int64_t j = 0; j < c->n; j++) {
        double acc = 0.0, mag = 0.0;
        const float *wr = w + j * c->k;
        for (int64_t kk = 0; kk < c->k; kk++) {
            acc += arow[kk] * wr[kk];
            mag += fabs(arow[kk] * wr[kk]);
        }
        l1[j] = mag;
        if (c->with_c) acc += h->c[r * c->n + j];
        out[j] = acc;
    }
    free(arow);
}

/* Builds the case's host data and the exact reference. */
static void fx_build(gemm_host *h, const gemm_case *cs) {
    memset(h, 0, sizeof *h);
    h->cs = *cs;
    gemm_case *c = &h->cs;
    uint64_t s = c->seed * 2654435761ull + 12345;
    fx_make_layout(h, &s);
    int64_t rows = h->a_rows_total;
    h->sf_k = (c->k + c->a_gran - 1) / c->a_gran;
    h->a = (uint8_t *)malloc(rows * c->k);
    h->a_sf = (float *)malloc(sizeof(float) * rows * h->sf_k);
    h->a_sf_bytes = (uint8_t *)malloc(rows * h->sf_k);
    int64_t words = (h->sf_k + 3) / 4;
    h->a_sf_packed = (uint32_t *)calloc(rows * words, 4);
    for (int64_t i = 0; i < rows * c->k; i++) {
        uint8_t b = hfp4_fp8_encode((float)(fx_normal(&s) * 64.0));
        h->a[i] = b;
    }
    for (int64_t i = 0; i < rows * h->sf_k; i++) {
        float v = c->a_scale == HFP4_DTYPE_FP32 ? (float)(fx_uniform(&s) * 0.02 + 0.001) : fx_pow2(&s, -10, -4);
        h->a_sf[i] = v;
        uint8_t e = 127;
        hfp4_ue8m0_from_float(v, &e);
        h->a_sf_bytes[i] = e;
        int64_t r = i / h->sf_k, j = i % h->sf_k;
        h->a_sf_packed[r * words + j / 4] |= (uint32_t)e << (8 * (j % 4));
    }
    /* Rows no group owns (contiguous padding, rows past masked_m, rows outside every psum group)
     * hold NaN: FP8 bytes 0x7F and NaN scales (UE8M0 byte 255). hfp4.h: their contents never reach
     * a real row, nor D's padding rows under HFP4_D_PADDING_ZERO, so callers need not fill them
     * (the experts backend leaves them unwritten). */
    for (int64_t r = 0; r < rows; r++) {
        int zero_row, untouched;
        if (fx_row_expert(h, r, &zero_row, &untouched) >= 0 && !zero_row && !untouched) continue;
        memset(h->a + r * c->k, 0x7F, (size_t)c->k);
        for (int64_t j = 0; j < h->sf_k; j++) {
            h->a_sf[r * h->sf_k + j] = NAN;
            h->a_sf_bytes[r * h->sf_k + j] = 0xFF;
        }
        for (int64_t w = 0; w < words; w++) h->a_sf_packed[r * words + w] = 0xFFFFFFFFu;
    }
    int64_t wbytes = (int64_t)c->groups * c->n * c->k / 2;
    h->w = (uint8_t *)malloc(wbytes);
    for (int64_t i = 0; i < wbytes; i++) h->w[i] = (uint8_t)(fx_next(&s) & 0xFF);
    int64_t wsf = (int64_t)c->groups * c->n * (c->k / 32);
    h->w_sf = (float *)malloc(sizeof(float) * wsf);
    const int64_t kg32 = c->k / 32;
    for (int64_t i = 0; i < wsf; i++) {
        const int64_t row = i / kg32 % c->n, j = i % kg32; /* weight row and 32-group */
        if (c->w_pow2 == 3) /* a chunk's groups within 3 binades; the chunk's level moves by 5 */
            h->w_sf[i] = ldexpf(1.0f, -3 - (int)((j / 4) * 5 % 20) - (int)(fx_next(&s) % 4));
        else if (c->w_pow2 == 4)
            h->w_sf[i] = (row / 128) % 3 == 0 && (j / 4) % 2 == 1 ? fx_pow2(&s, -33, -3) : fx_pow2(&s, -9, -3);
        else if (c->w_pow2 == 5)
            h->w_sf[i] = (row / 128) % 2 == 0 && j / 4 == 33 ? fx_pow2(&s, -33, -3) : fx_pow2(&s, -9, -3);
        else
            h->w_sf[i] = c->w_pow2 == 2 ? fx_pow2(&s, -33, -3) : c->w_pow2 ? fx_pow2(&s, -9, -3)
                                                                           : (float)(fx_uniform(&s) * 0.01 + 0.0005);
    }
    if (c->w_pow2 == 2) /* every 5th 32-group all zero (with a far-off scale): must not block folding */
        for (int64_t i = 0; i < wsf; i += 5) {
            memset(h->w + i * 16, (i & 1) ? 0x88 : 0x00, 16); /* +0 or -0 codes */
            h->w_sf[i] = ldexpf(1.0f, -100);
        }
    h->c = NULL;
    if (c->with_c) {
        h->c = (float *)malloc(sizeof(float) * rows * c->n);
        for (int64_t i = 0; i < rows * c->n; i++) {
            float v = (float)(fx_normal(&s) * 4.0);
            if (c->d_dtype == HFP4_DTYPE_BF16) v = hfp4_bf16_decode(hfp4_bf16_encode(v));
            h->c[i] = v;
        }
    }
    /* exact reference */
    fx_ref_job job;
    job.h = h;
    /* NOTE: fp4 value x FP32 scale is exact in FP32 (3 significant bits), so float storage loses
     * nothing; only experts that own rows are decoded (256 V4 experts would not fit otherwise). */
    job.wdec = (float **)calloc(c->groups, sizeof(float *));
    for (int64_t r = 0; r < rows; r++) {
        int zero_row, untouched;
        int e = fx_row_expert(h, r, &zero_row, &untouched);
        if (e < 0 || zero_row || untouched || job.wdec[e]) continue;
        float *wd = (float *)malloc(sizeof(float) * c->n * c->k);
        for (int64_t j = 0; j < c->n; j++)
            for (int64_t kk = 0; kk < c->k; kk++) {
                int64_t row = (int64_t)e * c->n + j;
                uint8_t byte = h->w[row * (c->k / 2) + kk / 2];
                uint8_t code = (kk & 1) ? byte >> 4 : byte & 15;
                wd[j * c->k + kk] = hfp4_fp4_decode(code) * h->w_sf[row * (c->k / 32) + kk / 32];
            }
        job.wdec[e] = wd;
    }
    h->ref = (double *)malloc(sizeof(double) * rows * c->n);
    h->ref_l1 = (double *)malloc(sizeof(double) * rows * c->n);
    hfp4__parallel_for(hfp4__thread_count(0, rows), rows, fx_ref_row, &job);
    for (int g = 0; g < c->groups; g++) free(job.wdec[g]);
    free(job.wdec);
}

static void fx_free(gemm_host *h) {
    free(h->a);
    free(h->a_sf);
    free(h->a_sf_bytes);
    free(h->a_sf_packed);
    free(h->w);
    free(h->w_sf);
    free(h->layout);
    free(h->c);
    free(h->ref);
    free(h->ref_l1);
}

typedef struct gemm_result {
    hfp4_status status;
    double rel_frob;      /* ||D - R|| / ||R|| over written rows         */
    double max_excess;    /* max over elements of |d-r| / bound (<= 1 ok) */
    int64_t bad_elements; /* beyond the element bound, NaN, or written where it must not be */
    int64_t first_bad_row, first_bad_col;
    double first_bad_got, first_bad_want;
    int repack_match;     /* GPU repack == CPU repack, byte for byte      */
    float ms;             /* one timed launch (not a benchmark)           */
    int64_t chain_bad;    /* chain 1: elements of the second GEMM's D off 2 x the first's D by
                             more than its rounding, or written where they must not be */
} gemm_result;

/* The late writer of late_a cases: lets the next kernel in the stream start at once (programmatic
 * dependent launch), waits ~delay_ns, then copies n bytes from src to dst (and n2 from src2 to dst2). */
static __global__ void fx_late_writer(uint8_t *dst, const uint8_t *src, size_t n, uint8_t *dst2, const uint8_t *src2,
                                      size_t n2, unsigned long long delay_ns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < delay_ns);
    const size_t i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x, step = (size_t)gridDim.x * blockDim.x;
    for (size_t i = i0; i < n; i += step) dst[i] = src[i];
    for (size_t i = i0; i < n2; i += step) dst2[i] = src2[i];
}

/* Element `index` of the downloaded D (BF16 or FP32). */
static double fx_output_at(const gemm_case *c, const void *out, int64_t index) {
    return c->d_dtype == HFP4_DTYPE_FP32 ? (double)((const float *)out)[index]
                                         : (double)hfp4_bf16_decode(((const uint16_t *)out)[index]);
}

/* Counts a bad element; the first one is kept for the report. */
static void fx_note_bad(gemm_result *res, int64_t row, int64_t col, double got, double want) {
    if (res->bad_elements == 0) {
        res->first_bad_row = row;
        res->first_bad_col = col;
        res->first_bad_got = got;
        res->first_bad_want = want;
    }
    res->bad_elements++;
}

/* Runs the case on the GPU (device buffers poisoned first) and checks every element. */
static gemm_result fx_run(gemm_host *h) {
    gemm_result res;
    memset(&res, 0, sizeof res);
    res.first_bad_row = -1;
    gemm_case *c = &h->cs;
    int64_t rows = h->a_rows_total;
    int64_t words = (h->sf_k + 3) / 4;
    /* source weights as a plain FP4 matrix (host) */
    hfp4_matrix w;
    memset(&w, 0, sizeof w);
    w.data = h->w;
    w.dtype = HFP4_DTYPE_FP4_E2M1;
    w.rows = c->n;
    w.cols = c->k;
    w.ld = c->k / 2;
    w.stride_group = c->n * c->k / 2;
    w.scales.data = h->w_sf;
    w.scales.dtype = HFP4_DTYPE_FP32;
    w.scales.gran_mn = 1;
    w.scales.gran_k = 32;
    w.scales.stride_mn = c->k / 32;
    w.scales.stride_k = 1;
    w.scales.stride_group = c->n * (c->k / 32);
    hfp4_dtype sdt = c->w_pow2 ? HFP4_DTYPE_UE8M0 : HFP4_DTYPE_FP32;
    size_t wbytes = 0;
    hfp4_sm90_weights_size(c->groups, c->n, c->k, sdt, &wbytes);
    uint8_t *wpack = (uint8_t *)malloc(wbytes);
    hfp4_matrix b;
    res.status = hfp4_ref_repack_sm90(&w, c->groups, sdt, wpack, wbytes, &b);
    if (res.status != HFP4_OK) {
        free(wpack);
        return res;
    }
    /* device buffers */
    uint8_t *d_a, *d_w_src, *d_wpack;
    void *d_sf, *d_w_sf, *d_d, *d_c = NULL;
    int32_t *d_layout = NULL;
    size_t sf_bytes = c->a_scale == HFP4_DTYPE_FP32 ? 4 * rows * h->sf_k
                      : c->a_scale == HFP4_DTYPE_UE8M0 ? (size_t)(rows * h->sf_k) : 4 * rows * words;
    const int64_t ldd = c->n + c->d_pad, esz = c->d_dtype == HFP4_DTYPE_FP32 ? 4 : 2;
    size_t dbytes = esz * rows * ldd;
    cudaMalloc(&d_a, rows * c->k);
    cudaMalloc(&d_sf, sf_bytes);
    cudaMalloc(&d_w_src, c->groups * c->n * c->k / 2);
    cudaMalloc(&d_w_sf, sizeof(float) * c->groups * c->n * (c->k / 32));
    cudaMalloc(&d_wpack, wbytes);
    cudaMalloc(&d_d, dbytes);
    cudaMemcpy(d_a, h->a, rows * c->k, cudaMemcpyHostToDevice);
    /* MN-major FP32 activation scales: per group (masked) or for all rows, [sf_k][ld_mn] */
    const int mn_major = c->a_mn_major && c->a_scale == HFP4_DTYPE_FP32;
    const int64_t mn_rows = c->grouping == HFP4_GROUPING_MASKED ? c->m : rows;
    const int64_t mn_groups = c->grouping == HFP4_GROUPING_MASKED ? c->groups : 1;
    const int64_t mn_ld = c->a_mn_major == 3 ? mn_rows : (mn_rows + 3) & ~(int64_t)3, mn_off = c->a_mn_major == 2 ? 1 : 0;
    if (mn_major) {
        cudaFree(d_sf);
        sf_bytes = 4 * (size_t)(mn_off + mn_groups * h->sf_k * mn_ld);
        cudaMalloc(&d_sf, sf_bytes);
        float *t = (float *)calloc(sf_bytes / 4, 4);
        for (int64_t g = 0; g < mn_groups; g++)
            for (int64_t r = 0; r < mn_rows; r++)
                for (int64_t j = 0; j < h->sf_k; j++)
                    t[mn_off + (g * h->sf_k + j) * mn_ld + r] = h->a_sf[(g * mn_rows + r) * h->sf_k + j];
        cudaMemcpy(d_sf, t, sf_bytes, cudaMemcpyHostToDevice);
        free(t);
    } else {
        cudaMemcpy(d_sf, c->a_scale == HFP4_DTYPE_FP32 ? (const void *)h->a_sf
                         : c->a_scale == HFP4_DTYPE_UE8M0 ? (const void *)h->a_sf_bytes : (const void *)h->a_sf_packed,
                   sf_bytes, cudaMemcpyHostToDevice);
    }
    cudaMemcpy(d_w_src, h->w, c->groups * c->n * c->k / 2, cudaMemcpyHostToDevice);
    cudaMemcpy(d_w_sf, h->w_sf, sizeof(float) * c->groups * c->n * (c->k / 32), cudaMemcpyHostToDevice);
    cudaMemset(d_d, 0xFF, dbytes); /* poison: NaN in both BF16 and FP32 */
    if (h->layout) {
        size_t lb = sizeof(int32_t) * (c->grouping == HFP4_GROUPING_CONTIGUOUS ? c->m : c->groups);
        cudaMalloc(&d_layout, lb);
        cudaMemcpy(d_layout, h->layout, lb, cudaMemcpyHostToDevice);
    }
    if (c->with_c) {
        cudaMalloc(&d_c, dbytes);
        uint8_t *tmp = (uint8_t *)calloc(1, dbytes);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < c->n; j++) {
                const float v = h->c[r * c->n + j];
                if (c->d_dtype == HFP4_DTYPE_FP32) memcpy(tmp + (r * ldd + j) * 4, &v, 4);
                else ((uint16_t *)tmp)[r * ldd + j] = hfp4_bf16_encode(v);
            }
        cudaMemcpy(d_c, tmp, dbytes, cudaMemcpyHostToDevice);
        free(tmp);
    }
    /* GPU repack from the FP32 scales (FP32 storage) or UE8M0 bytes; must equal the CPU bytes */
    {
        hfp4_matrix wd = w, bd;
        wd.data = d_w_src;
        wd.scales.data = d_w_sf;
        uint8_t *ue = NULL;
        if (c->w_pow2) { /* GPU repack takes UE8M0 input for UE8M0 storage */
            int64_t nsf = (int64_t)c->groups * c->n * (c->k / 32);
            uint8_t *tmp = (uint8_t *)malloc(nsf);
            for (int64_t i = 0; i < nsf; i++) hfp4_ue8m0_from_float(h->w_sf[i], &tmp[i]);
            cudaMalloc(&ue, nsf);
            cudaMemcpy(ue, tmp, nsf, cudaMemcpyHostToDevice);
            free(tmp);
            wd.scales.data = ue;
            wd.scales.dtype = HFP4_DTYPE_UE8M0;
        }
        cudaMemset(d_wpack, 0xAB, wbytes);
        hfp4_status st = hfp4_repack_sm90(&wd, c->groups, sdt, d_wpack, wbytes, &bd, NULL);
        uint8_t *back = (uint8_t *)malloc(wbytes);
        cudaMemcpy(back, d_wpack, wbytes, cudaMemcpyDeviceToHost);
        res.repack_match = st == HFP4_OK && memcmp(back, wpack, wbytes) == 0;
        free(back);
        if (ue) cudaFree(ue);
        cudaMemcpy(d_wpack, wpack, wbytes, cudaMemcpyHostToDevice); /* run on the CPU-repacked bytes */
    }
    hfp4_gemm_problem p;
    memset(&p, 0, sizeof p);
    p.grouping = c->grouping;
    p.m = c->m;
    p.n = c->n;
    p.k = c->k;
    p.num_groups = c->groups;
    p.layout = d_layout;
    p.m_alignment = c->alignment;
    p.expected_m = c->expected_m;
    p.d_padding = c->d_padding_any ? HFP4_D_PADDING_ANY : HFP4_D_PADDING_ZERO;
    p.a.data = d_a;
    p.a.dtype = HFP4_DTYPE_FP8_E4M3;
    p.a.rows = c->m;
    p.a.cols = c->k;
    p.a.ld = c->k;
    p.a.stride_group = c->grouping == HFP4_GROUPING_MASKED ? c->m * c->k : 0;
    p.a.scales.data = d_sf;
    p.a.scales.dtype = c->a_scale;
    p.a.scales.gran_mn = 1;
    p.a.scales.gran_k = c->a_gran;
    p.a.scales.stride_mn = c->a_scale == HFP4_DTYPE_UE8M0_PACKED ? words : h->sf_k;
    p.a.scales.stride_k = 1;
    p.a.scales.stride_group = c->grouping == HFP4_GROUPING_MASKED ? c->m * p.a.scales.stride_mn : 0;
    if (mn_major) {
        p.a.scales.data = (float *)d_sf + mn_off;
        p.a.scales.stride_mn = 1;
        p.a.scales.stride_k = mn_ld;
        p.a.scales.stride_group = c->grouping == HFP4_GROUPING_MASKED ? h->sf_k * mn_ld : 0;
    }
    p.b = b;
    p.b.data = d_wpack;
    p.b.scales.data = d_wpack + ((const uint8_t *)b.scales.data - wpack);
    p.d.data = d_d;
    p.d.dtype = c->d_dtype;
    p.d.ld = ldd;
    p.d.stride_group = c->grouping == HFP4_GROUPING_MASKED ? c->m * ldd : 0;
    p.d.c = d_c;
    void *d_d2 = NULL; /* chain 1, 3: the second GEMM's D, poisoned before the first launch */
    cudaStream_t s2 = NULL;
    if (c->chain == 3) cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking);
    if (c->chain == 1 || c->chain == 3) {
        cudaMalloc(&d_d2, dbytes);
        cudaMemset(d_d2, 0xFF, dbytes);
    }
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    if (s2) cudaDeviceSynchronize(); /* (the uploads and poisoning above are not ordered with s2) */
    uint8_t *late_src = NULL; /* late_a: A and its scales as uploaded, copied in by fx_late_writer */
    if (c->late_a) {
        cudaMalloc(&late_src, rows * c->k + sf_bytes);
        cudaMemcpy(late_src, d_a, rows * c->k, cudaMemcpyDeviceToDevice);
        cudaMemcpy(late_src + rows * c->k, d_sf, sf_bytes, cudaMemcpyDeviceToDevice);
        cudaMemset(d_a, 0x3C, rows * c->k); /* other values (e4m3 0x3C = 1.5) until the writer's copy */
        cudaMemset(d_sf, 0x3F, sf_bytes);   /* (0.75 in FP32 words, 2^-64 as UE8M0 bytes) */
        cudaDeviceSynchronize();
    }
    cudaEventRecord(e0, 0);
    if (c->late_a)
        fx_late_writer<<<8, 256>>>(d_a, late_src, (size_t)(rows * c->k), (uint8_t *)d_sf, late_src + rows * c->k,
                                   sf_bytes, 50000ull);
    res.status = hfp4_gemm_flags(&p, c->flags, NULL);
    hfp4_status chain_status = HFP4_OK;
    if (c->chain == 1 || c->chain == 2) { /* at once, on the same stream: the launches may overlap */
        hfp4_gemm_problem p2 = p;
        p2.d.data = c->chain == 1 ? d_d2 : d_c;
        p2.d.c = c->chain == 1 ? d_d : NULL;
        chain_status = hfp4_gemm_flags(&p2, c->flags, NULL);
    }
    if (c->chain == 3) { /* on a second stream, that runs at once with the first */
        hfp4_gemm_problem p2 = p;
        p2.d.data = d_d2;
        chain_status = hfp4_gemm_flags(&p2, c->flags, s2);
    }
    cudaEventRecord(e1, 0);
    cudaError_t err = cudaDeviceSynchronize();
    if (res.status == HFP4_OK && err != cudaSuccess) {
        res.status = hfp4__fail(HFP4_ERR_CUDA, "kernel failed: %s", cudaGetErrorString(err));
    }
    cudaEventElapsedTime(&res.ms, e0, e1);
    if (res.status == HFP4_OK && chain_status != HFP4_OK) res.status = chain_status;
    if (res.status == HFP4_OK) {
        void *out = malloc(dbytes);
        cudaMemcpy(out, d_d, dbytes, cudaMemcpyDeviceToHost);
        double num = 0, den = 0, sq = 0;
        int64_t cnt = 0;
        for (int64_t i = 0; i < rows * c->n; i++)
            if (!isnan(h->ref[i])) {
                sq += h->ref[i] * h->ref[i];
                cnt++;
            }
        double rms = cnt ? sqrt(sq / cnt) : 1.0;
        const int may_fold = c->w_pow2 != 0 && c->a_gran == 128; /* chunks chaining 4 k32 steps */
        for (int64_t r = 0; r < rows; r++) /* the row padding must stay poisoned */
            for (int64_t j = c->n; j < ldd; j++) {
                const double pad = fx_output_at(c, out, r * ldd + j);
                if (!isnan(pad)) fx_note_bad(&res, r, j, pad, NAN);
            }
        for (int64_t i = 0; i < rows * c->n; i++) {
            const int64_t di = i / c->n * ldd + i % c->n;
            double got = fx_output_at(c, out, di);
            double want = h->ref[i];
            int bad;
            int zero_row = 0, untouched = 0;
            if (c->d_padding_any) fx_row_expert(h, i / c->n, &zero_row, &untouched);
            if (isnan(want)) {
                bad = !isnan(got); /* must stay poisoned (untouched) */
            } else if (zero_row) {
                bad = !(isnan(got) || got == 0.0); /* d_padding ANY: left poisoned, or zero */
            } else {
                double diff = fabs(got - want);
                /* The documented element bound (docs/TESTING.md): the output rounding (BF16: 2^-9
                 * relative, bounded by 4e-3) plus the FP8 tensor cores' accumulation inside each
                 * 128-K chunk, which keeps ~13 bits relative to the magnitudes summed, over the 4
                 * chained k32 steps of a folded chunk: 2^-10 of the dot product's L1 magnitude
                 * sum_k |a_k w_k| (2^-11.15 measured with FP32 output), plus a 1e-6 rms floor.
                 * Where no chunk can fold (FP32 weight scales, or 1x32 activation scales: every
                 * k32 step is promoted on its own) 2^-12 (measured: below 0.13 x 2^-12). */
                double bound = (c->d_dtype == HFP4_DTYPE_BF16 ? 4.0e-3 : 1.0e-5) * fabs(want) +
                               ldexp(h->ref_l1[i], may_fold ? -10 : -12) + 1.0e-6 * rms;
                bad = !(diff <= bound);
                if (diff / bound > res.max_excess) res.max_excess = diff / bound;
                num += diff * diff;
                den += want * want;
            }
            if (bad) {
                fx_note_bad(&res, i / c->n, i % c->n, got, want);
            }
        }
        res.rel_frob = den > 0 ? sqrt(num / den) : sqrt(num);
        if (c->chain == 1) {
            /* D2 = round(X + D1) where D1 = round(X), X the same FP32 sums in both launches: D2 is
             * 2 D1 up to the two roundings (exactly 2 D1 in FP32). A second launch that read its
             * C before the first had written it finds the poison (NaN) or stale values. */
            void *out2 = malloc(dbytes);
            cudaMemcpy(out2, d_d2, dbytes, cudaMemcpyDeviceToHost);
            for (int64_t i = 0; i < rows * c->n; i++) {
                const int64_t di = i / c->n * ldd + i % c->n;
                const double d1 = fx_output_at(c, out, di), d2 = fx_output_at(c, out2, di);
                const int bad = isnan(h->ref[i]) ? !isnan(d2)
                                                 : !(fabs(d2 - 2.0 * d1) <= ldexp(fabs(2.0 * d1), -7) + 1.0e-30);
                res.chain_bad += bad;
            }
            free(out2);
        }
        if (c->chain == 3) { /* the same sums in the same order: the same bits */
            void *out2 = malloc(dbytes);
            cudaMemcpy(out2, d_d2, dbytes, cudaMemcpyDeviceToHost);
            const int64_t esz = c->d_dtype == HFP4_DTYPE_FP32 ? 4 : 2;
            for (int64_t i = 0; i < rows * ldd; i++)
                res.chain_bad += memcmp((const char *)out + i * esz, (const char *)out2 + i * esz, (size_t)esz) != 0;
            free(out2);
        }
        free(out);
    }
    if (s2) cudaStreamDestroy(s2);
    if (d_d2) cudaFree(d_d2);
    if (late_src) cudaFree(late_src);
    cudaFree(d_a);
    cudaFree(d_sf);
    cudaFree(d_w_src);
    cudaFree(d_w_sf);
    cudaFree(d_wpack);
    cudaFree(d_d);
    if (d_c) cudaFree(d_c);
    if (d_layout) cudaFree(d_layout);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    free(wpack);
    return res;
}
