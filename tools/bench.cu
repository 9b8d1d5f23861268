/*
 * bench.cu - `hfp4 bench`: times hfp4's SM90 FP8 x FP4 GEMMs on DeepSeek-V4 expert shapes and
 * dense 8192^3, with the baselines (copy rate, cuBLASLt FP8 row-wise, cuBLASLt BF16) timed in the
 * same run. Prints a table, or with --json one object per row.
 *
 * Timing: CUDA events around each launch, median of --iters launches after a warm-up; before each
 * launch a 256 MB memset evicts the 60 MB L2 so weights come from HBM as they would in a model.
 * FLOPs count only useful rows (2 x routed rows x N x K). Bytes that must move: FP4 weights and
 * UE8M0 scales of the experts hit, FP8 activations with their scales, and BF16 outputs.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baselines.h"
#include "hfp4.h"
#include "tool_common.h"

typedef struct bench_row {
    const char *op, *layout, *name;
    int64_t tokens; /* -1: dense */
    int64_t m, n, k;
    int32_t groups, experts_hit;
    double us, tflops, tbps;
    const char *base_name;
    double base_us, base_tflops, base_tbps;
} bench_row;

static uint64_t rng_state = 0x12345678abcdefull;
static uint64_t rng_next(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void *flush_buf;
static void l2_flush(void) { cudaMemsetAsync(flush_buf, (int)(rng_next() & 0xFF), 256u << 20, 0); }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median microseconds of `iters` timed calls of gemm(problem). */
static double time_gemm(const hfp4_gemm_problem *p, int iters, hfp4_status *st) {
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    double *t = (double *)malloc(sizeof(double) * iters);
    *st = hfp4_gemm(p, NULL); /* warm-up */
    for (int i = 0; i < iters && *st == HFP4_OK; i++) {
        l2_flush();
        cudaEventRecord(e0, 0);
        *st = hfp4_gemm(p, NULL);
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        t[i] = ms * 1e3;
    }
    if (cudaDeviceSynchronize() != cudaSuccess) *st = HFP4_ERR_CUDA;
    qsort(t, iters, sizeof(double), cmp_double);
    double med = t[iters / 2];
    free(t);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return med;
}

/* Device buffers for one expert GEMM family: weights for E experts (repacked, random codes and
 * power-of-two scales), activations and outputs sized for `rows` rows. */
typedef struct expert_buffers {
    void *w, *a, *a_sf, *d, *layout;
    hfp4_matrix b;
    size_t w_bytes;
} expert_buffers;

static void fill_random(void *dev, size_t bytes, int fp8) {
    uint8_t *h = (uint8_t *)malloc(bytes);
    for (size_t i = 0; i < bytes; i++) {
        uint8_t v = (uint8_t)rng_next();
        if (fp8 && (v & 0x7F) == 0x7F) v = 0x3C;
        h[i] = v;
    }
    cudaMemcpy(dev, h, bytes, cudaMemcpyHostToDevice);
    free(h);
}

static int make_weights(int32_t experts, int64_t n, int64_t k, expert_buffers *eb) {
    memset(eb, 0, sizeof *eb);
    /* build a random plain FP4 matrix with UE8M0 scales on the device, repack on the device */
    size_t plain = (size_t)experts * n * k / 2, nsf = (size_t)experts * n * (k / 32);
    void *src = NULL, *sf = NULL;
    if (cudaMalloc(&src, plain) != cudaSuccess || cudaMalloc(&sf, nsf) != cudaSuccess) return -1;
    fill_random(src, plain, 0);
    uint8_t *hs = (uint8_t *)malloc(nsf);
    for (size_t i = 0; i < nsf; i++) hs[i] = (uint8_t)(118 + rng_next() % 6);
    cudaMemcpy(sf, hs, nsf, cudaMemcpyHostToDevice);
    free(hs);
    hfp4_matrix w;
    memset(&w, 0, sizeof w);
    w.data = src;
    w.dtype = HFP4_DTYPE_FP4_E2M1;
    w.rows = n;
    w.cols = k;
    w.ld = k / 2;
    w.stride_group = n * k / 2;
    w.scales.data = sf;
    w.scales.dtype = HFP4_DTYPE_UE8M0;
    w.scales.gran_mn = 1;
    w.scales.gran_k = 32;
    w.scales.stride_mn = k / 32;
    w.scales.stride_k = 1;
    w.scales.stride_group = n * (k / 32);
    hfp4_sm90_weights_size(experts, n, k, HFP4_DTYPE_UE8M0, &eb->w_bytes);
    if (cudaMalloc(&eb->w, eb->w_bytes) != cudaSuccess) return -1;
    hfp4_status st = hfp4_repack_sm90(&w, experts, HFP4_DTYPE_UE8M0, eb->w, eb->w_bytes, &eb->b, NULL);
    cudaDeviceSynchronize();
    cudaFree(src);
    cudaFree(sf);
    return st == HFP4_OK ? 0 : -1;
}

static void fill_problem(hfp4_gemm_problem *p, hfp4_grouping g, int64_t m, int64_t n, int64_t k, int32_t groups,
                         void *a, void *a_sf, void *d, void *layout, const hfp4_matrix *b, int64_t expected_m) {
    memset(p, 0, sizeof *p);
    p->grouping = g;
    p->m = m;
    p->n = n;
    p->k = k;
    p->num_groups = groups;
    p->layout = (const int32_t *)layout;
    p->expected_m = expected_m;
    int64_t sfk = (k + 127) / 128;
    p->a.data = a;
    p->a.dtype = HFP4_DTYPE_FP8_E4M3;
    p->a.rows = m;
    p->a.cols = k;
    p->a.ld = k;
    p->a.stride_group = g == HFP4_GROUPING_MASKED ? m * k : 0;
    p->a.scales.data = a_sf;
    p->a.scales.dtype = HFP4_DTYPE_FP32;
    p->a.scales.gran_mn = 1;
    p->a.scales.gran_k = 128;
    p->a.scales.stride_mn = sfk;
    p->a.scales.stride_k = 1;
    p->a.scales.stride_group = g == HFP4_GROUPING_MASKED ? m * sfk : 0;
    p->b = *b;
    p->d.data = d;
    p->d.dtype = HFP4_DTYPE_BF16;
    p->d.ld = n;
    p->d.stride_group = g == HFP4_GROUPING_MASKED ? m * n : 0;
}

static void print_row(const bench_row *r, int json) {
    if (json) {
        printf("{\"op\": \"%s\", \"layout\": \"%s\", \"name\": \"%s\", \"tokens\": ", r->op, r->layout, r->name);
        if (r->tokens < 0) printf("null");
        else printf("%lld", (long long)r->tokens);
        printf(", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"groups\": %d, \"experts_hit\": %d, \"us\": %.2f, \"tflops\": %.1f, "
               "\"tbps\": %.3f, \"baseline\": {\"name\": \"%s\", \"us\": %.2f, \"tflops\": %.1f, \"tbps\": %.3f}}\n",
               (long long)r->m, (long long)r->n, (long long)r->k, r->groups, r->experts_hit, r->us, r->tflops, r->tbps,
               r->base_name ? r->base_name : "", r->base_us, r->base_tflops, r->base_tbps);
    } else {
        printf("%-10s %-10s %-8s %6s %7lld %6lld %6lld %4d %9.1f %8.1f %7.3f | %-22s %9.1f %8.1f %7.3f  %5.2fx\n", r->op,
               r->layout, r->name, r->tokens < 0 ? "-" : "", (long long)r->m, (long long)r->n, (long long)r->k,
               r->experts_hit, r->us, r->tflops, r->tbps, r->base_name ? r->base_name : "-", r->base_us, r->base_tflops,
               r->base_tbps, r->base_us > 0 ? r->base_us / r->us : 0.0);
        if (r->tokens >= 0) printf("%*s(T = %lld)\n", 29, "", (long long)r->tokens);
    }
    fflush(stdout);
}

/* Routes T tokens to top-6 of E experts uniformly at random; returns per-expert row counts. */
static void route(int64_t tokens, int32_t experts, int32_t topk, int64_t *counts) {
    memset(counts, 0, sizeof(int64_t) * experts);
    int32_t *pick = (int32_t *)malloc(sizeof(int32_t) * topk);
    for (int64_t t = 0; t < tokens; t++) {
        for (int j = 0; j < topk; j++) {
            int32_t e;
            int dup;
            do {
                e = (int32_t)(rng_next() % (uint64_t)experts);
                dup = 0;
                for (int i = 0; i < j; i++) dup |= pick[i] == e;
            } while (dup);
            pick[j] = e;
            counts[e]++;
        }
    }
    free(pick);
}

static void bench_experts(const char *name, int32_t experts, int64_t n, int64_t k, const int64_t *tokens_list, int ntok,
                          int iters, int json) {
    expert_buffers eb;
    if (make_weights(experts, n, k, &eb) != 0) {
        fprintf(stderr, "bench: could not allocate/repack %s weights: %s\n", name, hfp4_last_error());
        return;
    }
    int64_t *counts = (int64_t *)malloc(sizeof(int64_t) * experts);
    for (int ti = 0; ti < ntok; ti++) {
        int64_t T = tokens_list[ti];
        route(T, experts, 6, counts);
        int64_t rows = 6 * T, hit = 0, max_m = 0, padded = 0;
        for (int e = 0; e < experts; e++) {
            hit += counts[e] > 0;
            if (counts[e] > max_m) max_m = counts[e];
            padded += (counts[e] + 127) / 128 * 128;
        }
        double flops = 2.0 * rows * n * k;
        double bytes = hit * n * (k / 2.0 + k / 32.0) + rows * (k + 4.0 * ((k + 127) / 128)) + rows * n * 2.0;
        /* baseline: cuBLASLt FP8 row-wise on one dense GEMM of all routed rows (an upper bound) */
        double base_us = 0;
        char err[256] = "";
        const char *base_name = "cublaslt_fp8_rowwise";
        if (baseline_cublaslt_fp8_rowwise(rows, n, k, iters, &base_us, err, sizeof err) != 0) {
            base_name = "unavailable";
            base_us = 0;
            if (!json) fprintf(stderr, "  baseline: %s\n", err);
        }
        /* masked layout (decode sizes) */
        if (T <= 256) {
            int64_t mm = (max_m + 7) / 8 * 8;
            void *a, *sf, *d, *lay;
            cudaMalloc(&a, (size_t)experts * mm * k);
            cudaMalloc(&sf, (size_t)experts * mm * ((k + 127) / 128) * 4);
            cudaMalloc(&d, (size_t)experts * mm * n * 2);
            cudaMalloc(&lay, sizeof(int32_t) * experts);
            fill_random(a, (size_t)experts * mm * k, 1);
            float *hsf = (float *)malloc((size_t)experts * mm * ((k + 127) / 128) * 4);
            for (int64_t i = 0; i < experts * mm * ((k + 127) / 128); i++) hsf[i] = 1.0f / 256;
            cudaMemcpy(sf, hsf, (size_t)experts * mm * ((k + 127) / 128) * 4, cudaMemcpyHostToDevice);
            free(hsf);
            int32_t *hl = (int32_t *)malloc(sizeof(int32_t) * experts);
            for (int e = 0; e < experts; e++) hl[e] = (int32_t)counts[e];
            cudaMemcpy(lay, hl, sizeof(int32_t) * experts, cudaMemcpyHostToDevice);
            free(hl);
            hfp4_gemm_problem p;
            fill_problem(&p, HFP4_GROUPING_MASKED, mm, n, k, experts, a, sf, d, lay, &eb.b, (rows + hit - 1) / (hit ? hit : 1));
            hfp4_status st;
            double us = time_gemm(&p, iters, &st);
            bench_row r = {"fp8_fp4", "masked", name, T, rows, n, k, experts, (int32_t)hit, us, flops / us * 1e-6,
                           bytes / us * 1e-6, base_name, base_us, base_us > 0 ? flops / base_us * 1e-6 : 0,
                           base_us > 0 ? (hit * n * k + rows * k + rows * n * 2.0) / base_us * 1e-6 : 0};
            if (st != HFP4_OK) fprintf(stderr, "bench: %s\n", hfp4_last_error());
            else print_row(&r, json);
            cudaFree(a);
            cudaFree(sf);
            cudaFree(d);
            cudaFree(lay);
        }
        /* contiguous layout (ids, 128-row aligned segments) */
        {
            int64_t M = padded;
            void *a, *sf, *d, *lay;
            cudaMalloc(&a, (size_t)M * k);
            cudaMalloc(&sf, (size_t)M * ((k + 127) / 128) * 4);
            cudaMalloc(&d, (size_t)M * n * 2);
            cudaMalloc(&lay, sizeof(int32_t) * M);
            fill_random(a, (size_t)M * k, 1);
            float *hsf = (float *)malloc((size_t)M * ((k + 127) / 128) * 4);
            for (int64_t i = 0; i < M * ((k + 127) / 128); i++) hsf[i] = 1.0f / 256;
            cudaMemcpy(sf, hsf, (size_t)M * ((k + 127) / 128) * 4, cudaMemcpyHostToDevice);
            free(hsf);
            int32_t *hl = (int32_t *)malloc(sizeof(int32_t) * M);
            int64_t row = 0;
            for (int e = 0; e < experts; e++) {
                int64_t seg = (counts[e] + 127) / 128 * 128;
                for (int64_t i = 0; i < seg; i++) hl[row + i] = i < counts[e] ? e : -1;
                row += seg;
            }
            cudaMemcpy(lay, hl, sizeof(int32_t) * M, cudaMemcpyHostToDevice);
            free(hl);
            hfp4_gemm_problem p;
            fill_problem(&p, HFP4_GROUPING_CONTIGUOUS, M, n, k, experts, a, sf, d, lay, &eb.b, rows / (hit ? hit : 1));
            hfp4_status st;
            double us = time_gemm(&p, iters, &st);
            bench_row r = {"fp8_fp4", "contiguous", name, T, rows, n, k, experts, (int32_t)hit, us, flops / us * 1e-6,
                           bytes / us * 1e-6, base_name, base_us, base_us > 0 ? flops / base_us * 1e-6 : 0,
                           base_us > 0 ? (hit * n * k + rows * k + rows * n * 2.0) / base_us * 1e-6 : 0};
            if (st != HFP4_OK) fprintf(stderr, "bench: %s\n", hfp4_last_error());
            else print_row(&r, json);
            cudaFree(a);
            cudaFree(sf);
            cudaFree(d);
            cudaFree(lay);
        }
    }
    free(counts);
    cudaFree(eb.w);
}

static void bench_dense(int64_t m, int64_t n, int64_t k, int iters, int json) {
    expert_buffers eb;
    if (make_weights(1, n, k, &eb) != 0) return;
    void *a, *sf, *d;
    cudaMalloc(&a, (size_t)m * k);
    cudaMalloc(&sf, (size_t)m * ((k + 127) / 128) * 4);
    cudaMalloc(&d, (size_t)m * n * 2);
    fill_random(a, (size_t)m * k, 1);
    cudaMemset(sf, 0, (size_t)m * ((k + 127) / 128) * 4);
    hfp4_gemm_problem p;
    fill_problem(&p, HFP4_GROUPING_NONE, m, n, k, 1, a, sf, d, NULL, &eb.b, m);
    hfp4_status st;
    double us = time_gemm(&p, iters, &st);
    double flops = 2.0 * m * n * k, bytes = n * (k / 2.0 + k / 32.0) + (double)m * k + m * n * 2.0;
    double base_us = 0;
    char err[256] = "";
    const char *base_name = "cublaslt_fp8_rowwise";
    if (baseline_cublaslt_fp8_rowwise(m, n, k, iters, &base_us, err, sizeof err) != 0) {
        base_name = "unavailable";
        if (!json) fprintf(stderr, "  baseline: %s\n", err);
    }
    bench_row r = {"fp8_fp4", "dense", "dense", -1, m, n, k, 1, 1, us, flops / us * 1e-6, bytes / us * 1e-6, base_name,
                   base_us, base_us > 0 ? flops / base_us * 1e-6 : 0,
                   base_us > 0 ? ((double)n * k + (double)m * k + m * n * 2.0) / base_us * 1e-6 : 0};
    if (st != HFP4_OK) fprintf(stderr, "bench: %s\n", hfp4_last_error());
    else print_row(&r, json);
    double bf_us = 0;
    if (baseline_cublaslt_bf16(m, n, k, iters, &bf_us, err, sizeof err) == 0) {
        bench_row rb = {"bf16", "dense", "cublas", -1, m, n, k, 1, 1, bf_us, flops / bf_us * 1e-6,
                        (2.0 * n * k + 2.0 * m * k + 2.0 * m * n) / bf_us * 1e-6, "cublaslt_bf16", bf_us, flops / bf_us * 1e-6, 0};
        print_row(&rb, json);
    }
    cudaFree(a);
    cudaFree(sf);
    cudaFree(d);
    cudaFree(eb.w);
}

/* Scale-factor layout transforms on DeepSeek-V4 expert scales (FP32 [G, N, K/32], powers of two):
 * the SM100/SM120 UE8M0 pack and the SM90 MN-major relayout, against the copy rate of this run. */
static void bench_sf_layout(const char *name, int32_t groups, int64_t mn, int64_t sf_k, int iters, double copy_gbps,
                            int json) {
    const int64_t words = (int64_t)groups * mn * sf_k;
    void *d_in = NULL, *d_out = NULL;
    if (cudaMalloc(&d_in, (size_t)words * 4) != cudaSuccess) return;
    uint32_t *h = (uint32_t *)malloc((size_t)words * 4);
    for (int64_t i = 0; i < words; i++) h[i] = (uint32_t)(110 + rng_next() % 16) << 23;
    cudaMemcpy(d_in, h, (size_t)words * 4, cudaMemcpyHostToDevice);
    free(h);
    hfp4_sf_tensor dev = {d_in, HFP4_DTYPE_FP32, groups, mn, sf_k, mn * sf_k, sf_k, 1};
    for (int arch_i = 0; arch_i < 2; arch_i++) {
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
        if (hfp4_sf_transform_into_required_layout_query(&req, &out, &bytes) != HFP4_OK ||
            cudaMalloc(&d_out, bytes) != cudaSuccess) {
            fprintf(stderr, "bench: sf layout %s: %s\n", name, hfp4_last_error());
            break;
        }
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        double *t = (double *)malloc(sizeof(double) * iters);
        hfp4_status st = hfp4_sf_transform_into_required_layout_gpu(&req, NULL, d_out, bytes, &out, NULL);
        for (int i = 0; i < iters && st == HFP4_OK; i++) {
            l2_flush();
            cudaEventRecord(e0, 0);
            st = hfp4_sf_transform_into_required_layout_gpu(&req, NULL, d_out, bytes, &out, NULL);
            cudaEventRecord(e1, 0);
            cudaEventSynchronize(e1);
            float ms = 0;
            cudaEventElapsedTime(&ms, e0, e1);
            t[i] = ms * 1e3;
        }
        if (st == HFP4_OK) {
            qsort(t, iters, sizeof(double), cmp_double);
            double us = t[iters / 2], moved = (double)words * 4 + (double)bytes;
            const char *layout = arch_i ? "sm90_fp32_mn_major" : "sm100_ue8m0_pack";
            if (json)
                printf("{\"op\": \"sf_transform\", \"layout\": \"%s\", \"name\": \"%s\", \"tokens\": null, \"m\": %lld, "
                       "\"n\": %lld, \"k\": %lld, \"groups\": %d, \"us\": %.2f, \"tflops\": 0, \"tbps\": %.3f, "
                       "\"baseline\": {\"name\": \"copy\", \"us\": %.2f, \"tflops\": 0, \"tbps\": %.3f}}\n",
                       layout, name, (long long)mn, (long long)sf_k, (long long)(sf_k * 32), groups, us, moved / us * 1e-6,
                       moved / (copy_gbps * 1e3), copy_gbps / 1000);
            else
                printf("%-10s %-18s %-12s %dx%lldx%lld FP32 scales: %8.1f us %7.3f TB/s = %3.0f %% of the copy rate\n",
                       "sf_layout", layout, name, groups, (long long)mn, (long long)sf_k, us, moved / us * 1e-6,
                       100.0 * (moved / us * 1e-6) / (copy_gbps / 1000));
        } else {
            fprintf(stderr, "bench: sf layout %s: %s\n", name, hfp4_last_error());
        }
        free(t);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        cudaFree(d_out);
        d_out = NULL;
    }
    cudaFree(d_in);
}

extern "C" int hfp4_cmd_bench(int argc, char **argv) {
    int json = 0, iters = 20, quick = 0, ntok_arg = 0;
    int64_t tok_arg[16];
    const char *only = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) {
            /* comma-separated token counts, e.g. --tokens 32,4096 */
            char *list = argv[++i], *end = NULL;
            while (*list && ntok_arg < 16) {
                long long v = strtoll(list, &end, 10);
                if (end == list || v < 1 || v > 1000000) {
                    fprintf(stderr, "hfp4 bench: --tokens '%s': each count must be an integer in 1..1000000\n", argv[i]);
                    return 2;
                }
                tok_arg[ntok_arg++] = v;
                list = *end == ',' ? end + 1 : end;
                if (*end && *end != ',') {
                    fprintf(stderr, "hfp4 bench: --tokens '%s': expected comma-separated integers\n", argv[i]);
                    return 2;
                }
            }
        }
        else {
            fprintf(stderr, "hfp4 bench: unknown option '%s' (use --json, --iters N, --quick, --tokens T1,T2,..., --only w13|w2|dense|sf)\n",
                    argv[i]);
            return 2;
        }
    }
    if (iters < 3 || iters > 1000) {
        fprintf(stderr, "hfp4 bench: --iters %d must be in 3..1000\n", iters);
        return 2;
    }
    hfp4_device_info info;
    if (hfp4_device_query(0, &info) != HFP4_OK || !info.has_sm90_kernels) {
        fprintf(stderr, "hfp4 bench: needs a Hopper (SM90) GPU: %s\n", hfp4_last_error()[0] ? hfp4_last_error() : "device 0 is not SM90");
        return 3;
    }
    if (cudaMalloc(&flush_buf, 256u << 20) != cudaSuccess) return 4;
    double gbps = 0, cus = 0;
    baseline_copy_gbps((size_t)1 << 30, 10, &gbps, &cus);
    if (json) printf("{\"op\": \"copy\", \"layout\": \"dense\", \"tokens\": null, \"bytes\": %lld, \"us\": %.2f, \"tbps\": %.3f, \"gpu\": \"%s\"}\n",
                     (long long)(2LL << 30), cus, gbps / 1000, info.name);
    else printf("# %s, %d SMs; device-to-device copy (read+write) %.0f GB/s\n"
                "%-10s %-10s %-8s %6s %7s %6s %6s %4s %9s %8s %7s | %-22s %9s %8s %7s  %6s\n",
                info.name, info.num_sms, gbps, "op", "layout", "shape", "", "rows", "n", "k", "hit", "us", "TFLOP/s", "TB/s",
                "baseline", "us", "TFLOP/s", "TB/s", "speedup");
    static const int64_t tok_full[] = {1, 8, 32, 64, 256, 4096, 16384};
    static const int64_t tok_quick[] = {1, 32, 4096};
    const int64_t *tl = ntok_arg ? tok_arg : quick ? tok_quick : tok_full;
    int nt = ntok_arg ? ntok_arg : quick ? 3 : 7;
    if (!only || !strcmp(only, "w13")) bench_experts("v4f-w13", 256, 4096, 4096, tl, nt, iters, json);
    if (!only || !strcmp(only, "w2")) bench_experts("v4f-w2", 256, 4096, 2048, tl, nt, iters, json);
    if (!only || !strcmp(only, "dense")) bench_dense(8192, 8192, 8192, iters, json);
    if (!only || !strcmp(only, "sf")) {
        bench_sf_layout("v4f-w13", 256, 4096, 128, iters, gbps, json); /* V4-Flash w13 expert scales */
        if (!quick) bench_sf_layout("v4p-w2", 384, 7168, 96, iters, gbps, json); /* V4-Pro w2 expert scales */
    }
    cudaFree(flush_buf);
    return 0;
}
