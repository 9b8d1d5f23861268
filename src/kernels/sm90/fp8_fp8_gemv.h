/*
 * fp8_fp8_gemv.h - the FP8-weight path's kernel for a few token rows (fp8_fp8_gemv.cu): D = A B^T
 * (+ C) with FP8 e4m3 A under 1x128 scales and FP8 e4m3 B [n, k] under 128 x 128 block scales, dense
 * with m <= HFP4_FP8_GEMV_MAX_M, or masked (B [G, n, k], a few rows a group). hfp4__sm90_fp8_weights_gemm
 * checks the problem and picks it.
 */
#ifndef HFP4_SM90_FP8_FP8_GEMV_H
#define HFP4_SM90_FP8_FP8_GEMV_H

#include <cuda_runtime.h>

#include "hfp4.h"
#include "sm90_fp8_weights_plan.h" /* (its limits, HFP4_FP8_GEMV_*) */

/* Launches the kernel for `problem` on `stream` with `warps_per_rows` warps a 16-row group (1, 2, 4
 * or 8; num_sms: the device's): b.dtype FP8_E4M3, dense with m <= HFP4_FP8_GEMV_MAX_M, or masked with
 * num_groups <= HFP4_FP8_GEMV_MAX_GROUPS (any masked_m: a group's rows go 8 at a time). The plan
 * (sm90_fp8_weights_plan.c) picks it and its warps; the caller has checked all the tile kernel needs
 * (k % 128 == 0, 16-byte aligned rows, pointers and group strides). */
hfp4_status hfp4__sm90_fp8_gemv(const char *fn, const hfp4_gemm_problem *problem, int warps_per_rows, int num_sms,
                                cudaStream_t stream);

#endif
