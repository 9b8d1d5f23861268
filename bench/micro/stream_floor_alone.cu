/*
 * stream_floor_alone.cu - the bench's read-only floor of a masked decode launch (tools/bench_stream_floor.cu)
 * in a process of its own, to find what separates the bench's `stream_floor` rows from a standalone copy
 * of the same reader: V4-Flash w2 at T = 1 took 11.5-11.7 us in the bench and 10.3-10.9 us standalone
 * (bench/RESULTS.md v51-v52), and that floor decides whether issue 4's T = 1 goal (10.7 us) is in reach.
 *
 * The same reader kernel (tools/stream_floor_kernel.cuh) and the same timing as the bench's graph rows: a one-launch graph (programmatic
 * dependent launch), replays queued in batches behind a 2 ms spin, each after a 256 MB read that empties
 * L2 (outside the events), an event pair around each replay, median. What varies, one at a time:
 *   footprint  compact: the 6 hit experts' weights alone, back to back (~27 MB for w2);
 *              set:     all 256 experts of the shape in one buffer, the 6 hit at the bench's kind of
 *                       offsets (expert e at e x its bytes), scales in a second buffer, as hfp4_matrix;
 *              big:     set, with 24 GB more allocated and written first (a model's other weights)
 *   ctas       CTAs an SM (2 as the bench's reader, 4)
 * plus, in the same process, an empty kernel's one-launch graph with the GEMM's launch shape (the bench's
 * graph launch floor: 2.8 us there).
 *
 * Build (here):  make BUILD=build-dev build-dev/stream_floor_alone
 * Run (device):  build-dev/stream_floor_alone       (~20 s; prints one line a case)
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../tools/stream_floor_kernel.cuh" /* the bench's reader itself */

#define GROUPS 256
#define HIT 6
#define FLUSH_BYTES ((size_t)256 << 20)
#define BATCH 32
#define BATCHES 4

#define CK(x)                                                                                                    \
    do {                                                                                                         \
        cudaError_t e_ = (x);                                                                                    \
        if (e_ != cudaSuccess) {                                                                                 \
            fprintf(stderr, "stream_floor_alone: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
            exit(1);                                                                                             \
        }                                                                                                        \
    } while (0)

__global__ void __launch_bounds__(384) alone_empty_kernel(void) {}

/* the bench's L2 flush: a 256 MB read (tools/bench_timing.cu) */
__global__ void alone_read_kernel(const uint4 *__restrict__ src, size_t n, unsigned *sink) {
    unsigned x = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = __ldcg(src + i);
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (x == 0xFFFFFFFFu && sink) *sink = x;
}

__global__ void alone_spin_kernel(uint64_t ns) {
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median microseconds of BATCH x BATCHES replays of `exec`, each after the flush, as the bench times them */
static double time_replays(cudaGraphExec_t exec, cudaStream_t s, const void *flush, int sms) {
    static double t[BATCH * BATCHES];
    cudaEvent_t ev[2 * BATCH];
    for (int i = 0; i < 2 * BATCH; i++) CK(cudaEventCreate(&ev[i]));
    CK(cudaGraphLaunch(exec, s));
    CK(cudaStreamSynchronize(s));
    for (int b = 0; b < BATCHES; b++) {
        alone_spin_kernel<<<1, 1, 0, s>>>(2000000);
        for (int j = 0; j < BATCH; j++) {
            alone_read_kernel<<<sms * 4, 512, 0, s>>>((const uint4 *)flush, FLUSH_BYTES / 16, NULL);
            CK(cudaEventRecord(ev[2 * j], s));
            CK(cudaGraphLaunch(exec, s));
            CK(cudaEventRecord(ev[2 * j + 1], s));
        }
        CK(cudaStreamSynchronize(s));
        for (int j = 0; j < BATCH; j++) {
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, ev[2 * j], ev[2 * j + 1]));
            t[b * BATCH + j] = ms * 1e3;
        }
    }
    for (int i = 0; i < 2 * BATCH; i++) CK(cudaEventDestroy(ev[i]));
    qsort(t, BATCH * BATCHES, sizeof(double), cmp_double);
    return t[BATCH * BATCHES / 2];
}

typedef struct floor_case {
    const int32_t *masked_m;
    const uint4 *w, *ws;
    uint32_t w_vec, ws_vec;
    unsigned *sink;
    int ctas;
} floor_case;

