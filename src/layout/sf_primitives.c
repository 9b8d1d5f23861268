/*
 * sf_primitives.c - plans and host entry points of the four layout primitives: the MN-major
 * TMA-aligned copy, the MN-major packed UE8M0 form, the K-grouped packed form and the UTCCP
 * permutation. The data work itself is in sf_cpu.c (host) and sf_gpu.cu (device).
 */
#include <string.h>

#include "sf_internal.h"

hfp4_status hfp4__sf_plan_mn_major(const char *fn, const hfp4_sf_tensor *sf, hfp4__sf_plan *plan) {
    memset(plan, 0, sizeof *plan);
    HFP4_TRY(hfp4__sf_check_tensor(fn, "sf", sf, &plan->in, &plan->in_extent));
    const hfp4_sf_tensor *in = &plan->in;
    hfp4__sf_mn_major_desc(in->dtype, in->num_groups, in->mn, in->sf_k, &plan->out, &plan->bytes);
    /* NOTE: exactly DeepGEMM's no-copy test, strides compared as given (also for size-1 dims). */
    int64_t t = hfp4__sf_align_up(in->mn, 4);
    plan->passthrough = (in->num_groups == 0 || in->stride_group == t * in->sf_k) && in->stride_mn == 1 &&
                        in->stride_k == t;
    plan->op = plan->passthrough || plan->bytes == 0 ? HFP4__SF_OP_NONE : HFP4__SF_OP_MN_MAJOR;
    return HFP4_OK;
}

hfp4_status hfp4__sf_plan_pack(const char *fn, const hfp4_sf_tensor *sf, int64_t mn, int32_t gran_mn,
                               const hfp4_sf_psum *psum, hfp4__sf_plan *plan) {
    memset(plan, 0, sizeof *plan);
    HFP4_TRY(hfp4__sf_check_tensor(fn, "sf", sf, &plan->in, &plan->in_extent));
    const hfp4_sf_tensor *in = &plan->in;
    HFP4_CHECK_ARG(in->dtype == HFP4_DTYPE_FP32, "%s: sf.dtype = %s must be fp32 (the scales to pack into UE8M0)", fn,
                   hfp4_dtype_name(in->dtype));
    HFP4_CHECK_ARG(gran_mn >= 1, "%s: gran_mn = %d must be >= 1 (1 = no row broadcast)", fn, (int)gran_mn);
    HFP4_CHECK_ARG(mn >= 0 && mn < HFP4__SF_MAX_DIM, "%s: mn = %lld must be in [0, 2^31)", fn, (long long)mn);
    HFP4_CHECK_ARG(in->mn == hfp4__ceil_div(mn, gran_mn),
                   "%s: sf.mn = %lld must be ceil(mn / gran_mn) = ceil(%lld / %d) = %lld", fn, (long long)in->mn,
                   (long long)mn, (int)gran_mn, (long long)hfp4__ceil_div(mn, gran_mn));
    if (psum != NULL) {
        HFP4_CHECK_ARG(psum->ends != NULL, "%s: psum.ends is NULL", fn);
        HFP4_CHECK_ARG(psum->num_groups >= 1, "%s: psum.num_groups = %d must be >= 1", fn, (int)psum->num_groups);
        HFP4_CHECK_ARG(psum->alignment >= 0, "%s: psum.alignment = %d must be >= 0 (0 = %d)", fn,
                       (int)psum->alignment, HFP4__SF_DEFAULT_ALIGNMENT);
        HFP4_CHECK_ARG(in->num_groups <= 1, "%s: a psum layout needs a single group of scales, got sf.num_groups = %d",
                       fn, (int)in->num_groups);
        plan->has_psum = 1;
        plan->psum = *psum;
        if (plan->psum.alignment == 0) plan->psum.alignment = HFP4__SF_DEFAULT_ALIGNMENT;
    }
    plan->mn = mn;
    plan->gran_mn = gran_mn;
    HFP4_CHECK_ARG((double)(in->num_groups > 0 ? in->num_groups : 1) * (double)(mn + 3) * (double)(in->sf_k + 3) <
                       (double)HFP4__SF_MAX_OUT_ELEMS,
                   "%s: the output of %d groups x %lld rows x %lld packed words is too large", fn, (int)in->num_groups,
                   (long long)mn, (long long)hfp4__ceil_div(in->sf_k, 4));
    hfp4__sf_mn_major_desc(HFP4_DTYPE_INT32, in->num_groups, mn, hfp4__ceil_div(in->sf_k, 4), &plan->out,
                           &plan->bytes);
    plan->op = plan->bytes == 0 ? HFP4__SF_OP_NONE : HFP4__SF_OP_PACK;
    return HFP4_OK;
}

