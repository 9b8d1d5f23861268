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

/* token rows: the kernel's mma has 8 columns, two sets of them; at 32 rows (four sets: 206 registers,
 * one CTA an SM) it ran 28 us at 32 x 7168 x 2048 against the tile kernel's 12 (RESULTS v46) */
#define HFP4_FP8_GEMV_MAX_M 16

#define HFP4_FP8_GEMV_MAX_GROUPS 1024 /* masked: the live-group list in shared memory */

/* Launches the kernel for `problem` on `stream` (num_sms: the device's): b.dtype FP8_E4M3, dense
 * with m <= HFP4_FP8_GEMV_MAX_M (the caller picks it for m <= 8, and m <= 16 where n < 8192), or
 * masked with num_groups <= HFP4_FP8_GEMV_MAX_GROUPS (any masked_m: a group's rows go 8 at a time;
 * opt-in, HFP4_SM90_FP8_GEMV_MASKED=1: faster only with few live groups, RESULTS v47), checked by the caller for all the
 * tile kernel needs (k % 128 == 0, 16-byte aligned rows, pointers and group strides). */
hfp4_status hfp4__sm90_fp8_gemv(const char *fn, const hfp4_gemm_problem *problem, int num_sms, cudaStream_t stream);

#endif
