/*
 * sf_transform.c - recipes and the transforms: DeepGEMM's get_default_recipe, check_sf_layout,
 * transform_sf_into_required_layout and transform_sf_pair_into_required_layout for an explicit
 * target architecture, planned here and executed by sf_cpu.c / sf_gpu.cu.
 *
 * Status mapping of DeepGEMM's assertions (docs/SF_LAYOUT.md, "Errors"): a broken contract (recipe
 * shape, granularity <= 0, tensor sizes, a pass-through input not in its promised layout) is
 * INVALID_ARGUMENT; a well-formed combination of dtype, granularity and architecture with no
 * layout is UNSUPPORTED, with a message naming all four.
 */
#include <stdio.h>
#include <string.h>

#include "sf_internal.h"

static hfp4_status check_arch(const char *fn, int32_t arch) {
    HFP4_CHECK_ARG(arch >= 50 && arch <= 999,
                   "%s: arch = %d must be the target SM version as major*10 + minor (90, 100, 120, ...)", fn,
                   (int)arch);
    return HFP4_OK;
}

static int is_scale_dtype(hfp4_dtype d) {
    return d == HFP4_DTYPE_FP32 || d == HFP4_DTYPE_INT32 || d == HFP4_DTYPE_UE8M0_PACKED;
}

static const char *scale_dtype_name(hfp4_dtype d) { return d == HFP4_DTYPE_FP32 ? "fp32" : "int32"; }

hfp4_status hfp4_sf_get_default_recipe(hfp4_dtype sfa_dtype, hfp4_dtype sfb_dtype, int32_t arch,
                                       hfp4_sf_recipe *recipe) {
    const char *fn = "hfp4_sf_get_default_recipe";
    HFP4_CHECK_ARG(recipe != NULL, "%s: recipe is NULL", fn);
    HFP4_TRY(check_arch(fn, arch));
    HFP4_CHECK_ARG(is_scale_dtype(sfa_dtype) && is_scale_dtype(sfb_dtype),
                   "%s: sfa_dtype = %s and sfb_dtype = %s must each be fp32 or int32", fn, hfp4_dtype_name(sfa_dtype),
                   hfp4_dtype_name(sfb_dtype));
    const int major = arch / 10;
    if (major == 9) {
        HFP4_REQUIRE(sfa_dtype == HFP4_DTYPE_FP32 && sfb_dtype == HFP4_DTYPE_FP32,
                     "%s: no default recipe for %s SFA and %s SFB on sm_%d (only fp32 scales have one there); pass a "
                     "recipe",
                     fn, scale_dtype_name(sfa_dtype), scale_dtype_name(sfb_dtype), (int)arch);
        *recipe = hfp4_sf_recipe3(1, 128, 128);
        return HFP4_OK;
    }
    if (major == 10 || major == 12) {
        /* NOTE: sm_12x follows sm_10x, as in DeepGEMM's SM120 work (PR #447). */
        *recipe = sfb_dtype == HFP4_DTYPE_FP32 ? hfp4_sf_recipe3(1, 128, 128) : hfp4_sf_recipe3(1, 1, 128);
        return HFP4_OK;
    }
    return hfp4__fail(HFP4_ERR_UNSUPPORTED, "%s: unknown recipe: no default recipe on sm_%d (sm_9x, sm_10x, sm_12x)",
                      fn, (int)arch);
}

/* ---- check_sf_layout ------------------------------------------------------------------------- */

