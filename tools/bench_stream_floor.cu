/*
 * bench_stream_floor.cu - the floor of a masked decode launch under the bench's own measurement:
 * one kernel that reads masked_m, then reads exactly the weight and weight-scale bytes of the
 * experts it names once each, and does nothing else (no activations, no arithmetic beyond an xor,
 * no stores), captured and replayed as the GEMM rows' graphs are (the same programmatic dependent
 * launch, the same L2 flush or weight-set alternation, the same event pair).
 *
 * Why: at T = 1 the GEMM moves 25-75 MB in a few microseconds, and the row's time is mostly what is
 * not bytes: the graph launch, the masked_m read every launch depends on, DRAM latency, the ramp.
 * floor_us (bytes / copy rate) leaves those out; this kernel keeps them and drops only the GEMM's
 * own work. So the gap between a GEMM row and this floor is the kernel's to close; the gap between
 * this floor and floor_us no GEMM kernel launched this way can close.
 */
#include "bench_common.h"
#include "stream_floor_kernel.cuh"

typedef struct floor_launch {
    const bench_ctx *c;
    const int32_t *masked_m;
    int32_t groups;
    const hfp4_matrix *b;
    unsigned *sink;
} floor_launch;

static int launch_floor(void *arg, cudaStream_t s) {
    const floor_launch *f = (const floor_launch *)arg;
    const int64_t n = f->b->rows, k = f->b->cols;
    /* the repacked container (sm90_layout.h): an expert's weights n x k / 2 bytes, its scales one
     * 4-byte word per row and 128-K chunk (the bench's shapes have n and k multiples of 128) */
    const uint32_t w_vec = (uint32_t)(n * k / 2 / 16), ws_vec = (uint32_t)(n * (k / 128) * 4 / 16);
    return BENCH_CUDA(launch_stream_floor((unsigned)(2 * f->c->num_sms), s, f->masked_m, f->groups,
                                          (const uint4 *)f->b->data, w_vec, (const uint4 *)f->b->scales.data, ws_vec,
                                          f->sink))
               ? 0
               : -1;
}

int bench_stream_floor(bench_ctx *c, const char *name, const char *layout, int64_t tokens, const int32_t *masked_m,
                       int32_t groups, const hfp4_matrix *const *b, int nb, int nsets, double weight_bytes,
                       double gemm_bytes, double gemm_us, double gemm_warm_us) {
    if (nb < 1 || nb > 2) return -1;
    if (groups > FLOOR_MAX_GROUPS) {
        if (!c->json)
            printf("%-12s %-8s %s T=%lld: not measured (%d groups; the floor kernel lists at most %d)\n", "stream_floor",
                   layout, name, (long long)tokens, (int)groups, FLOOR_MAX_GROUPS);
        return 0;
    }
    unsigned *sink = NULL;
    cudaGraphExec_t exec[2] = {NULL, NULL};
    floor_launch fl[2][2];
    int rc = -1;
    if (!BENCH_CUDA(cudaMalloc(&sink, sizeof(unsigned)))) return -1;
    for (int s = 0; s < nsets; s++) {
        void *args[2];
        for (int i = 0; i < nb; i++) {
            fl[s][i].c = c;
            fl[s][i].masked_m = masked_m;
            fl[s][i].groups = groups;
            fl[s][i].b = b[s * nb + i];
            fl[s][i].sink = sink;
            args[i] = &fl[s][i];
        }
        if (bench_capture(c, launch_floor, args, nb, &exec[s], NULL) != 0) goto done;
    }
    {
        const int alternate = bench_alternate_sets(c, nsets, weight_bytes);
        double us = 0;
        if (bench_time_graphs(c, exec, alternate ? 2 : 1, !alternate, NULL, &us) != 0) goto done;
        const double tbps = gemm_bytes / us * 1e-6;
        if (c->json)
            printf("{\"op\": \"stream_floor\", \"layout\": \"%s\", \"name\": \"%s\", \"tokens\": %lld, \"kernels\": %d, "
                   "\"us\": %.2f, \"tbps\": %.3f, \"gemm_us\": %.2f, \"floor_us\": %.2f}\n",
                   layout, name, (long long)tokens, nb, us, tbps, gemm_us, bench_floor_us(c, gemm_bytes));
        else
            printf("%-12s %-8s %s T=%lld: reading the hit experts' weights and scales only: %6.2f us = %.2f TB/s of "
                   "the GEMM's bytes (GEMM %.2f us, bytes / copy rate %.2f us)\n",
                   "stream_floor", layout, name, (long long)tokens, us, tbps, gemm_us, bench_floor_us(c, gemm_bytes));
        fflush(stdout);
        /* its warm start too, where the GEMM's was timed (bench_graph.cu: print_warm_start) */
        if (gemm_warm_us > 0 && nsets == 2 && !alternate) {
            double wus = 0;
            if (bench_time_graphs(c, exec, 1, 1, exec[1], &wus) != 0) goto done;
            if (c->json)
                printf("{\"op\": \"stream_floor_warm_start\", \"layout\": \"%s\", \"name\": \"%s\", \"tokens\": %lld, "
                       "\"kernels\": %d, \"us\": %.2f, \"tbps\": %.3f, \"gemm_us\": %.2f}\n",
                       layout, name, (long long)tokens, nb, wus, gemm_bytes / wus * 1e-6, gemm_warm_us);
            else
                printf("%-12s %-8s %s T=%lld: the same, warm start: %6.2f us = %.2f TB/s (GEMM %.2f us)\n",
                       "stream_floor", layout, name, (long long)tokens, wus, gemm_bytes / wus * 1e-6, gemm_warm_us);
        }
        fflush(stdout);
    }
    rc = 0;
done:
    for (int s = 0; s < 2; s++)
        if (exec[s]) (void)BENCH_CUDA(cudaGraphExecDestroy(exec[s]));
    (void)BENCH_CUDA(cudaFree(sink));
    return rc;
}
