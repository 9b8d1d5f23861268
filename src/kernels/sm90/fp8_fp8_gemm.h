/*
 * fp8_fp8_gemm.h - hfp4_gemm's path for FP8 weights (b.dtype FP8_E4M3 with 128 x 128 block scales,
 * DeepGEMM's fp8_gemm_nt, m_grouped_fp8_gemm_nt_contiguous and _masked on SM90): dense, m-grouped
 * contiguous (segments aligned to a multiple of 128) and masked; HFP4_SM90_FP8_WEIGHTS=0 switches it
 * off (FP8 weights are then UNSUPPORTED, so callers fall back). docs/FP8_ROUTE.md.
 */
#ifndef HFP4_SM90_FP8_FP8_GEMM_H
#define HFP4_SM90_FP8_FP8_GEMM_H

#include <cuda_runtime.h>

#include "hfp4.h"

/* Checks `problem` (b.dtype FP8_E4M3) for this path and, with `launch`, runs it on `stream`.
 * UNSUPPORTED (with the reason) for what the path does not cover; what hfp4_check_problem rejects
 * stays INVALID_ARGUMENT. */
hfp4_status hfp4__sm90_fp8_weights_gemm(const char *fn, const hfp4_gemm_problem *problem, cudaStream_t stream,
                                        int launch);

#endif
