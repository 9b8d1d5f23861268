/*
 * dyn_counter.cuh - a launch's work counter in module memory (two words a slot: [0] items handed out
 * beyond gridDim.x, [1] CTAs done with it; zero at load), as the dynamic walk uses it
 * (dynamic_walk.cuh), on the slot its launcher took (dyn_slots.h).
 */
#pragma once
#include <stdint.h>

/* The next item a CTA takes after its first (its first is blockIdx.x) */
static __device__ __forceinline__ uint32_t dyn_counter_take(uint32_t *counter) {
    return gridDim.x + atomicAdd(&counter[0], 1u);
}

/* After the CTA's last take: its count; the last CTA zeroes both words, so the launch leaves the
 * counter as it found it (a next launch on the slot reads it only after this grid completes) */
static __device__ __forceinline__ void dyn_counter_done(uint32_t *counter) {
    __threadfence(); /* this CTA's takes before its count */
    if (atomicAdd(&counter[1], 1u) == gridDim.x - 1) {
        __threadfence();
        atomicExch(&counter[0], 0u);
        atomicExch(&counter[1], 0u);
    }
}
