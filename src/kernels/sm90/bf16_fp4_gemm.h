/*
 * bf16_fp4_gemm.h - the BF16 path of hfp4_gemm (bf16_fp4_gemm.cu): prefill tiles with 1x32 UE8M0
 * activation scales through BF16 tensor cores, opt-in (HFP4_SM90_BF16=1).
 */
#ifndef HFP4_SM90_BF16_FP4_GEMM_H
#define HFP4_SM90_BF16_FP4_GEMM_H

#include <cuda.h>
#include <cuda_runtime.h>

#include "../../plan/sm90_plan.h"
#include "../../runtime/cuda_runtime.h"

/* Whether the plan takes the BF16 path: HFP4_SM90_BF16=1, the 128-token tile, UE8M0 weight scales
 * and 1x32 UE8M0 activation scales (bytes or packed words). */
int hfp4__sm90_bf16_wanted(const hfp4_sm90_plan *plan);

/* (tests) Turns the BF16 path on or off for this process, whatever HFP4_SM90_BF16 says. */
void hfp4__sm90_bf16_set(int on);

#ifndef HFP4_SM90_BF16_MAX_TEMP
#define HFP4_SM90_BF16_MAX_TEMP (2ll << 30) /* bytes of the BF16 copy of A beyond which the FP8 path runs */
#endif

/* The BF16 path for a planned problem: the activations as scaled BF16 in a stream-ordered temporary
 * (cudaMallocAsync, freed on the stream after the GEMM), then the GEMM; d_map as hfp4_gemm made it.
 * *taken = 0 (and HFP4_OK) when it leaves the problem to the FP8 path: a temporary above
 * HFP4_SM90_BF16_MAX_TEMP or that cannot be allocated, or a stream being captured. */
hfp4_status hfp4__sm90_bf16_gemm(const char *fn, const hfp4_gemm_problem *problem, const hfp4_sm90_plan *plan,
                                 const hfp4_current_device *dev, const CUtensorMap *d_map, cudaStream_t stream,
                                 int *taken);

#endif