/* Shape checks 2-4 of check_sf_layout on a validated descriptor. */
static hfp4_status check_shape(const char *fn, const hfp4_sf_tensor *sf, int64_t mn, int64_t k, int32_t gran_mn,
                               int32_t gran_k, int32_t num_groups) {
    HFP4_CHECK_ARG(gran_mn > 0 && gran_k > 0, "%s: granularity (gran_mn = %d, gran_k = %d) must be > 0", fn,
                   (int)gran_mn, (int)gran_k);
    HFP4_CHECK_ARG(mn >= 0 && mn < HFP4__SF_MAX_DIM, "%s: mn = %lld must be in [0, 2^31)", fn, (long long)mn);
    HFP4_CHECK_ARG(k >= 0 && k < ((int64_t)1 << 40), "%s: k = %lld must be in [0, 2^40)", fn, (long long)k);
    HFP4_CHECK_ARG(num_groups >= 0, "%s: num_groups = %d must be >= 0 (0 = none)", fn, (int)num_groups);
    if (num_groups == 0)
        HFP4_CHECK_ARG(sf->num_groups == 0, "%s: sf must be 2D (no num_groups given), got sf.num_groups = %d", fn,
                       (int)sf->num_groups);
    else
        HFP4_CHECK_ARG(sf->num_groups == num_groups, "%s: sf.num_groups = %d must be num_groups = %d (3D)", fn,
                       (int)sf->num_groups, (int)num_groups);
    int64_t want_mn = hfp4__ceil_div(mn, gran_mn);
    HFP4_CHECK_ARG(sf->mn == want_mn, "%s: sf.mn = %lld must be ceil(mn / gran_mn) = ceil(%lld / %d) = %lld", fn,
                   (long long)sf->mn, (long long)mn, (int)gran_mn, (long long)want_mn);
    const int64_t per = (int64_t)gran_k * (sf->dtype == HFP4_DTYPE_FP32 ? 1 : 4);
    int64_t want_k = hfp4__ceil_div(k, per);
    HFP4_CHECK_ARG(sf->sf_k == want_k, "%s: sf.sf_k = %lld must be ceil(k / %lld) = ceil(%lld / %lld) = %lld (%s)", fn,
                   (long long)sf->sf_k, (long long)per, (long long)k, (long long)per, (long long)want_k,
                   sf->dtype == HFP4_DTYPE_FP32 ? "one fp32 scale per gran_k" : "one int32 word per 4 * gran_k");
    return HFP4_OK;
}

static hfp4_status check_tma_stride(const char *fn, const hfp4_sf_tensor *sf, int64_t mn) {
    int64_t t = hfp4__sf_align_up(mn, 4);
    if (sf->num_groups > 0)
        HFP4_CHECK_ARG(sf->stride_group == sf->stride_k * sf->sf_k,
                       "%s: sf must be MN-major TMA-aligned: stride_group = %lld must be stride_k * sf_k = %lld", fn,
                       (long long)sf->stride_group, (long long)(sf->stride_k * sf->sf_k));
    HFP4_CHECK_ARG(sf->stride_mn == 1 || mn == 1, "%s: sf must be MN-major TMA-aligned: stride_mn = %lld must be 1", fn,
                   (long long)sf->stride_mn);
    HFP4_CHECK_ARG(sf->stride_k == t,
                   "%s: sf must be MN-major TMA-aligned: stride_k = %lld must be align(mn, 4) = %lld (relayout it with "
                   "hfp4_sf_get_mn_major_tma_aligned_tensor)",
                   fn, (long long)sf->stride_k, (long long)t);
    return HFP4_OK;
}

static hfp4_status check_sm90_sfb(const char *fn, const hfp4_sf_tensor *sf) {
    if (sf->num_groups > 0)
        HFP4_CHECK_ARG(sf->stride_group == sf->mn * sf->sf_k,
                       "%s: sf groups must be dense: stride_group = %lld must be mn * sf_k = %lld", fn,
                       (long long)sf->stride_group, (long long)(sf->mn * sf->sf_k));
    const int k_major = sf->stride_k == 1 && sf->stride_mn == sf->sf_k;
    const int mn_major = sf->stride_k == sf->mn && sf->stride_mn == 1;
    HFP4_CHECK_ARG(k_major || mn_major,
                   "%s: sf must be contiguous K-major (stride_mn = %lld, stride_k = 1) or MN-major without padding "
                   "(stride_mn = 1, stride_k = %lld); got stride_mn = %lld, stride_k = %lld",
                   fn, (long long)sf->sf_k, (long long)sf->mn, (long long)sf->stride_mn, (long long)sf->stride_k);
    return HFP4_OK;
}

