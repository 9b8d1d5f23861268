/*
 * warp_decode.h - the warp path of hfp4_gemm for groups of a few rows (decode), opt-in: one
 * warpgroup per 64-row weight tile with the repacked FP4 weights loaded straight into registers
 * (warp_decode.cu): no TMA pipeline, no producer warps, work spread over every SM in 64-row tiles.
 */
#ifndef HFP4_SM90_WARP_DECODE_H
#define HFP4_SM90_WARP_DECODE_H

#include <cuda_runtime.h>

#include "../../plan/sm90_plan.h"
#include "../../runtime/cuda_runtime.h"

/* Groups the warp path serves (its live-tile prefix lives in shared memory, 4 bytes a group). */
#define HFP4_SM90_WARP_MAX_GROUPS 4096

/* Whether the plan takes the warp path: the switch (HFP4_SM90_WARP_DECODE=1, read once;
 * hfp4__sm90_warp_decode_set overrides it), the masked layout or a dense GEMM, rows per group (the
 * expected_m hint, or m for dense) at most 8, K at most 16384 and its shared memory within 72 KB.
 * Off by default: faster than the main kernel only at T = 1 (bench/RESULTS.md v16). */
int hfp4__sm90_warp_decode_wanted(const hfp4_gemm_problem *problem, const hfp4_sm90_plan *plan);

/* (tests, bench) Turns the warp path on (1), off (0) or back to its default (-1) for this process. */
void hfp4__sm90_warp_decode_set(int on);

/* Runs the planned problem on the warp path. */
hfp4_status hfp4__sm90_warp_decode(const char *fn, const hfp4_gemm_problem *problem, const hfp4_sm90_plan *plan,
                                   const hfp4_current_device *dev, cudaStream_t stream);

#endif