hfp4_status hfp4__sf_plan_k_grouped(const char *fn, const hfp4_sf_tensor *sf, const hfp4_sf_k_groups *groups,
                                    hfp4__sf_plan *plan) {
    memset(plan, 0, sizeof *plan);
    HFP4_TRY(hfp4__sf_check_tensor(fn, "sf", sf, &plan->in, &plan->in_extent));
    const hfp4_sf_tensor *in = &plan->in;
    HFP4_CHECK_ARG(in->dtype == HFP4_DTYPE_FP32, "%s: sf.dtype = %s must be fp32 (the scales to pack into UE8M0)", fn,
                   hfp4_dtype_name(in->dtype));
    HFP4_CHECK_ARG(in->num_groups == 0, "%s: sf must be 2D (num_groups = 0), got num_groups = %d", fn,
                   (int)in->num_groups);
    HFP4_CHECK_ARG(groups != NULL, "%s: groups is NULL", fn);
    const hfp4_sf_k_groups *kg = groups;
    HFP4_CHECK_ARG(kg->num_groups >= 0, "%s: groups.num_groups = %d must be >= 0", fn, (int)kg->num_groups);
    HFP4_CHECK_ARG(kg->num_groups == 0 || kg->layout != NULL, "%s: groups.layout is NULL", fn);
    HFP4_CHECK_ARG(kg->k_alignment > 0, "%s: groups.k_alignment = %d must be > 0", fn, (int)kg->k_alignment);
    HFP4_CHECK_ARG(kg->ks != NULL || kg->use_psum,
                   "%s: groups.ks is NULL: the group K sizes are needed unless use_psum is set", fn);
    HFP4_REQUIRE(kg->gran_k == 32 || kg->gran_k == 128,
                 "%s: no K-grouped SF layout for fp32 scales with gran_k = %d (32 or 128)", fn, (int)kg->gran_k);
    HFP4_REQUIRE(kg->k_alignment % 32 == 0, "%s: no K-grouped SF layout for k_alignment = %d (a multiple of 32)", fn,
                 (int)kg->k_alignment);
    HFP4_REQUIRE(in->mn % 4 == 0,
                 "%s: no K-grouped SF layout for mn = %lld: the unpadded [packed, mn] output needs mn %% 4 == 0 for TMA",
                 fn, (long long)in->mn);
    int64_t packed = 0;
    if (kg->ks != NULL) {
        int64_t rows = 0;
        for (int32_t g = 0; g < kg->num_groups; g++) {
            HFP4_CHECK_ARG(kg->ks[g] >= 0, "%s: groups.ks[%d] = %d must be >= 0", fn, (int)g, (int)kg->ks[g]);
            rows += hfp4__ceil_div(kg->ks[g], kg->gran_k);
            packed += hfp4__ceil_div(kg->ks[g], 4 * (int64_t)kg->gran_k);
        }
        HFP4_CHECK_ARG(kg->use_psum || rows == in->sf_k,
                       "%s: sf.sf_k = %lld must equal sum_g ceil(ks[g] / %d) = %lld", fn, (long long)in->sf_k,
                       (int)kg->gran_k, (long long)rows);
    } else {
        /* NOTE: DeepGEMM's bound: each group wastes at most 3 byte slots of its last word. */
        packed = (in->sf_k + 3 * (int64_t)kg->num_groups) / 4;
    }
    HFP4_CHECK_ARG((double)packed * (double)in->mn < (double)HFP4__SF_MAX_OUT_ELEMS,
                   "%s: the output of %lld packed rows x %lld columns is too large", fn, (long long)packed,
                   (long long)in->mn);
    plan->kg = *kg;
    plan->out.dtype = HFP4_DTYPE_INT32;
    plan->out.mn = in->mn;
    plan->out.sf_k = packed;
    plan->out.stride_mn = 1;
    plan->out.stride_k = in->mn;
    plan->bytes = (size_t)(packed * in->mn * 4);
    plan->op = plan->bytes == 0 ? HFP4__SF_OP_NONE : HFP4__SF_OP_K_GROUPED;
    return HFP4_OK;
}

hfp4_status hfp4__sf_plan_utccp(const char *fn, const hfp4_sf_tensor *sf, hfp4__sf_plan *plan) {
    memset(plan, 0, sizeof *plan);
    HFP4_TRY(hfp4__sf_check_tensor(fn, "sf", sf, &plan->in, &plan->in_extent));
    const hfp4_sf_tensor *in = &plan->in;
    HFP4_CHECK_ARG(in->dtype == HFP4_DTYPE_INT32, "%s: sf.dtype = %s must be int32 (packed UE8M0)", fn,
                   hfp4_dtype_name(in->dtype));
    HFP4_REQUIRE(in->mn % 128 == 0, "%s: no UTCCP layout for mn = %lld: the permutation works on 128-row chunks", fn,
                 (long long)in->mn);
    hfp4__sf_mn_major_desc(HFP4_DTYPE_INT32, in->num_groups, in->mn, in->sf_k, &plan->out, &plan->bytes);
    plan->op = plan->bytes == 0 ? HFP4__SF_OP_NONE : HFP4__SF_OP_UTCCP;
    return HFP4_OK;
}

