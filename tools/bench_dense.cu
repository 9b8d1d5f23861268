/*
 * bench_dense.cu - dense cases of `hfp4 bench`: FP8 x FP4 8192^3 against cuBLASLt FP8 row-wise and
 * BF16 (and FP8 weights where that path is on), the single-token GEMV (M = 1) against its two floors (copy rate and launch), and the
 * scale-factor layout transforms against the copy rate. All stream launches (bench_time_launches).
 */
#include <stdlib.h>
#include <string.h>

#include "baselines.h"
#include "bench_common.h"

/* A dense row's identity: op, layout "dense", name, shape, one group and one expert */
static void dense_row(bench_row *r, const char *op, const char *name, int64_t m, int64_t n, int64_t k) {
    bench_row_clear(r);
    r->op = op;
    r->layout = "dense";
    r->name = name;
    r->tokens = -1;
    r->m = m;
    r->n = n;
    r->k = k;
    r->groups = 1;
    r->experts_hit = 1;
}

/* cuBLASLt FP8 row-wise on the shape: its name for the row, or "unavailable" (*us = 0, the reason
 * on stderr in text mode) */
static const char *fp8_baseline(const bench_ctx *c, int64_t m, int64_t n, int64_t k, double *us) {
    char err[256] = "";
    if (baseline_cublaslt_fp8_rowwise(m, n, k, c->iters, us, err, sizeof err) == 0) return "cublaslt_fp8_rowwise";
    *us = 0;
    if (!c->json) fprintf(stderr, "  baseline: %s\n", err);
    return "unavailable";
}

/* One dense FP8 x FP4 GEMM D[m,n] = A[m,k] B[n,k]^T: allocates, times, prints the row (plus the
 * BF16 row when `bf16` is set). zero_a_scales = 1 reproduces the first recorded dense 8192^3 runs,
 * whose activation scales were all zero (random FP8 and FP4 codes, output 0); real runs use 1/256. */
static void dense_case(bench_ctx *c, const char *name, int64_t m, int64_t n, int64_t k, int zero_a_scales, int with_floors,
                       int bf16) {
    bench_weights w;
    void *a = NULL, *sf = NULL, *d = NULL;
    const int gran = c->gran;
    const int64_t sfk = (k + gran - 1) / gran;
    char label[96];
    snprintf(label, sizeof label, "%s %lldx%lldx%lld", name, (long long)m, (long long)n, (long long)k);
    if (bench_make_weights(1, n, k, &w) != 0) {
        fprintf(stderr, "bench: %s: could not allocate/repack the weights\n", label);
        c->failed++;
        return;
    }
    hfp4_gemm_problem p;
    double us = 0, base_us = 0;
    char err[256] = "";
    const char *base_name = NULL; /* (fp8_baseline) */
    /* bytes as the first recorded dense rows counted them (activation scales left out: m * sfk * 4) */
    const double flops = 2.0 * m * n * k, bytes = n * (k / 2.0 + k / 32.0) + (double)m * k + m * n * 2.0;
    bench_row r;
    if (!BENCH_CUDA(cudaMalloc(&a, (size_t)m * k)) || !BENCH_CUDA(cudaMalloc(&sf, (size_t)m * sfk * 4)) ||
        !BENCH_CUDA(cudaMalloc(&d, (size_t)m * n * 2)) || bench_fill_random(a, (size_t)m * k, 1) != 0)
        goto fail;
    if (zero_a_scales ? !BENCH_CUDA(cudaMemset(sf, 0, (size_t)m * sfk * 4)) : bench_fill_a_scales(sf, (size_t)m * sfk) != 0)
        goto fail;
    bench_fill_problem(&p, HFP4_GROUPING_NONE, m, n, k, 1, gran, a, sf, d, NULL, &w.b, m);
    if (bench_time_gemm(c, &p, label, &us) != 0) goto fail;
    base_name = fp8_baseline(c, m, n, k, &base_us);
    dense_row(&r, "fp8_fp4", name, m, n, k);
    bench_row_rates(&r, us, flops, bytes, base_name, base_us, (double)n * k + (double)m * k + m * n * 2.0);
    r.gran = gran;
    r.floor_us = bench_floor_us(c, bytes);
    if (with_floors) r.launch_us = bench_launch_floor_stream(c);
    bench_print_row(c, &r);
    if (bf16) {
        double bf_us = 0;
        if (baseline_cublaslt_bf16(m, n, k, c->iters, &bf_us, err, sizeof err) == 0) {
            bench_row rb;
            dense_row(&rb, "bf16", "cublas", m, n, k);
            bench_row_rates(&rb, bf_us, flops, 2.0 * n * k + 2.0 * m * k + 2.0 * m * n, "cublaslt_bf16", bf_us, 0);
            bench_print_row(c, &rb);
        }
    }
    goto done;
fail:
    c->failed++;
done:
    (void)BENCH_CUDA(cudaFree(a));
    (void)BENCH_CUDA(cudaFree(sf));
    (void)BENCH_CUDA(cudaFree(d));
    bench_free_weights(&w);
}

