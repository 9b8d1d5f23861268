/*
 * no_cuda.c - the GPU entry points for a build without the CUDA toolkit (the Makefile compiles
 * this only when nvcc is absent). Every call answers NO_DEVICE after validating its arguments, so
 * callers see the same INVALID_ARGUMENT / NO_DEVICE distinction as on a GPU-less machine.
 */
#include <string.h>

#include "internal.h"
#include "../layout/sf_internal.h"
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