/* ---- host entry points ------------------------------------------------------------------------ */

static hfp4_status run_cpu(const char *fn, hfp4__sf_plan *plan, const hfp4_sf_options *opts, void *dst,
                           size_t dst_bytes, hfp4_sf_tensor *out) {
    HFP4_CHECK_ARG(out != NULL, "%s: out is NULL", fn);
    HFP4_TRY(hfp4__sf_bind(fn, "dst", plan, dst, dst_bytes, NULL, 0));
    HFP4_TRY(hfp4__sf_check_data_cpu(fn, plan, opts));
    hfp4__sf_execute_cpu(plan, opts);
    *out = plan->out;
    return HFP4_OK;
}

hfp4_status hfp4_sf_get_mn_major_tma_aligned_tensor_query(const hfp4_sf_tensor *sf, hfp4_sf_tensor *out,
                                                          size_t *bytes) {
    const char *fn = "hfp4_sf_get_mn_major_tma_aligned_tensor_query";
    hfp4__sf_plan plan;
    HFP4_TRY(hfp4__sf_plan_mn_major(fn, sf, &plan));
    return hfp4__sf_report(fn, &plan, out, bytes);
}

hfp4_status hfp4_sf_get_mn_major_tma_aligned_tensor(const hfp4_sf_tensor *sf, const hfp4_sf_options *opts, void *dst,
                                                    size_t dst_bytes, hfp4_sf_tensor *out) {
    const char *fn = "hfp4_sf_get_mn_major_tma_aligned_tensor";
    hfp4__sf_plan plan;
    HFP4_TRY(hfp4__sf_plan_mn_major(fn, sf, &plan));
    return run_cpu(fn, &plan, opts, dst, dst_bytes, out);
}

hfp4_status hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query(const hfp4_sf_tensor *sf, int64_t mn,
                                                                       int32_t gran_mn, const hfp4_sf_psum *psum,
                                                                       hfp4_sf_tensor *out, size_t *bytes) {
    const char *fn = "hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query";
    hfp4__sf_plan plan;
    HFP4_TRY(hfp4__sf_plan_pack(fn, sf, mn, gran_mn, psum, &plan));
    return hfp4__sf_report(fn, &plan, out, bytes);
}

hfp4_status hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(const hfp4_sf_tensor *sf, int64_t mn,
                                                                 int32_t gran_mn, const hfp4_sf_psum *psum,
                                                                 const hfp4_sf_options *opts, void *dst,
                                                                 size_t dst_bytes, hfp4_sf_tensor *out) {
    const char *fn = "hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor";
    hfp4__sf_plan plan;
    HFP4_TRY(hfp4__sf_plan_pack(fn, sf, mn, gran_mn, psum, &plan));
    return run_cpu(fn, &plan, opts, dst, dst_bytes, out);
}

hfp4_status hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_query(const hfp4_sf_tensor *sf,
                                                                                 const hfp4_sf_k_groups *groups,
                                                                                 hfp4_sf_tensor *out, size_t *bytes) {
    const char *fn = "hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_query";
    hfp4__sf_plan plan;
    HFP4_TRY(hfp4__sf_plan_k_grouped(fn, sf, groups, &plan));
    return hfp4__sf_report(fn, &plan, out, bytes);
}

hfp4_status hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(const hfp4_sf_tensor *sf,
                                                                           const hfp4_sf_k_groups *groups,
                                                                           const hfp4_sf_options *opts, void *dst,
                                                                           size_t dst_bytes, hfp4_sf_tensor *out) {
    const char *fn = "hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor";
    hfp4__sf_plan plan;
    HFP4_TRY(hfp4__sf_plan_k_grouped(fn, sf, groups, &plan));
    return run_cpu(fn, &plan, opts, dst, dst_bytes, out);
}

hfp4_status hfp4_sf_transpose_for_utccp_query(const hfp4_sf_tensor *sf, hfp4_sf_tensor *out, size_t *bytes) {
    const char *fn = "hfp4_sf_transpose_for_utccp_query";
    hfp4__sf_plan plan;
    HFP4_TRY(hfp4__sf_plan_utccp(fn, sf, &plan));
    return hfp4__sf_report(fn, &plan, out, bytes);
}

hfp4_status hfp4_sf_transpose_for_utccp(const hfp4_sf_tensor *sf, const hfp4_sf_options *opts, void *dst,
                                        size_t dst_bytes, hfp4_sf_tensor *out) {
    const char *fn = "hfp4_sf_transpose_for_utccp";
    hfp4__sf_plan plan;
    HFP4_TRY(hfp4__sf_plan_utccp(fn, sf, &plan));
    return run_cpu(fn, &plan, opts, dst, dst_bytes, out);
}