/* The dense FP8 x FP8 problem on m x n x k (FP32 1 x 128 activation scales laid out as --sf-layout
 * says, FP32 128 x 128 weight scales, BF16 D), its pointers a 256-aligned stand-in until the
 * buffers exist (hfp4_gemm_supported checks only their alignment) */
static void fp8_weights_problem(hfp4_gemm_problem *p, int64_t m, int64_t n, int64_t k) {
    const int64_t kg = (k + 127) / 128;
    memset(p, 0, sizeof *p);
    p->grouping = HFP4_GROUPING_NONE;
    p->m = m;
    p->n = n;
    p->k = k;
    p->num_groups = 1;
    p->a.dtype = p->b.dtype = HFP4_DTYPE_FP8_E4M3;
    p->a.rows = m;
    p->b.rows = n;
    p->a.cols = p->b.cols = k;
    p->a.ld = p->b.ld = k;
    p->a.scales.dtype = p->b.scales.dtype = HFP4_DTYPE_FP32;
    p->a.scales.gran_mn = 1;
    p->b.scales.gran_mn = 128;
    p->a.scales.gran_k = p->b.scales.gran_k = 128;
    p->b.scales.stride_mn = kg;
    p->b.scales.stride_k = 1;
    bench_set_a_scale_strides(&p->a.scales, m, kg); /* (--sf-layout mn: DeepGEMM's [kg][m]) */
    p->d.dtype = HFP4_DTYPE_BF16;
    p->d.ld = n;
    p->a.data = p->b.data = p->a.scales.data = p->b.scales.data = p->d.data = (void *)(uintptr_t)256;
}

/* FP8 weights (128 x 128 block scales, src/kernels/sm90/fp8_fp8_gemm.h; on by default,
 * HFP4_SM90_FP8_WEIGHTS=0 turns it off) on the same shape, against the same cuBLASLt FP8 baseline: the
 * library's FP8 x FP8 GEMM (DeepGEMM's fp8_gemm_nt, V4's dense layers). Left out, with a note, where
 * the path is off. */
