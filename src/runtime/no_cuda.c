/*
 * no_cuda.c - the GPU entry points for a build without the CUDA toolkit (the Makefile compiles
 * this only when nvcc is absent). Every call answers NO_DEVICE after validating its arguments, so
 * callers see the same INVALID_ARGUMENT / NO_DEVICE distinction as on a GPU-less machine.
 */
#include <string.h>

#include "internal.h"
#include "../layout/sf_internal.h"
#include "../moe/moe_internal.h"
#include "../quant/fp4_to_fp8.h"
#include "../weights/repack_sm90.h"

hfp4_status hfp4_device_query(int device, hfp4_device_info *info) {
    HFP4_CHECK_ARG(info != NULL, "hfp4_device_query: info is NULL");
    return hfp4__fail(HFP4_ERR_NO_DEVICE, "hfp4_device_query: device %d: this hfp4 was built without CUDA", device);
}

hfp4_status hfp4_gemm_supported(const hfp4_gemm_problem *problem) {
    HFP4_TRY(hfp4_check_problem(problem, 1));
    return hfp4__fail(HFP4_ERR_NO_DEVICE, "hfp4_gemm: this hfp4 was built without CUDA");
}

hfp4_status hfp4_gemm(const hfp4_gemm_problem *problem, hfp4_stream stream) {
    (void)stream;
    return hfp4_gemm_supported(problem);
}

hfp4_status hfp4_gemm_flags(const hfp4_gemm_problem *problem, uint32_t flags, hfp4_stream stream) {
    (void)stream;
    HFP4_CHECK_ARG((flags & ~(uint32_t)HFP4_GEMM_OVERLAP_PREVIOUS) == 0,
                   "hfp4_gemm_flags: flags = 0x%x has bits hfp4.h does not define", (unsigned)flags);
    return hfp4_gemm_supported(problem);
}

hfp4_status hfp4_repack_sm90(const hfp4_matrix *w, int32_t num_groups, hfp4_dtype scale_dtype, void *dst,
                             size_t dst_bytes, hfp4_matrix *out, hfp4_stream stream) {
    (void)stream;
    hfp4_sm90_geometry geo;
    HFP4_TRY(hfp4__sm90_check_repack_args("hfp4_repack_sm90", w, num_groups, scale_dtype, dst, dst_bytes, out, &geo));
    return hfp4__fail(HFP4_ERR_NO_DEVICE, "hfp4_repack_sm90: this hfp4 was built without CUDA");
}

hfp4_status hfp4__sf_execute_gpu(const char *fn, const hfp4__sf_plan *plan, const hfp4_sf_options *opts,
                                 hfp4_stream stream) {
    (void)plan;
    (void)opts;
    (void)stream;
    return hfp4__fail(HFP4_ERR_NO_DEVICE, "%s: this hfp4 was built without CUDA", fn);
}

hfp4_status hfp4__moe_route_launch(const char *fn, const void *ids, int ids_int64, int64_t routed_rows,
                                   int32_t num_experts, int32_t alignment, int32_t *row_pos, int32_t *layout,
                                   int64_t layout_rows, hfp4_stream stream) {
    (void)ids, (void)ids_int64, (void)routed_rows, (void)num_experts, (void)alignment, (void)row_pos, (void)layout;
    (void)layout_rows, (void)stream;
    return hfp4__fail(HFP4_ERR_NO_DEVICE, "%s: this hfp4 was built without CUDA", fn);
}

hfp4_status hfp4__moe_quantize_rows_launch(const char *fn, const void *x, hfp4_dtype x_dtype, int64_t k,
                                           int64_t ldx, int32_t row_div, int64_t x_rows, const int32_t *row_pos,
                                           int64_t routed_rows, int32_t gran_k, uint8_t *a, int64_t lda, float *sf,
                                           int64_t layout_rows, hfp4_stream stream) {
    (void)x, (void)x_dtype, (void)k, (void)ldx, (void)row_div, (void)x_rows, (void)row_pos, (void)routed_rows;
    (void)gran_k, (void)a, (void)lda, (void)sf, (void)layout_rows, (void)stream;
    return hfp4__fail(HFP4_ERR_NO_DEVICE, "%s: this hfp4 was built without CUDA", fn);
}

hfp4_status hfp4__moe_swiglu_quantize_rows_launch(const char *fn, const void *y, int64_t ldy, int64_t n,
                                                  hfp4_gate_up gate_up, float limit,
                                                  const int32_t *row_pos, int64_t routed_rows, int32_t gran_k,
                                                  uint8_t *a, int64_t lda, float *sf, int64_t layout_rows,
                                                  hfp4_stream stream) {
    (void)y, (void)ldy, (void)n, (void)gate_up, (void)limit, (void)row_pos, (void)routed_rows, (void)gran_k, (void)a, (void)lda;
    (void)sf, (void)layout_rows, (void)stream;
    return hfp4__fail(HFP4_ERR_NO_DEVICE, "%s: this hfp4 was built without CUDA", fn);
}

hfp4_status hfp4__moe_combine_launch(const char *fn, const void *y, int64_t ldy, int64_t layout_rows, int64_t n,
                                     const int32_t *row_pos, const void *weights, hfp4_dtype weights_dtype,
                                     int64_t tokens, int32_t top_k, void *out, hfp4_dtype out_dtype, int64_t ldo,
                                     hfp4_stream stream) {
    (void)y, (void)ldy, (void)layout_rows, (void)n, (void)row_pos, (void)weights, (void)weights_dtype, (void)tokens;
    (void)top_k, (void)out, (void)out_dtype, (void)ldo, (void)stream;
    return hfp4__fail(HFP4_ERR_NO_DEVICE, "%s: this hfp4 was built without CUDA", fn);
}

hfp4_status hfp4__fp4_to_fp8_launch(const char *fn, const hfp4_matrix *w, uint8_t *q, int64_t ldq,
                                    const hfp4_scales *sf, int32_t *inexact_blocks, hfp4_stream stream) {
    (void)w, (void)q, (void)ldq, (void)sf, (void)inexact_blocks, (void)stream;
    return hfp4__fail(HFP4_ERR_NO_DEVICE, "%s: this hfp4 was built without CUDA", fn);
}
