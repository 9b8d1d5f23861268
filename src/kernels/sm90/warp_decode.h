/*
 * warp_decode.h - the warp path of hfp4_gemm for groups of a few rows (decode; when it runs:
 * hfp4__sm90_warp_wanted, sm90_plan.h): one warpgroup per 64-row weight tile with the repacked FP4
 * weights loaded straight into registers (warp_decode.cu): no TMA pipeline, no producer warps, work
 * spread over every SM in 64-row tiles.
 */
#ifndef HFP4_SM90_WARP_DECODE_H
#define HFP4_SM90_WARP_DECODE_H

#include <cuda_runtime.h>

#include "../../plan/sm90_plan.h"
#include "../../runtime/cuda_runtime.h"

/* Runs the planned problem on the warp path (the plan chose it: plan->warp_decode, sm90_plan.h).
 * *taken = 0 (and HFP4_OK) when it leaves the problem to the main kernel: a device whose shared
 * memory or registers cannot hold a CTA of it, or an automatic choice (plan->warp_decode 2) whose
 * units are too many for a split of 4 or 8 on this device. */
hfp4_status hfp4__sm90_warp_decode(const char *fn, const hfp4_gemm_problem *problem, const hfp4_sm90_plan *plan,
                                   const hfp4_current_device *dev, cudaStream_t stream, int *taken);

/* (tests) Makes every K-split launch split `parts` ways (a power of two up to its cluster size)
 * whatever its units, and caps its grid at max_ctas (rounded down to whole clusters), so that a
 * walker gets several units and a cluster several leaders; 0, 0 gives both back. */
void hfp4__sm90_warp_split_test(int parts, int max_ctas);

#endif