hfp4_status hfp4_sf_check_layout(const hfp4_sf_tensor *sf, int64_t mn, int64_t k, int32_t gran_mn, int32_t gran_k,
                                 int32_t num_groups, uint32_t checks, hfp4_dtype type_check) {
    const char *fn = "hfp4_sf_check_layout";
    HFP4_CHECK_ARG(sf != NULL, "%s: sf is NULL", fn);
    HFP4_CHECK_ARG((checks & ~(HFP4_SF_CHECK_TMA_STRIDE | HFP4_SF_CHECK_SM90_SFB)) == 0,
                   "%s: checks = 0x%x has unknown bits", fn, (unsigned)checks);
    /* (an unknown type_check used to surface as "sf.dtype = fp32 must be unknown") */
    HFP4_CHECK_ARG(type_check == HFP4_DTYPE_NONE || type_check == HFP4_DTYPE_FP32 || type_check == HFP4_DTYPE_INT32 ||
                       type_check == HFP4_DTYPE_UE8M0_PACKED,
                   "%s: type_check = %s (%d) must be none, fp32, int32 or ue8m0_packed", fn, hfp4_dtype_name(type_check),
                   (int)type_check);
    hfp4_dtype got = sf->dtype == HFP4_DTYPE_UE8M0_PACKED ? HFP4_DTYPE_INT32 : sf->dtype;
    hfp4_dtype want = type_check == HFP4_DTYPE_UE8M0_PACKED ? HFP4_DTYPE_INT32 : type_check;
    HFP4_CHECK_ARG(want == HFP4_DTYPE_NONE || got == want, "%s: sf.dtype = %s must be %s", fn,
                   hfp4_dtype_name(sf->dtype), hfp4_dtype_name(type_check));
    hfp4_sf_tensor t;
    int64_t extent;
    HFP4_TRY(hfp4__sf_check_tensor(fn, "sf", sf, &t, &extent));
    HFP4_TRY(check_shape(fn, &t, mn, k, gran_mn, gran_k, num_groups));
    if (checks & HFP4_SF_CHECK_TMA_STRIDE) HFP4_TRY(check_tma_stride(fn, &t, mn));
    if (checks & HFP4_SF_CHECK_SM90_SFB) HFP4_TRY(check_sm90_sfb(fn, &t));
    return HFP4_OK;
}

/* ---- transform ------------------------------------------------------------------------------- */

static void set_passthrough(hfp4__sf_plan *plan, const hfp4_sf_tensor *in, int64_t extent) {
    memset(plan, 0, sizeof *plan);
    plan->op = HFP4__SF_OP_NONE;
    plan->passthrough = 1;
    plan->in = *in;
    plan->in_extent = extent;
    plan->out = *in;
}

