/*
 * bench_moe.cu - the "moe" section of `hfp4 bench`: the MoE glue around the grouped GEMMs
 * (hfp4_moe_route_gpu, hfp4_moe_quantize_rows_gpu, hfp4_moe_swiglu_quantize_rows_gpu,
 * hfp4_moe_combine_gpu; hfp4.h, "MoE glue") at
 * DeepSeek-V4-Flash's layer shape (E = 256, top-6, hidden 4096), each launch timed alone like the
 * GEMMs (L2 emptied before it), next to the bytes it must move at the copy rate. These are the
 * steps between a layer's two GEMMs and around them; a decode layer's GEMMs take ~45-180 us at
 * T = 1-8, so each step should cost a few microseconds, most of it launch.
 */
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

typedef struct moe_bufs {
    int64_t tokens, S, rows, H;
    int32_t E, top_k;
    int64_t *ids;
    int32_t *pos, *layout;
    uint16_t *x, *y, *out;
    uint8_t *a;
    float *sf, *w;
} moe_bufs;

static int launch_route(void *arg, cudaStream_t s) {
    const moe_bufs *b = (const moe_bufs *)arg;
    return hfp4_moe_route_gpu(b->ids, 1, b->S, b->E, 128, b->pos, b->layout, b->rows, (hfp4_stream)s) == HFP4_OK ? 0
                                                                                                                : -1;
}

static int launch_quantize(void *arg, cudaStream_t s) {
    const moe_bufs *b = (const moe_bufs *)arg;
    return hfp4_moe_quantize_rows_gpu(b->x, HFP4_DTYPE_BF16, b->tokens, b->H, b->H, b->top_k, b->pos, b->S, 128, b->a,
                                      b->H, b->sf, b->rows, (hfp4_stream)s) == HFP4_OK
               ? 0
               : -1;
}

/* the first GEMM's D as y: gate | up of I = H / 2 columns each (V4-Flash: I = 2048, 2I = H) */
static int launch_swiglu(void *arg, cudaStream_t s) {
    const moe_bufs *b = (const moe_bufs *)arg;
    return hfp4_moe_swiglu_quantize_rows_gpu(b->y, b->H, b->H / 2, HFP4_GATE_UP_STACKED, 10.0f, b->pos, b->S, 128, b->a, b->H / 2, b->sf,
                                             b->rows, (hfp4_stream)s) == HFP4_OK
               ? 0
               : -1;
}

static int launch_combine(void *arg, cudaStream_t s) {
    const moe_bufs *b = (const moe_bufs *)arg;
    return hfp4_moe_combine_gpu(b->y, b->H, b->rows, b->H, b->pos, b->w, HFP4_DTYPE_FP32, b->tokens, b->top_k, b->out,
                                HFP4_DTYPE_BF16, b->H, (hfp4_stream)s) == HFP4_OK
               ? 0
               : -1;
}

static void moe_row(bench_ctx *c, const char *step, const moe_bufs *b, double us, double bytes) {
    if (c->json)
        printf("{\"op\": \"moe_glue\", \"layout\": \"%s\", \"name\": \"v4f\", \"tokens\": %lld, \"m\": %lld, \"n\": %lld, "
               "\"k\": %lld, \"groups\": %d, \"us\": %.2f, \"tflops\": 0, \"tbps\": %.3f, \"floor_us\": %.2f}\n",
               step, (long long)b->tokens, (long long)b->S, (long long)b->H, (long long)b->top_k, b->E, us,
               bytes / us * 1e-6, bench_floor_us(c, bytes));
    else
        printf("%-10s %-18s T=%-5lld %6lld rows: %8.2f us %7.3f TB/s (bytes at the copy rate: %.2f us)\n", "moe_glue",
               step, (long long)b->tokens, (long long)b->S, us, bytes / us * 1e-6, bench_floor_us(c, bytes));
    fflush(stdout);
}

