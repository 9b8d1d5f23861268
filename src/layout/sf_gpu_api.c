/*
 * sf_gpu_api.c - the *_gpu entry points of the SF layout toolkit: the same planning and binding as
 * the host calls (so both accept and reject exactly the same requests), then a launch through
 * hfp4__sf_execute_gpu (sf_gpu.cu; src/runtime/no_cuda.c in a build without CUDA).
 */
#include "sf_internal.h"

static hfp4_status run_gpu(const char *fn, hfp4__sf_plan *plan, const hfp4_sf_options *opts, void *dst,
                           size_t dst_bytes, hfp4_sf_tensor *out, hfp4_stream stream) {
    HFP4_CHECK_ARG(out != NULL, "%s: out is NULL", fn);
    HFP4_TRY(hfp4__sf_check_options(fn, opts));
    HFP4_TRY(hfp4__sf_bind(fn, "dst", plan, dst, dst_bytes, NULL, 0));
    HFP4_TRY(hfp4__sf_execute_gpu(fn, plan, opts, stream));
    *out = plan->out;
    return HFP4_OK;
}

hfp4_status hfp4_sf_get_mn_major_tma_aligned_tensor_gpu(const hfp4_sf_tensor *sf, const hfp4_sf_options *opts,
                                                        void *dst, size_t dst_bytes, hfp4_sf_tensor *out,
                                                        hfp4_stream stream) {
    const char *fn = "hfp4_sf_get_mn_major_tma_aligned_tensor_gpu";
    hfp4__sf_plan plan;
    HFP4_TRY(hfp4__sf_plan_mn_major(fn, sf, &plan));
    return run_gpu(fn, &plan, opts, dst, dst_bytes, out, stream);
}

hfp4_status hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_gpu(const hfp4_sf_tensor *sf, int64_t mn,
                                                                     int32_t gran_mn, const hfp4_sf_psum *psum,
                                                                     const hfp4_sf_options *opts, void *dst,
                                                                     size_t dst_bytes, hfp4_sf_tensor *out,
                                                                     hfp4_stream stream) {
    const char *fn = "hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_gpu";
    hfp4__sf_plan plan;
    HFP4_TRY(hfp4__sf_plan_pack(fn, sf, mn, gran_mn, psum, &plan));
    return run_gpu(fn, &plan, opts, dst, dst_bytes, out, stream);
}

hfp4_status hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_gpu(const hfp4_sf_tensor *sf,
                                                                               const hfp4_sf_k_groups *groups,
                                                                               const hfp4_sf_options *opts, void *dst,
                                                                               size_t dst_bytes, hfp4_sf_tensor *out,
                                                                               hfp4_stream stream) {
    const char *fn = "hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_gpu";
    hfp4__sf_plan plan;
    HFP4_TRY(hfp4__sf_plan_k_grouped(fn, sf, groups, &plan));
    return run_gpu(fn, &plan, opts, dst, dst_bytes, out, stream);
}

hfp4_status hfp4_sf_transpose_for_utccp_gpu(const hfp4_sf_tensor *sf, const hfp4_sf_options *opts, void *dst,
                                            size_t dst_bytes, hfp4_sf_tensor *out, hfp4_stream stream) {
    const char *fn = "hfp4_sf_transpose_for_utccp_gpu";
    hfp4__sf_plan plan;
    HFP4_TRY(hfp4__sf_plan_utccp(fn, sf, &plan));
    return run_gpu(fn, &plan, opts, dst, dst_bytes, out, stream);
}

hfp4_status hfp4_sf_transform_into_required_layout_gpu(const hfp4_sf_transform_request *req,
                                                       const hfp4_sf_options *opts, void *dst, size_t dst_bytes,
                                                       hfp4_sf_tensor *out, hfp4_stream stream) {
    const char *fn = "hfp4_sf_transform_into_required_layout_gpu";
    hfp4__sf_plan plan;
    HFP4_TRY(hfp4__sf_plan_transform(fn, req, &plan));
    return run_gpu(fn, &plan, opts, dst, dst_bytes, out, stream);
}

hfp4_status hfp4_sf_transform_pair_into_required_layout_gpu(const hfp4_sf_pair_request *req,
                                                            const hfp4_sf_options *opts, void *dst_a,
                                                            size_t dst_a_bytes, void *dst_b, size_t dst_b_bytes,
                                                            hfp4_sf_pair_result *res, hfp4_stream stream) {
    const char *fn = "hfp4_sf_transform_pair_into_required_layout_gpu";
    hfp4__sf_plan pa, pb;
    HFP4_CHECK_ARG(res != NULL, "%s: res is NULL", fn);
    hfp4_sf_pair_result r;
    HFP4_TRY(hfp4__sf_plan_pair(fn, req, &pa, &pb, &r));
    HFP4_TRY(hfp4__sf_check_options(fn, opts));
    HFP4_TRY(hfp4__sf_bind_pair(fn, &pa, &pb, dst_a, dst_a_bytes, dst_b, dst_b_bytes));
    HFP4_TRY(hfp4__sf_execute_gpu("hfp4_sf_transform_pair_into_required_layout_gpu (sfa)", &pa, opts, stream));
    HFP4_TRY(hfp4__sf_execute_gpu("hfp4_sf_transform_pair_into_required_layout_gpu (sfb)", &pb, opts, stream));
    r.sfa = pa.out;
    r.sfb = pb.out;
    r.sfa_bytes = pa.passthrough ? 0 : pa.bytes;
    r.sfb_bytes = pb.passthrough ? 0 : pb.bytes;
    *res = r;
    return HFP4_OK;
}