static void dense_fp8_weights_case(bench_ctx *c, int64_t m, int64_t n, int64_t k) {
    void *a = NULL, *sfa = NULL, *b = NULL, *sfb = NULL, *d = NULL;
    const int64_t kg = (k + 127) / 128, nb = (n + 127) / 128;
    char label[96];
    snprintf(label, sizeof label, "fp8 weights %lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
    hfp4_gemm_problem p;
    fp8_weights_problem(&p, m, n, k);
    if (hfp4_gemm_supported(&p) != HFP4_OK) {
        if (!c->json) printf("%-10s (skipped: %s)\n", "fp8_fp8", hfp4_last_error());
        hfp4_clear_error();
        return;
    }
    double us = 0, base_us = 0;
    const char *base_name = NULL; /* (fp8_baseline) */
    const double flops = 2.0 * m * n * k, bytes = (double)n * k + (double)m * k + m * n * 2.0;
    bench_row r;
    if (!BENCH_CUDA(cudaMalloc(&a, (size_t)m * k)) || !BENCH_CUDA(cudaMalloc(&b, (size_t)n * k)) ||
        !BENCH_CUDA(cudaMalloc(&sfa, (size_t)m * kg * 4)) || !BENCH_CUDA(cudaMalloc(&sfb, (size_t)nb * kg * 4)) ||
        !BENCH_CUDA(cudaMalloc(&d, (size_t)m * n * 2)) || bench_fill_random(a, (size_t)m * k, 1) != 0 ||
        bench_fill_random(b, (size_t)n * k, 1) != 0 || bench_fill_a_scales(sfa, (size_t)m * kg) != 0 ||
        bench_fill_a_scales(sfb, (size_t)nb * kg) != 0)
        goto fail;
    p.a.data = a;
    p.b.data = b;
    p.a.scales.data = sfa;
    p.b.scales.data = sfb;
    p.d.data = d;
    if (bench_time_gemm(c, &p, label, &us) != 0) goto fail;
    base_name = fp8_baseline(c, m, n, k, &base_us);
    dense_row(&r, "fp8_fp8", "fp8-weights", m, n, k);
    bench_row_rates(&r, us, flops, bytes, base_name, base_us, bytes);
    r.gran = 128;
    r.floor_us = bench_floor_us(c, bytes);
    bench_print_row(c, &r);
    goto done;
fail:
    c->failed++;
done:
    (void)BENCH_CUDA(cudaFree(a));
    (void)BENCH_CUDA(cudaFree(b));
    (void)BENCH_CUDA(cudaFree(sfa));
    (void)BENCH_CUDA(cudaFree(sfb));
    (void)BENCH_CUDA(cudaFree(d));
}

/* FP4 weights through their FP8 form (hfp4_fp4_weights_to_fp8_gpu, docs/FP8_ROUTE.md): the
 * conversion and the FP8 x FP8 GEMM timed together as one launch of the route (median and energy
 * window, as a GEMM row), against the same cuBLASLt FP8 baseline; the conversion alone as its own
 * line (bytes: FP4 + scales in, FP8 out). */
typedef struct route_launch {
    hfp4_matrix w;
    uint8_t *q;
    hfp4_scales sf;
    int32_t *inexact;
    hfp4_gemm_problem p; /* b = q under sf */
    int gemm;            /* 0: the conversion only */
} route_launch;

static int launch_route(void *arg, cudaStream_t s) {
    const route_launch *l = (const route_launch *)arg;
    if (hfp4_fp4_weights_to_fp8_gpu(&l->w, l->q, l->p.k, &l->sf, l->inexact, s) != HFP4_OK ||
        (l->gemm && hfp4_gemm(&l->p, s) != HFP4_OK)) {
        fprintf(stderr, "bench: fp4 via fp8: %s\n", hfp4_last_error());
        return -1;
    }
    return 0;
}

/* The conversion's memory floor under the bench's measurement: the same bytes moved with nothing
 * else, each thread reading 16 bytes of w and writing 32 of q (16-byte accesses, whole sectors).
 * Why: the conversion reads 0.5 and writes 1 byte a weight, and the H200 writes slower than it
 * copies (bench/RESULTS.md v42: 2.9 TB/s writing alone against 3.8-4.3 copying), so bytes over the
 * copy rate understate its floor. */
__global__ void bench_expand_copy(const uint4 *w, uint4 *q, size_t w_vec) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < w_vec; i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = __ldcs(w + i);
        q[2 * i] = v;
        q[2 * i + 1] = make_uint4(v.x ^ 1u, v.y, v.z, v.w);
    }
}

typedef struct expand_launch {
    const uint4 *w;
    uint4 *q;
    size_t w_vec;
    unsigned blocks;
} expand_launch;

static int launch_expand(void *arg, cudaStream_t s) {
    const expand_launch *e = (const expand_launch *)arg;
    bench_expand_copy<<<e->blocks, 256, 0, s>>>(e->w, e->q, e->w_vec);
    return BENCH_CUDA(cudaGetLastError()) ? 0 : -1;
}