static cudaGraphExec_t capture_floor(const floor_case *f, cudaStream_t s) {
    cudaGraph_t g;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    CK(launch_stream_floor((unsigned)f->ctas, s, f->masked_m, (int32_t)GROUPS, f->w, f->w_vec, f->ws, f->ws_vec,
                           f->sink));
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&exec, g, 0));
    CK(cudaGraphDestroy(g));
    return exec;
}

int main(void) {
    int sms = 0, smem = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess || sms == 0) {
        fprintf(stderr, "stream_floor_alone: no CUDA device\n");
        return 1;
    }
    CK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void *flush;
    unsigned *sink;
    int32_t *masked_m;
    CK(cudaMalloc(&flush, FLUSH_BYTES));
    CK(cudaMemset(flush, 0x5A, FLUSH_BYTES));
    CK(cudaMalloc(&sink, sizeof(unsigned)));
    CK(cudaMalloc(&masked_m, GROUPS * sizeof(int32_t)));
    /* six hit experts spread over the 256, one row each (T = 1, top-6) */
    static const int hit_experts[HIT] = {17, 58, 103, 149, 196, 240};
    int32_t h_masked[GROUPS] = {0};
    for (int i = 0; i < HIT; i++) h_masked[hit_experts[i]] = 1;
    CK(cudaMemcpy(masked_m, h_masked, sizeof h_masked, cudaMemcpyHostToDevice));

    /* the launch floor: an empty kernel with the GEMM's launch shape, as a one-launch graph */
    {
        cudaGraph_t g;
        cudaGraphExec_t exec;
        CK(cudaFuncSetAttribute(alone_empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        alone_empty_kernel<<<sms, 384, smem, s>>>();
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&exec, g, 0));
        printf("empty kernel, one-launch graph (%d CTAs x 384, %d B smem): %.2f us\n", sms, smem,
               time_replays(exec, s, flush, sms));
        CK(cudaGraphExecDestroy(exec));
        CK(cudaGraphDestroy(g));
    }

    static const int ks[2] = {2048, 4096}; /* w2, w13 (N = 4096) */
    static const char *const names[2] = {"w2 ", "w13"};
    void *big = NULL;
    for (int fp = 0; fp < 3; fp++) {
        if (fp == 2) { /* a model's other weights: 24 GB allocated and written */
            const size_t big_bytes = (size_t)24 << 30;
            CK(cudaMalloc(&big, big_bytes));
            CK(cudaMemset(big, 0x11, big_bytes));
            CK(cudaDeviceSynchronize());
        }
        for (int ki = 0; ki < 2; ki++) {
            const size_t n = 4096, k = (size_t)ks[ki];
            const size_t expert_w = n * k / 2, expert_ws = n * (k / 128) * 4; /* the repacked container's bytes */
            const int slots = fp == 0 ? HIT : GROUPS;
            uint8_t *w, *ws;
            CK(cudaMalloc(&w, expert_w * slots));
            CK(cudaMalloc(&ws, expert_ws * slots));
            CK(cudaMemset(w, 0x37, expert_w * slots));
            CK(cudaMemset(ws, 0x7B, expert_ws * slots));
            /* compact: the hit experts are slots 0..5, so the reader's masked_m lists groups 0..5 */
            int32_t *mm = masked_m;
            int32_t *compact_m = NULL;
            if (fp == 0) {
                int32_t hc[GROUPS] = {0};
                for (int i = 0; i < HIT; i++) hc[i] = 1;
                CK(cudaMalloc(&compact_m, sizeof hc));
                CK(cudaMemcpy(compact_m, hc, sizeof hc, cudaMemcpyHostToDevice));
                mm = compact_m;
            }
            for (int cpm = 2; cpm <= 4; cpm += 2) {
                const floor_case f = {mm, (const uint4 *)w, (const uint4 *)ws, (uint32_t)(expert_w / 16),
                                      (uint32_t)(expert_ws / 16), sink, cpm * sms};
                cudaGraphExec_t exec = capture_floor(&f, s);
                const double us = time_replays(exec, s, flush, sms);
                const double bytes = (double)HIT * (expert_w + expert_ws);
                printf("%s footprint %-7s %d CTAs an SM: %6.2f us = %.2f TB/s (%.1f MB)\n", names[ki],
                       fp == 0 ? "compact" : fp == 1 ? "set" : "big", cpm, us, bytes / us * 1e-6, bytes * 1e-6);
                CK(cudaGraphExecDestroy(exec));
            }
            if (compact_m) CK(cudaFree(compact_m));
            CK(cudaFree(w));
            CK(cudaFree(ws));
        }
    }
    if (big) CK(cudaFree(big));
    return 0;
}
