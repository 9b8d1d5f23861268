/*
 * moe_internal.h - what the MoE glue's host side (moe.c: checks, the CPU forms) shares with its GPU
 * side (moe_gpu.cu; src/runtime/no_cuda.c in a build without CUDA): the launchers the _gpu entry
 * points call once their arguments have passed the same checks as the CPU forms'.
 */
#ifndef HFP4_MOE_INTERNAL_H
#define HFP4_MOE_INTERNAL_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The GPU form's shared-memory counters cap the experts (hfp4_moe_route_gpu). */
#define HFP4_MOE_GPU_MAX_EXPERTS 4096

hfp4_status hfp4__moe_route_launch(const char *fn, const void *ids, int ids_int64, int64_t routed_rows,
                                   int32_t num_experts, int32_t alignment, int32_t *row_pos, int32_t *layout,
                                   int64_t layout_rows, hfp4_stream stream);
hfp4_status hfp4__moe_quantize_rows_launch(const char *fn, const void *x, hfp4_dtype x_dtype, int64_t k,
                                           int64_t ldx, int32_t row_div, int64_t x_rows, const int32_t *row_pos,
                                           int64_t routed_rows, int32_t gran_k, uint8_t *a, int64_t lda, float *sf,
                                           int64_t layout_rows, hfp4_stream stream);
hfp4_status hfp4__moe_swiglu_quantize_rows_launch(const char *fn, const void *y, int64_t ldy, int64_t n,
                                                  hfp4_gate_up gate_up, float limit,
                                                  const int32_t *row_pos, int64_t routed_rows, int32_t gran_k,
                                                  uint8_t *a, int64_t lda, float *sf, int64_t layout_rows,
                                                  hfp4_stream stream);
hfp4_status hfp4__moe_combine_launch(const char *fn, const void *y, int64_t ldy, int64_t layout_rows, int64_t n,
                                     const int32_t *row_pos, const void *weights, hfp4_dtype weights_dtype,
                                     int64_t tokens, int32_t top_k, void *out, hfp4_dtype out_dtype, int64_t ldo,
                                     hfp4_stream stream);

#ifdef __cplusplus
}
#endif

#endif /* HFP4_MOE_INTERNAL_H */
