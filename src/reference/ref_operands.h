/*
 * ref_operands.h - the CPU reference's exact operand decoding and output rounding.
 *
 * The reference is the ground truth, so every operand value is formed exactly as
 * code value x scale in double, and each output is rounded exactly once to D's dtype. The GEMM
 * loop (gemm_ref.c) only schedules rows and accumulates; everything about formats is here.
 */
#ifndef HFP4_REF_OPERANDS_H
#define HFP4_REF_OPERANDS_H

#include "internal.h"

/* Decoded values of every FP8 byte and FP4 nibble, built once per call (no global state). */
typedef struct hfp4__ref_tables {
    double fp8[256];
    double fp4[16];
    int32_t num_groups; /* groups of B: the SM90 repacked layout's geometry depends on it */
} hfp4__ref_tables;

void hfp4__ref_tables_init(hfp4__ref_tables *t);

/* Row `row` of group `group` of an FP8, BF16 or packed-FP4 operand, K elements, dequantized into
 * out[0..k) as (double)code_value * (double)scale. The matrix was validated by hfp4_check_problem. */
void hfp4__ref_decode_row(const hfp4__ref_tables *t, const hfp4_matrix *x, int64_t group, int64_t row, int64_t k,
                          double *out);

/* The value of element `index` of C (D's dtype: BF16 or FP32), exactly. */
double hfp4__ref_load_c(const void *c, hfp4_dtype dtype, int64_t index);

/* Rounds `value` once to D's dtype (round to nearest even) and stores it at element `index`. */
void hfp4__ref_store_d(void *d, hfp4_dtype dtype, int64_t index, double value);

#endif