hfp4_status hfp4__sf_plan_transform(const char *fn, const hfp4_sf_transform_request *req, hfp4__sf_plan *plan) {
    HFP4_CHECK_ARG(req != NULL, "%s: req is NULL", fn);
    HFP4_CHECK_ARG(req->sf != NULL, "%s: req.sf is NULL", fn);
    HFP4_TRY(check_arch(fn, req->arch));

    /* Granularities from the recipe: a 3-tuple picks by is_sfa, a 2-tuple forbids it. */
    const hfp4_sf_recipe *r = &req->recipe;
    HFP4_CHECK_ARG(req->is_sfa == HFP4_SF_OPERAND_UNSET || req->is_sfa == HFP4_SF_OPERAND_A ||
                       req->is_sfa == HFP4_SF_OPERAND_B,
                   "%s: is_sfa = %d is not an hfp4_sf_operand", fn, (int)req->is_sfa);
    int32_t gran_mn, gran_k;
    if (r->size == 3) {
        HFP4_CHECK_ARG(req->is_sfa != HFP4_SF_OPERAND_UNSET,
                       "%s: a 3-tuple recipe (%d, %d, %d) needs is_sfa (HFP4_SF_OPERAND_A or _B)", fn, (int)r->gran[0],
                       (int)r->gran[1], (int)r->gran[2]);
        gran_mn = req->is_sfa == HFP4_SF_OPERAND_A ? r->gran[0] : r->gran[1];
        gran_k = r->gran[2];
    } else if (r->size == 2) {
        HFP4_CHECK_ARG(req->is_sfa == HFP4_SF_OPERAND_UNSET,
                       "%s: a 2-tuple recipe (%d, %d) is per operand: is_sfa must be unset", fn, (int)r->gran[0],
                       (int)r->gran[1]);
        gran_mn = r->gran[0];
        gran_k = r->gran[1];
    } else {
        return hfp4__fail(HFP4_ERR_INVALID_ARGUMENT,
                          "%s: recipe.size = %d: a recipe (2- or 3-tuple of granularities) is required", fn,
                          (int)r->size);
    }
    HFP4_CHECK_ARG(gran_mn > 0 && gran_k > 0, "%s: recipe granularity (gran_mn = %d, gran_k = %d) must be > 0", fn,
                   (int)gran_mn, (int)gran_k);

    hfp4_sf_tensor sf;
    int64_t extent;
    HFP4_TRY(hfp4__sf_check_tensor(fn, "sf", req->sf, &sf, &extent));
    HFP4_TRY(check_shape(fn, &sf, req->mn, req->k, gran_mn, gran_k, req->num_groups));

    const int major = req->arch / 10, fp32 = sf.dtype == HFP4_DTYPE_FP32, disable = req->disable_ue8m0_cast != 0;
    const int k_32_128 = gran_k == 32 || gran_k == 128;
    if (fp32 && gran_mn == 1 && gran_k == 128 && (major == 9 || disable)) {
        HFP4_TRY(hfp4__sf_plan_mn_major(fn, req->sf, plan));
    } else if (fp32 && gran_mn == 128 && gran_k == 128 && (major == 9 || disable)) {
        HFP4_TRY(check_sm90_sfb(fn, &sf));
        set_passthrough(plan, &sf, extent);
    } else if (fp32 && gran_mn == 1 && gran_k == 32 && major == 9) {
        HFP4_TRY(hfp4__sf_plan_mn_major(fn, req->sf, plan));
    } else if (!fp32 && gran_mn == 1 && k_32_128 && major == 9) {
        HFP4_TRY(hfp4__sf_plan_mn_major(fn, req->sf, plan));
    } else if (fp32 && k_32_128 && (major == 10 || major == 12)) {
        HFP4_REQUIRE(!disable,
                     "%s: no SF layout for fp32 scales with gran_mn = %d, gran_k = %d on sm_%d with disable_ue8m0_cast: "
                     "its kernels consume UE8M0 scales only",
                     fn, (int)gran_mn, (int)gran_k, (int)req->arch);
        HFP4_TRY(hfp4__sf_plan_pack(fn, req->sf, req->mn, gran_mn, req->psum, plan));
    } else if (!fp32 && gran_mn == 1 && k_32_128 && (major == 10 || major == 12)) {
        HFP4_TRY(check_tma_stride(fn, &sf, req->mn));
        set_passthrough(plan, &sf, extent);
    } else {
        return hfp4__fail(HFP4_ERR_UNSUPPORTED,
                          "%s: no SF layout for %s scales with gran_mn = %d, gran_k = %d on sm_%d%s (unknown SF "
                          "transformation)",
                          fn, scale_dtype_name(sf.dtype), (int)gran_mn, (int)gran_k, (int)req->arch,
                          disable ? " with disable_ue8m0_cast" : "");
    }
    plan->gran_k = gran_k;
    return HFP4_OK;
}

static hfp4_status check_operand_dtype(const char *fn, const char *name, hfp4_dtype d, int64_t k) {
    const int fp4 = d == HFP4_DTYPE_FP4_E2M1 || d == HFP4_DTYPE_FP4_E2M1_SM90;
    HFP4_CHECK_ARG(fp4 || d == HFP4_DTYPE_NONE || d == HFP4_DTYPE_FP8_E4M3 || d == HFP4_DTYPE_BF16,
                   "%s: %s = %s must be none, fp8_e4m3, bf16 or fp4_e2m1", fn, name, hfp4_dtype_name(d));
    HFP4_CHECK_ARG(!fp4 || k % 32 == 0, "%s: k = %lld must be a multiple of 32 for an FP4 operand (%s = %s)", fn,
                   (long long)k, name, hfp4_dtype_name(d));
    return HFP4_OK;
}