static void moe_case(bench_ctx *c, int64_t tokens) {
    moe_bufs b;
    memset(&b, 0, sizeof b);
    b.tokens = tokens;
    b.top_k = 6;
    b.E = 256;
    b.H = 4096;
    b.S = tokens * b.top_k;
    b.rows = hfp4_moe_layout_rows(b.S, b.E, 128);
    int64_t *ids = (int64_t *)malloc(sizeof(int64_t) * b.S);
    for (int64_t t = 0; ids != NULL && t < tokens; t++) /* distinct experts per token */
        for (int32_t j = 0; j < b.top_k; j++) {
            int64_t e, again;
            do {
                e = (int64_t)(bench_rng() % (uint64_t)b.E);
                again = 0;
                for (int32_t jj = 0; jj < j; jj++) again |= ids[t * b.top_k + jj] == e;
            } while (again);
            ids[t * b.top_k + j] = e;
        }
    const int ok = ids && BENCH_CUDA(cudaMalloc(&b.ids, sizeof(int64_t) * b.S)) &&
                   BENCH_CUDA(cudaMalloc(&b.pos, sizeof(int32_t) * b.S)) &&
                   BENCH_CUDA(cudaMalloc(&b.layout, sizeof(int32_t) * b.rows)) &&
                   BENCH_CUDA(cudaMalloc(&b.x, sizeof(uint16_t) * tokens * b.H)) &&
                   BENCH_CUDA(cudaMalloc(&b.y, sizeof(uint16_t) * b.rows * b.H)) &&
                   BENCH_CUDA(cudaMalloc(&b.out, sizeof(uint16_t) * tokens * b.H)) &&
                   BENCH_CUDA(cudaMalloc(&b.a, (size_t)(b.rows * b.H))) &&
                   BENCH_CUDA(cudaMalloc(&b.sf, sizeof(float) * b.rows * (b.H / 128))) &&
                   BENCH_CUDA(cudaMalloc(&b.w, sizeof(float) * b.S)) &&
                   BENCH_CUDA(cudaMemcpy(b.ids, ids, sizeof(int64_t) * b.S, cudaMemcpyHostToDevice)) &&
                   bench_fill_bf16(b.x, (size_t)(tokens * b.H)) == 0 &&
                   bench_fill_bf16(b.y, (size_t)(b.rows * b.H)) == 0 &&
                   bench_fill_f32(b.w, (size_t)b.S, 0.25f) == 0;
    /* (BF16 in activations' range: random bytes, a third of them NaN, Inf or past e^88, would time
     * the SwiGLU's special cases instead of its common path) */
    double us = 0;
    if (!ok) {
        fprintf(stderr, "bench: moe glue T=%lld: could not allocate\n", (long long)tokens);
        c->failed++;
    } else if (bench_time_launches(c, launch_route, &b, 0, &us) != 0) {
        fprintf(stderr, "bench: moe route T=%lld: %s\n", (long long)tokens, hfp4_last_error());
        c->failed++;
    } else {
        moe_row(c, "route", &b, us, (double)b.S * (8 + 4) + (double)b.rows * 4);
        if (bench_time_launches(c, launch_quantize, &b, 0, &us) != 0) {
            fprintf(stderr, "bench: moe quantize T=%lld: %s\n", (long long)tokens, hfp4_last_error());
            c->failed++;
        } else {
            moe_row(c, "quantize_rows", &b, us, (double)tokens * b.H * 2 + (double)b.S * (b.H + b.H / 128 * 4 + 4));
        }
        if (bench_time_launches(c, launch_swiglu, &b, 0, &us) != 0) {
            fprintf(stderr, "bench: moe swiglu_quantize T=%lld: %s\n", (long long)tokens, hfp4_last_error());
            c->failed++;
        } else {
            const double n = (double)(b.H / 2);
            moe_row(c, "swiglu_quantize", &b, us, (double)b.S * (2 * n * 2 + n + n / 128 * 4 + 4));
        }
        if (bench_time_launches(c, launch_combine, &b, 0, &us) != 0) {
            fprintf(stderr, "bench: moe combine T=%lld: %s\n", (long long)tokens, hfp4_last_error());
            c->failed++;
        } else {
            moe_row(c, "combine", &b, us, (double)b.S * (b.H * 2 + 8) + (double)tokens * b.H * 2);
        }
    }
    free(ids);
    (void)BENCH_CUDA(cudaFree(b.ids)), (void)BENCH_CUDA(cudaFree(b.pos)), (void)BENCH_CUDA(cudaFree(b.layout));
    (void)BENCH_CUDA(cudaFree(b.x)), (void)BENCH_CUDA(cudaFree(b.y)), (void)BENCH_CUDA(cudaFree(b.out));
    (void)BENCH_CUDA(cudaFree(b.a)), (void)BENCH_CUDA(cudaFree(b.sf)), (void)BENCH_CUDA(cudaFree(b.w));
}

void bench_moe_glue(bench_ctx *c, const int64_t *tokens, int ntok) {
    for (int i = 0; i < ntok; i++) {
        if (!bench_budget_ok(c, "moe glue T=%lld", (long long)tokens[i])) continue;
        moe_case(c, tokens[i]);
    }
}
