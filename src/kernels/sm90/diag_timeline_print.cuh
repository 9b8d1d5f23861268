/*
 * diag_timeline_print.cuh - the host side of the opt-in launch timeline and per-item phases
 * (diag_timeline.cuh): hfp4__diag_timeline_print and hfp4__diag_phases_print (diag_timeline.h).
 * Included by fp8_fp4_gemm.cu only, because the __device__ buffers must be read from the
 * translation unit that defines them (the kernels are built without relocatable device code).
 */
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "diag_timeline.cuh"
#include "diag_timeline.h"

static int diag_last_grid; /* the grid of the last launch, 0 if it recorded nothing (fp8_fp4_gemm.cu: launch) */

#ifdef HFP4_DIAG_TIMELINE
static int diag_cmp_u64(const void *a, const void *b) {
    const unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

extern "C" int hfp4__diag_timeline_print(FILE *out) {
    static unsigned long long ts[HFP4_DIAG_MAX_CTAS][HFP4_DIAG_POINTS + 1];
    static const char *names[HFP4_DIAG_POINTS] = {"entry", "grids before done", "prefix built", "set-up barrier",
                                                  "producer's start", "consumers' start", "first item walked",
                                                  "producer's first item", "first stage's loads",
                                                  "first header posted", "first stage (producer)",
                                                  "first stage (consumer)", "first item resolved", "first chunk arrived",
                                                  "last item's sums", "exit"};
    const int grid = __atomic_load_n(&diag_last_grid, __ATOMIC_RELAXED);
    const int ctas = grid < HFP4_DIAG_MAX_CTAS ? grid : HFP4_DIAG_MAX_CTAS;
    if (ctas <= 0) return -2;
    if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpyFromSymbol(ts, hfp4_diag_ts, sizeof ts) != cudaSuccess)
        return -3;
    unsigned long long t0 = ~0ull, v[HFP4_DIAG_MAX_CTAS];
    int busy = 0, hist[8] = {0};
    for (int c = 0; c < ctas; c++) {
        if (ts[c][HFP4_DIAG_ENTRY] < t0) t0 = ts[c][HFP4_DIAG_ENTRY];
        const unsigned items = (unsigned)(ts[c][HFP4_DIAG_POINTS] & 0xFFFFFFFFu);
        busy += items > 0;
        hist[items < 7 ? items : 7]++;
    }
    fprintf(out, "timeline of the last launch: %d CTAs, %d with items; us from the first entry\n", ctas, busy);
    for (int i = 0; i < HFP4_DIAG_POINTS; i++) {
        int n = 0;
        for (int c = 0; c < ctas; c++) {
            const bool items = (ts[c][HFP4_DIAG_POINTS] & 0xFFFFFFFFu) != 0;
            const bool per_item_point = i >= HFP4_DIAG_PROD_START && i <= HFP4_DIAG_LAST_ITEM;
            if ((per_item_point && !items) || ts[c][i] < t0) continue;
            v[n++] = ts[c][i] - t0;
        }
        if (n == 0) continue;
        qsort(v, (size_t)n, sizeof v[0], diag_cmp_u64);
        fprintf(out, "  %-22s n=%4d  min %8.2f  p10 %8.2f  p50 %8.2f  p90 %8.2f  max %8.2f\n", names[i], n,
                v[0] / 1e3, v[n / 10] / 1e3, v[n / 2] / 1e3, v[n * 9 / 10] / 1e3, v[n - 1] / 1e3);
    }
    fprintf(out, "  items per CTA: 0:%d 1:%d 2:%d 3:%d 4:%d 5:%d 6:%d 7+:%d\n", hist[0], hist[1], hist[2], hist[3],
            hist[4], hist[5], hist[6], hist[7]);
    fprintf(out, "  per CTA (sm:items exit_us), in launch order:\n");
    for (int c = 0; c < ctas; c++)
        fprintf(out, "%s%u:%u %.0f%s", c % 12 == 0 ? "   " : "  ", (unsigned)(ts[c][HFP4_DIAG_POINTS] >> 32),
                (unsigned)(ts[c][HFP4_DIAG_POINTS] & 0xFFFFFFFFu),
                ts[c][HFP4_DIAG_EXIT] >= t0 ? (ts[c][HFP4_DIAG_EXIT] - t0) / 1e3 : -1.0, c % 12 == 11 ? "\n" : "");
    fprintf(out, "\n");
    return 0;
}

