/*
 * fp8_weights_bound.h - the bound an FP8 x FP8 GEMM's result must hold against the FP32 reference
 * (docs/TESTING.md), without the test harness, so that the GPU tests (fp8_weights_check.h) and
 * `hfp4 verify` (tools/verify_fp8.cu) check by one rule:
 *   |d - r| <= eps_out |r| + 2^-10 sum_k |a_k b_k| (scaled operands) + 1e-6 rms(R),
 * eps_out 4e-3 for BF16 D and 1e-5 for FP32 (the 2^-10 term: the tensor cores' 128-K accumulation).
 */
#ifndef HFP4_TEST_FP8_WEIGHTS_BOUND_H
#define HFP4_TEST_FP8_WEIGHTS_BOUND_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "hfp4.h"

/* Whether `got` (D of element size esz: 4 FP32, 2 BF16) is within the bound of the reference
 * `want`, whose sum |a b| is l1 and the reference's rms `rms`; false for NaN */
static inline int fw_within_bound(double got, double want, double l1, double rms, int esz) {
    const double eps_out = esz == 4 ? 1e-5 : 4e-3;
    return fabs(got - want) <= eps_out * fabs(want) + ldexp(l1, -10) + 1e-6 * rms;
}

/* The bound's sum_k |a_k b_k| for each element of the host reference problem p (FP8 A and B of
 * a_bytes and b_bytes): the reference on the operands with their sign bits cleared (the scales are
 * positive), without C, into l1 (FP32, laid out as p's D; elements it does not write keep their
 * value). HFP4_OK, or the reference's status (or HFP4_ERR_INVALID_ARGUMENT without memory). */
static inline hfp4_status fw_abs_products(const hfp4_gemm_problem *p, int64_t a_bytes, int64_t b_bytes, float *l1) {
    uint8_t *abs_a = (uint8_t *)malloc(a_bytes), *abs_b = (uint8_t *)malloc(b_bytes);
    hfp4_status st = HFP4_ERR_INVALID_ARGUMENT;
    if (abs_a && abs_b) {
        for (int64_t i = 0; i < a_bytes; i++) abs_a[i] = ((const uint8_t *)p->a.data)[i] & 0x7F;
        for (int64_t i = 0; i < b_bytes; i++) abs_b[i] = ((const uint8_t *)p->b.data)[i] & 0x7F;
        hfp4_gemm_problem pabs = *p;
        pabs.a.data = abs_a;
        pabs.b.data = abs_b;
        pabs.d.data = l1;
        pabs.d.dtype = HFP4_DTYPE_FP32;
        pabs.d.c = NULL;
        st = hfp4_ref_gemm(&pabs, 0);
    }
    free(abs_a);
    free(abs_b);
    return st;
}

#endif