static void dense_fp4_via_fp8_case(bench_ctx *c, int64_t m, int64_t n, int64_t k) {
    if (k % 128 != 0) return;
    void *a = NULL, *sfa = NULL, *w = NULL, *ws = NULL, *q = NULL, *sfb = NULL, *d = NULL, *inexact = NULL;
    const int64_t kg = k / 128, nb = (n + 127) / 128;
    route_launch l;
    memset(&l, 0, sizeof l);
    hfp4_gemm_problem *p = &l.p;
    fp8_weights_problem(p, m, n, k);
    if (hfp4_gemm_supported(p) != HFP4_OK) {
        hfp4_clear_error(); /* (the fp8_fp8 row said why) */
        return;
    }
    double us = 0, conv_us = 0, expand_us = 0, base_us = 0;
    const char *base_name = NULL;
    const double flops = 2.0 * m * n * k, w_bytes = (double)n * k / 2 + (double)n * k / 32;
    const double bytes = w_bytes + (double)m * k + m * n * 2.0, conv_bytes = w_bytes + (double)n * k;
    bench_row r;
    if (!BENCH_CUDA(cudaMalloc(&a, (size_t)m * k)) || !BENCH_CUDA(cudaMalloc(&sfa, (size_t)m * kg * 4)) ||
        !BENCH_CUDA(cudaMalloc(&w, (size_t)n * k / 2)) || !BENCH_CUDA(cudaMalloc(&ws, (size_t)n * k / 32)) ||
        !BENCH_CUDA(cudaMalloc(&q, (size_t)n * k)) || !BENCH_CUDA(cudaMalloc(&sfb, (size_t)nb * kg * 4)) ||
        !BENCH_CUDA(cudaMalloc(&d, (size_t)m * n * 2)) || !BENCH_CUDA(cudaMalloc(&inexact, 4)) ||
        bench_fill_random(a, (size_t)m * k, 1) != 0 || bench_fill_a_scales(sfa, (size_t)m * kg) != 0 ||
        bench_fill_random(w, (size_t)n * k / 2, 0) != 0 || bench_fill_w_scales(ws, (size_t)n * k / 32) != 0)
        goto fail;
    l.w.data = w;
    l.w.dtype = HFP4_DTYPE_FP4_E2M1;
    l.w.rows = n;
    l.w.cols = k;
    l.w.ld = k / 2;
    l.w.scales.data = ws;
    l.w.scales.dtype = HFP4_DTYPE_UE8M0;
    l.w.scales.gran_mn = 1;
    l.w.scales.gran_k = 32;
    l.w.scales.stride_mn = k / 32;
    l.w.scales.stride_k = 1;
    l.q = (uint8_t *)q;
    l.sf = p->b.scales;
    l.sf.data = sfb;
    l.inexact = (int32_t *)inexact;
    p->a.data = a;
    p->a.scales.data = sfa;
    p->b.data = q;
    p->b.scales.data = sfb;
    p->d.data = d;
    l.gemm = 0;
    if (bench_time_launches(c, launch_route, &l, 0, &conv_us) != 0) goto fail;
    {
        expand_launch e = {(const uint4 *)w, (uint4 *)q, (size_t)(n * k / 2 / 16), (unsigned)(c->num_sms * 8)};
        if (bench_time_launches(c, launch_expand, &e, 0, &expand_us) != 0) goto fail;
    }
    l.gemm = 1;
    if (bench_time_case(c, launch_route, &l, "fp4 via fp8", &us) != 0) goto fail; /* (with its energy window) */
    {
        int32_t refused = -1;
        if (!BENCH_CUDA(cudaMemcpy(&refused, inexact, 4, cudaMemcpyDeviceToHost)) || refused != 0) {
            fprintf(stderr, "bench: fp4 via fp8: %d blocks refused\n", (int)refused);
            goto fail;
        }
    }
    base_name = fp8_baseline(c, m, n, k, &base_us);
    dense_row(&r, "fp8_fp4", "via-fp8", m, n, k);
    bench_row_rates(&r, us, flops, bytes, base_name, base_us, (double)n * k + (double)m * k + m * n * 2.0);
    r.gran = 128;
    r.floor_us = bench_floor_us(c, bytes + 2.0 * n * k); /* (+ the FP8 form written and read) */
    bench_print_row(c, &r);
    if (!c->json)
        printf("fp4_to_fp8 dense      %lldx%lld: %.1f us = %.3f TB/s (FP4 + scales in, FP8 out), %.0f %% of the route; "
               "its bytes copied alone (read w, write q): %.1f us\n",
               (long long)n, (long long)k, conv_us, conv_bytes / conv_us * 1e-6, 100.0 * conv_us / us, expand_us);
    goto done;
fail:
    c->failed++;
done:
    (void)BENCH_CUDA(cudaFree(a));
    (void)BENCH_CUDA(cudaFree(sfa));
    (void)BENCH_CUDA(cudaFree(w));
    (void)BENCH_CUDA(cudaFree(ws));
    (void)BENCH_CUDA(cudaFree(q));
    (void)BENCH_CUDA(cudaFree(sfb));
    (void)BENCH_CUDA(cudaFree(d));
    (void)BENCH_CUDA(cudaFree(inexact));
}

void bench_dense(bench_ctx *c, int64_t m, int64_t n, int64_t k) {
    if (!bench_budget_ok(c, "dense %lldx%lldx%lld", (long long)m, (long long)n, (long long)k)) return;
    dense_case(c, "dense", m, n, k, 0, 0, 1);
    dense_fp8_weights_case(c, m, n, k);
    dense_fp4_via_fp8_case(c, m, n, k);
}

/* M = 1: a handful of microseconds of weight streaming, where the fixed cost of a launch weighs
 * most; the row carries both floors (floor_us: bytes / copy rate; launch_us: an empty kernel's
 * stream launch timed the same way). Then the same shape with FP8 weights (the few-row FP8
 * kernel, fp8_fp8_gemv.cu: V4's dense FP8 layers at decode) against the same cuBLASLt baseline. */
void bench_gemv(bench_ctx *c, int64_t n, int64_t k) {
    if (!bench_budget_ok(c, "gemv 1x%lldx%lld", (long long)n, (long long)k)) return;
    bench_launch_floors(c);
    dense_case(c, "gemv", 1, n, k, 0, 1, 0);
    dense_fp8_weights_case(c, 1, n, k);
}