extern "C" int hfp4__diag_phases_print(FILE *out) {
    static const char *names[HFP4_DIAG_PHASES] = {"walk -> item", "resolved", "modes read", "first chunk converted",
                                                  "chunk loop done", "sums in absolute units", "epilogue done",
                                                  "walk start", "walk end"};
    static unsigned long long ph[HFP4_DIAG_COPIES][HFP4_DIAG_PHASES][2], copies[HFP4_DIAG_COPIES][HFP4_DIAG_PHASES][2];
    unsigned long long got[HFP4_DIAG_PHASES][2], bd[14], zero[14] = {0};
    memset(ph, 0, sizeof ph);
    /* (read and reset together, the boundary counters too: a call with out NULL starts a case afresh) */
    if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpyFromSymbol(copies, hfp4_diag_phase, sizeof copies) != cudaSuccess ||
        cudaMemcpyToSymbol(hfp4_diag_phase, ph, sizeof ph) != cudaSuccess ||
        cudaMemcpyFromSymbol(bd, hfp4_diag_boundary, sizeof bd) != cudaSuccess ||
        cudaMemcpyToSymbol(hfp4_diag_boundary, zero, sizeof zero) != cudaSuccess)
        return -3;
    memset(got, 0, sizeof got);
    for (int c = 0; c < HFP4_DIAG_COPIES; c++) /* (the CTAs' copies, diag_phase) */
        for (int k = 0; k < HFP4_DIAG_PHASES; k++) {
            got[k][0] += copies[c][k][0];
            got[k][1] += copies[c][k][1];
        }
    if (!out) return 0;
    const unsigned long long items = got[HFP4_DIAG_PH_ITEM][1];
    if (items == 0) return -2;
    fprintf(out, "per-item phases (consumer thread 0, SM cycles per item, %llu items over the launches):\n", items);
    for (int k = HFP4_DIAG_PH_RESOLVED; k <= HFP4_DIAG_PH_STORED; k++) {
        int prev = k - 1;
        while (prev > HFP4_DIAG_PH_ITEM && got[prev][1] != got[k][1]) prev--;
        if (got[k][1] == 0 || got[prev][1] != got[k][1]) {
            fprintf(out, "  %-24s reached %llu times\n", names[k], got[k][1]);
            continue;
        }
        fprintf(out, "  %-24s %9.0f  (since %s; %llu items)\n", names[k],
                (double)(got[k][0] - got[prev][0]) / (double)got[k][1], names[prev], got[k][1]);
    }
    if (got[HFP4_DIAG_PH_WALK_START][1] == got[HFP4_DIAG_PH_WALK_END][1])
        fprintf(out, "  %-24s %9.0f  (per walk step, %llu steps)\n", "walk",
                (double)(got[HFP4_DIAG_PH_WALK_END][0] - got[HFP4_DIAG_PH_WALK_START][0]) /
                    (double)got[HFP4_DIAG_PH_WALK_END][1],
                got[HFP4_DIAG_PH_WALK_END][1]);
    if (bd[0] + bd[1] > 0)
        fprintf(out, "  item starts with the first chunk carried: %llu of %llu (the next stage had landed)\n", bd[0],
                bd[0] + bd[1]);
    if (bd[3] > 0)
        fprintf(out, "  producer, an item's chunk loop done -> the next item's first copies: %.0f cycles (%llu items)\n",
                (double)bd[2] / (double)bd[3], bd[3]);
    if (bd[5] > 0)
        fprintf(out, "  producer, of those: the first stage free -> its copies: %.0f cycles (%llu items)\n",
                (double)bd[4] / (double)bd[5], bd[5]);
    if (bd[7] > 0)
        fprintf(out, "  producer, later chunks: a stage free -> its copies: %.0f cycles (%llu chunks)\n",
                (double)bd[6] / (double)bd[7], bd[7]);
    if (bd[9] > 0)
        fprintf(out, "  an item's first copies issued, from the consumers' previous chunk loop done: %.0f cycles (%llu)\n",
                (double)(long long)bd[8] / (double)bd[9], bd[9]);
    if (bd[11] > 0)
        fprintf(out, "  an item's first copies issued -> the consumers' wait for them done: %.0f cycles; that wait %.0f\n",
                (double)(long long)bd[10] / (double)bd[11], (double)(long long)bd[12] / (double)bd[13]);
    return 0;
}
#else
extern "C" int hfp4__diag_timeline_print(FILE *out) {
    (void)out;
    return -1;
}
extern "C" int hfp4__diag_phases_print(FILE *out) {
    (void)out;
    return -1;
}
#endif