hfp4_status hfp4__sf_plan_pair(const char *fn, const hfp4_sf_pair_request *req, hfp4__sf_plan *plan_a,
                               hfp4__sf_plan *plan_b, hfp4_sf_pair_result *res) {
    HFP4_CHECK_ARG(req != NULL, "%s: req is NULL", fn);
    HFP4_CHECK_ARG(req->sfa != NULL && req->sfb != NULL, "%s: req.sfa and req.sfb must not be NULL", fn);
    const int has_r = req->recipe.size != 0, has_a = req->recipe_a.size != 0, has_b = req->recipe_b.size != 0;
    HFP4_CHECK_ARG(has_a == has_b, "%s: recipe_a and recipe_b must be given together (got %s without %s)", fn,
                   has_a ? "recipe_a" : "recipe_b", has_a ? "recipe_b" : "recipe_a");
    HFP4_CHECK_ARG(!(has_r && has_a), "%s: give either recipe or the recipe_a/recipe_b pair, not both", fn);
    HFP4_CHECK_ARG(!has_r || req->recipe.size == 3, "%s: recipe.size = %d must be 3 (gran_mn_a, gran_mn_b, gran_k)",
                   fn, (int)req->recipe.size);
    HFP4_CHECK_ARG(!has_a || (req->recipe_a.size == 2 && req->recipe_b.size == 2),
                   "%s: recipe_a.size = %d and recipe_b.size = %d must be 2 (gran_mn, gran_k)", fn,
                   (int)req->recipe_a.size, (int)req->recipe_b.size);
    HFP4_TRY(check_arch(fn, req->arch));
    HFP4_TRY(check_operand_dtype(fn, "a_dtype", req->a_dtype, req->k));
    HFP4_TRY(check_operand_dtype(fn, "b_dtype", req->b_dtype, req->k));

    hfp4_sf_recipe recipe = req->recipe;
    if (!has_r && !has_a) HFP4_TRY(hfp4_sf_get_default_recipe(req->sfa->dtype, req->sfb->dtype, req->arch, &recipe));
    const int use_pair = has_a;

    hfp4_sf_transform_request ra, rb;
    memset(&ra, 0, sizeof ra);
    ra.sf = req->sfa;
    ra.mn = req->m;
    ra.k = req->k;
    ra.recipe = use_pair ? req->recipe_a : recipe;
    ra.num_groups = req->num_groups_a;
    ra.is_sfa = use_pair ? HFP4_SF_OPERAND_UNSET : HFP4_SF_OPERAND_A;
    ra.disable_ue8m0_cast = req->disable_ue8m0_cast;
    ra.psum = req->psum;
    ra.arch = req->arch;
    rb = ra;
    rb.sf = req->sfb;
    rb.mn = req->n;
    rb.recipe = use_pair ? req->recipe_b : recipe;
    rb.num_groups = req->num_groups_b;
    rb.is_sfa = use_pair ? HFP4_SF_OPERAND_UNSET : HFP4_SF_OPERAND_B;
    rb.psum = NULL;

    char fn_a[128], fn_b[128];
    snprintf(fn_a, sizeof fn_a, "%s (sfa)", fn);
    snprintf(fn_b, sizeof fn_b, "%s (sfb)", fn);
    HFP4_TRY(hfp4__sf_plan_transform(fn_a, &ra, plan_a));
    HFP4_TRY(hfp4__sf_plan_transform(fn_b, &rb, plan_b));
    if (res != NULL) {
        memset(res, 0, sizeof *res);
        res->gran_k_a = use_pair ? req->recipe_a.gran[1] : recipe.gran[2];
        res->gran_k_b = use_pair ? req->recipe_b.gran[1] : recipe.gran[2];
    }
    return HFP4_OK;
}

/* ---- host entry points ----------------------------------------------------------------------- */

hfp4_status hfp4_sf_transform_into_required_layout_query(const hfp4_sf_transform_request *req, hfp4_sf_tensor *out,
                                                         size_t *bytes) {
    const char *fn = "hfp4_sf_transform_into_required_layout_query";
    hfp4__sf_plan plan;
    HFP4_TRY(hfp4__sf_plan_transform(fn, req, &plan));
    return hfp4__sf_report(fn, &plan, out, bytes);
}

