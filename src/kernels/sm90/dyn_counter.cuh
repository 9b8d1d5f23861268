/*
 * dyn_counter.cuh - a launch's work counter in module memory (two words a slot: [0] items handed out
 * beyond gridDim.x, [1] CTAs done with it; zero at load), as both dynamic walks use it (the FP8 x FP4
 * kernel's, dynamic_walk.cuh, and the FP8 x FP8 kernel's tile order, fw_dynamic_tiles.cuh), each on
 * its own module's array and the slot its launcher took (dyn_slots.h).
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
