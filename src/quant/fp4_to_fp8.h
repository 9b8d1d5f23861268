/*
 * fp4_to_fp8.h - what the host and GPU forms of hfp4_fp4_weights_to_fp8 share: the argument
 * checks and the rule that makes a 128 x 128 block's FP8 form exact (docs/FP8_ROUTE.md).
 */
#ifndef HFP4_FP4_TO_FP8_H
#define HFP4_FP4_TO_FP8_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A block's scales may span this many binades: with the block scale 2^(e_max - 6), a value c 2^e
 * is e4m3's c 2^(e - e_max + 6); its largest, 6 x 2^6 = 384, is below e4m3's 448, and its smallest
 * nonzero steps at e = e_max - 14 are 0.5 x 2^-8 = 2^-9 (e4m3's least subnormal) and 1.5 x 2^-8 =
 * 3 x 2^-9: every e2m1 value times 2^d is an e4m3 value for -8 <= d <= 6. */
#define HFP4_FP8_BLOCK_SPAN 14
#define HFP4_FP8_BLOCK_TOP 6 /* d of the block's largest exponent */
#define HFP4_FP8_BLOCK_BOTTOM (HFP4_FP8_BLOCK_TOP - HFP4_FP8_BLOCK_SPAN) /* the least d: -8 */

/* Whether a block whose scales' exponents span `span` binades (max - min), under the block scale
 * 2^base (base = max - HFP4_FP8_BLOCK_TOP), has no exact FP8 form: a span wider than FP8 holds, or a
 * block scale outside UE8M0's range (the rule of both forms) */
#define HFP4_FP8_BLOCK_REFUSED(span, base) ((span) > HFP4_FP8_BLOCK_SPAN || (base) < -127 || (base) > 127)

/* Validates the arguments of hfp4_fp4_weights_to_fp8(_gpu) (fn names the caller in messages):
 * INVALID_ARGUMENT for what no form accepts, UNSUPPORTED for k not a multiple of 128. */
hfp4_status hfp4__fp4_to_fp8_check(const char *fn, const hfp4_matrix *w, const uint8_t *q, int64_t ldq,
                                   const hfp4_scales *sf);

/* The GPU launch (fp4_to_fp8_gpu.cu; no_cuda.c answers NO_DEVICE), arguments checked */
hfp4_status hfp4__fp4_to_fp8_launch(const char *fn, const hfp4_matrix *w, uint8_t *q, int64_t ldq,
                                    const hfp4_scales *sf, int32_t *inexact_blocks, hfp4_stream stream);

#ifdef __cplusplus
}
#endif

#endif