hfp4_status hfp4_sf_transform_into_required_layout(const hfp4_sf_transform_request *req, const hfp4_sf_options *opts,
                                                   void *dst, size_t dst_bytes, hfp4_sf_tensor *out) {
    const char *fn = "hfp4_sf_transform_into_required_layout";
    hfp4__sf_plan plan;
    HFP4_TRY(hfp4__sf_plan_transform(fn, req, &plan));
    HFP4_CHECK_ARG(out != NULL, "%s: out is NULL", fn);
    HFP4_TRY(hfp4__sf_bind(fn, "dst", &plan, dst, dst_bytes, NULL, 0));
    HFP4_TRY(hfp4__sf_check_data_cpu(fn, &plan, opts));
    hfp4__sf_execute_cpu(&plan, opts);
    *out = plan.out;
    return HFP4_OK;
}

hfp4_status hfp4_sf_transform_pair_into_required_layout_query(const hfp4_sf_pair_request *req,
                                                              hfp4_sf_pair_result *res) {
    const char *fn = "hfp4_sf_transform_pair_into_required_layout_query";
    hfp4__sf_plan pa, pb;
    HFP4_CHECK_ARG(res != NULL, "%s: res is NULL", fn);
    hfp4_sf_pair_result r;
    HFP4_TRY(hfp4__sf_plan_pair(fn, req, &pa, &pb, &r));
    HFP4_TRY(hfp4__sf_report(fn, &pa, &r.sfa, &r.sfa_bytes));
    HFP4_TRY(hfp4__sf_report(fn, &pb, &r.sfb, &r.sfb_bytes));
    *res = r;
    return HFP4_OK;
}

hfp4_status hfp4__sf_bind_pair(const char *fn, hfp4__sf_plan *pa, hfp4__sf_plan *pb, void *dst_a, size_t dst_a_bytes,
                               void *dst_b, size_t dst_b_bytes) {
    HFP4_TRY(hfp4__sf_bind(fn, "dst_a", pa, dst_a, dst_a_bytes, pb->in.data, pb->in_extent));
    HFP4_TRY(hfp4__sf_bind(fn, "dst_b", pb, dst_b, dst_b_bytes, pa->in.data, pa->in_extent));
    if (!pa->passthrough && !pb->passthrough && pa->bytes > 0 && pb->bytes > 0) {
        uintptr_t a0 = (uintptr_t)dst_a, b0 = (uintptr_t)dst_b;
        HFP4_CHECK_ARG(a0 + pa->bytes <= b0 || b0 + pb->bytes <= a0, "%s: dst_a and dst_b overlap", fn);
    }
    return HFP4_OK;
}

hfp4_status hfp4_sf_transform_pair_into_required_layout(const hfp4_sf_pair_request *req, const hfp4_sf_options *opts,
                                                        void *dst_a, size_t dst_a_bytes, void *dst_b,
                                                        size_t dst_b_bytes, hfp4_sf_pair_result *res) {
    const char *fn = "hfp4_sf_transform_pair_into_required_layout";
    const char *fn_a = "hfp4_sf_transform_pair_into_required_layout (sfa)";
    const char *fn_b = "hfp4_sf_transform_pair_into_required_layout (sfb)";
    hfp4__sf_plan pa, pb;
    HFP4_CHECK_ARG(res != NULL, "%s: res is NULL", fn);
    hfp4_sf_pair_result r;
    HFP4_TRY(hfp4__sf_plan_pair(fn, req, &pa, &pb, &r));
    HFP4_TRY(hfp4__sf_bind_pair(fn, &pa, &pb, dst_a, dst_a_bytes, dst_b, dst_b_bytes));
    /* NOTE: both operands' data are checked before either output is written. */
    HFP4_TRY(hfp4__sf_check_data_cpu(fn_a, &pa, opts));
    HFP4_TRY(hfp4__sf_check_data_cpu(fn_b, &pb, opts));
    hfp4__sf_execute_cpu(&pa, opts);
    hfp4__sf_execute_cpu(&pb, opts);
    r.sfa = pa.out;
    r.sfb = pb.out;
    r.sfa_bytes = pa.passthrough ? 0 : pa.bytes;
    r.sfb_bytes = pb.passthrough ? 0 : pb.bytes;
    *res = r;
    return HFP4_OK;
}
