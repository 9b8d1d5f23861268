/*
 * warp_decode_config.cuh - the warp path's (warp_decode.cu) shape constants, its opt-in launch
 * timeline stamps, and wd_operands, what it reads besides the main kernel's parameters.
 */
#pragma once
#include <stdint.h>

#include "fp8_fp4_gemm_params.h"
#include "../../plan/sm90_plan.h" /* HFP4_SM90_WARP_TOKENS, HFP4_SM90_WARP_MAX_K */

#define WD_THREADS 128   /* one warpgroup: one 64-row weight tile                                 */
#ifndef WD_MAX_CTAS_PER_SM
#define WD_MAX_CTAS_PER_SM 3
#endif
#define WD_TOKENS HFP4_SM90_WARP_TOKENS /* tokens per unit (wgmma N); the limits are the plan's (sm90_plan.h) */
#define WD_MAX_K HFP4_SM90_WARP_MAX_K

/* (make a build with -DHFP4_WD_DIAG to print one launch's timeline: globaltimer stamps of a few CTAs) */
#ifdef HFP4_WD_DIAG
#include <stdio.h>
__device__ unsigned wd_diag_launch;
static __device__ __forceinline__ uint64_t wd_now(void) {
    uint64_t t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}
#define WD_STAMP(var) const uint64_t var = wd_now()
#else
#define WD_STAMP(var)
#endif

/* What the warp path reads besides the main kernel's parameters: A itself (the main kernel reads it
 * through a tensor map). */
typedef struct wd_operands {
    const uint8_t *a;
    int64_t a_ld, a_stride_group; /* bytes */
    int32_t groups;               /* masked: num_groups; dense: 1 */
    int32_t tiles;                /* 64-row tiles holding real rows: ceil(n / 64) */
    int32_t kgroups;              /* activation-scale k-groups staged per unit: chunks (1x128) or 4 x chunks (1x32) */
    uint32_t act_bytes;           /* shared memory: activations (chunks x 1 KB), their scales, the weight
                                     scales (scale_bytes), the chunk modes, the prefix, the K-split's
                                     slots and barriers                                                */
    uint32_t scale_bytes;
    int32_t split;                /* the launch's cluster size: 1 (no cluster), 2, 4 or 8 (K-split below) */
    int32_t parts;                /* (tests) CTAs a unit, whatever the units: 0 the kernel decides */
} wd_operands;