/* ---- scale-factor layout transforms ---- */

typedef struct sf_launch {
    const hfp4_sf_transform_request *req;
    void *out;
    size_t bytes;
    hfp4_sf_tensor *desc;
    const char *label;
} sf_launch;

static int launch_sf(void *arg, cudaStream_t s) {
    const sf_launch *l = (const sf_launch *)arg;
    if (hfp4_sf_transform_into_required_layout_gpu(l->req, NULL, l->out, l->bytes, l->desc, s) == HFP4_OK) return 0;
    fprintf(stderr, "bench: sf layout %s: %s\n", l->label, hfp4_last_error());
    return -1;
}

/* Scale-factor layout transforms on DeepSeek-V4 expert scales (FP32 [G, N, K/32], powers of two):
 * the SM100/SM120 UE8M0 pack and the SM90 MN-major relayout, against the copy rate of this run. */
void bench_sf_layout(bench_ctx *c, const char *name, int32_t groups, int64_t mn, int64_t sf_k) {
    if (!bench_budget_ok(c, "sf layout %s", name)) return;
    const int64_t words = (int64_t)groups * mn * sf_k;
    void *d_in = NULL;
    uint32_t *h = (uint32_t *)malloc((size_t)words * 4);
    if (!h || !BENCH_CUDA(cudaMalloc(&d_in, (size_t)words * 4))) {
        fprintf(stderr, "bench: sf layout %s: could not allocate the scales\n", name);
        c->failed++;
        free(h);
        return;
    }
    for (int64_t i = 0; i < words; i++) h[i] = (uint32_t)(110 + bench_rng() % 16) << 23;
    const int copied = BENCH_CUDA(cudaMemcpy(d_in, h, (size_t)words * 4, cudaMemcpyHostToDevice));
    free(h);
    hfp4_sf_tensor dev = {d_in, HFP4_DTYPE_FP32, groups, mn, sf_k, mn * sf_k, sf_k, 1};
    for (int arch_i = 0; copied && arch_i < 2; arch_i++) {
        const char *layout = arch_i ? "sm90_fp32_mn_major" : "sm100_ue8m0_pack";
        hfp4_sf_transform_request req;
        memset(&req, 0, sizeof req);
        req.sf = &dev;
        req.mn = mn;
        req.k = sf_k * 32;
        req.recipe = hfp4_sf_recipe2(1, 32);
        req.num_groups = groups;
        req.arch = arch_i ? 90 : 100;
        hfp4_sf_tensor out;
        size_t bytes = 0;
        void *d_out = NULL;
        double us = 0;
        char label[96];
        snprintf(label, sizeof label, "%s %s", layout, name);
        sf_launch l = {&req, NULL, 0, &out, label};
        if (hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes) != HFP4_OK) {
            fprintf(stderr, "bench: sf layout %s: %s\n", label, hfp4_last_error());
            c->failed++;
            continue;
        }
        if (!BENCH_CUDA(cudaMalloc(&d_out, bytes))) {
            c->failed++;
            continue;
        }
        l.out = d_out;
        l.bytes = bytes;
        if (bench_time_launches(c, launch_sf, &l, 0, &us) == 0) {
            const double moved = (double)words * 4 + (double)bytes;
            if (c->json)
                printf("{\"op\": \"sf_transform\", \"layout\": \"%s\", \"name\": \"%s\", \"tokens\": null, \"m\": %lld, "
                       "\"n\": %lld, \"k\": %lld, \"groups\": %d, \"us\": %.2f, \"tflops\": 0, \"tbps\": %.3f, "
                       "\"baseline\": {\"name\": \"copy\", \"us\": %.2f, \"tflops\": 0, \"tbps\": %.3f}}\n",
                       layout, name, (long long)mn, (long long)sf_k, (long long)(sf_k * 32), groups, us, moved / us * 1e-6,
                       moved / (c->copy_gbps * 1e3), c->copy_gbps / 1000);
            else
                printf("%-10s %-18s %-12s %dx%lldx%lld FP32 scales: %8.1f us %7.3f TB/s = %3.0f %% of the copy rate\n",
                       "sf_layout", layout, name, groups, (long long)mn, (long long)sf_k, us, moved / us * 1e-6,
                       100.0 * (moved / us * 1e-6) / (c->copy_gbps / 1000));
            fflush(stdout);
        } else {
            c->failed++;
        }
        (void)BENCH_CUDA(cudaFree(d_out));
    }
    if (!copied) c->failed++;
    (void)BENCH_CUDA(cudaFree(d_in));
}
