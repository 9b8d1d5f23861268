/*
 * micro_timing.cuh - how the micro-benchmarks time a kernel: one warm-up launch (and, with
 * MICRO_WARM_MS, back-to-back launches up to the power cap), then MICRO_REPS launches between two events. launch(arg) issues one launch; the caller sets the kernel's
 * shared-memory attribute and turns milliseconds into its own figures.
 */
#pragma once
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define MICRO_REPS 5

/* The device's SM count, or 0 after a message naming the benchmark when there is no CUDA device. */
static int micro_sm_count(const char *name) {
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess || sms == 0) {
        fprintf(stderr, "%s: no CUDA device\n", name);
        return 0;
    }
    return sms;
}

typedef void (*micro_launch)(void *arg);

/* Milliseconds of MICRO_REPS launches; *err: the launches' first error (cudaSuccess if none). */
static float micro_time_ms(micro_launch launch, void *arg, cudaError_t *err) {
    launch(arg); /* warm-up */
    /* MICRO_WARM_MS=t: launch back to back for about t ms first, so that the timed launches run where
     * a long GEMM runs on the H200, at its 700 W cap (bench/RESULTS.md v36), not at the boost clock */
    const char *warm = getenv("MICRO_WARM_MS");
    const double warm_ms = warm ? atof(warm) : 0.0;
    if (warm_ms > 0.0) {
        cudaEvent_t w0, w1;
        cudaEventCreate(&w0);
        cudaEventCreate(&w1);
        cudaEventRecord(w0);
        launch(arg);
        cudaEventRecord(w1);
        cudaEventSynchronize(w1);
        float one = 1.0f;
        cudaEventElapsedTime(&one, w0, w1);
        for (int r = 0; r < (int)(warm_ms / (one > 0.01f ? one : 0.01f)); r++) launch(arg);
        cudaEventDestroy(w0);
        cudaEventDestroy(w1);
    }
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaEventRecord(e0);
    for (int r = 0; r < MICRO_REPS; r++) launch(arg);
    cudaEventRecord(e1);
    *err = cudaEventSynchronize(e1);
    if (*err == cudaSuccess) *err = cudaGetLastError(); /* (a launch refused: its time would be empty) */
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, e0, e1);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return ms;
}
