/*
 * sf_tensor.c - scale tensor descriptors and options: validation, sizes of the MN-major
 * TMA-aligned layout, binding a caller's output buffer, and hfp4_sf_get_tma_aligned_size.
 */
#include <stdint.h>

#include "sf_internal.h"

/* NOTE: offsets are capped so that every offset and byte count below fits in int64_t with room
 * to spare. */
#define SF_MAX_OFFSET ((int64_t)1 << 56)

hfp4_status hfp4_sf_get_tma_aligned_size(int64_t x, int64_t element_size, int64_t *aligned) {
    const char *fn = "hfp4_sf_get_tma_aligned_size";
    HFP4_CHECK_ARG(aligned != NULL, "%s: aligned is NULL", fn);
    HFP4_CHECK_ARG(x >= 0 && x < SF_MAX_OFFSET, "%s: x = %lld must be in [0, 2^56)", fn, (long long)x);
    HFP4_CHECK_ARG(element_size > 0 && element_size <= 16 && 16 % element_size == 0,
                   "%s: element_size = %lld must divide 16 (1, 2, 4, 8 or 16 bytes)", fn, (long long)element_size);
    *aligned = hfp4__sf_align_up(x, 16 / element_size);
    return HFP4_OK;
}

int64_t hfp4__sf_numel(const hfp4_sf_tensor *t) {
    return (t->num_groups > 0 ? (int64_t)t->num_groups : 1) * t->mn * t->sf_k;
}

hfp4_status hfp4__sf_check_tensor(const char *fn, const char *what, const hfp4_sf_tensor *t, hfp4_sf_tensor *norm,
                                  int64_t *extent_bytes) {
    HFP4_CHECK_ARG(t != NULL, "%s: %s is NULL", fn, what);
    HFP4_CHECK_ARG(t->dtype == HFP4_DTYPE_FP32 || t->dtype == HFP4_DTYPE_INT32 || t->dtype == HFP4_DTYPE_UE8M0_PACKED,
                   "%s: %s.dtype = %s must be fp32 or int32 (packed UE8M0)", fn, what, hfp4_dtype_name(t->dtype));
    HFP4_CHECK_ARG(t->num_groups >= 0, "%s: %s.num_groups = %d must be >= 0 (0 = 2D)", fn, what, (int)t->num_groups);
    HFP4_CHECK_ARG(t->mn >= 0 && t->mn < HFP4__SF_MAX_DIM, "%s: %s.mn = %lld must be in [0, 2^31)", fn, what,
                   (long long)t->mn);
    HFP4_CHECK_ARG(t->sf_k >= 0 && t->sf_k < HFP4__SF_MAX_DIM, "%s: %s.sf_k = %lld must be in [0, 2^31)", fn, what,
                   (long long)t->sf_k);
    HFP4_CHECK_ARG(t->stride_mn >= 0 && t->stride_k >= 0 && (t->num_groups == 0 || t->stride_group >= 0),
                   "%s: %s strides (group %lld, mn %lld, k %lld) must be >= 0", fn, what, (long long)t->stride_group,
                   (long long)t->stride_mn, (long long)t->stride_k);

    /* Non-overlap: order the dims of size > 1 by stride; each must step past everything the
     * smaller ones span. */
    struct dim { const char *name; int64_t size, stride; } d[3];
    int n = 0;
    if (t->num_groups > 1) d[n++] = (struct dim){"stride_group", t->num_groups, t->stride_group};
    if (t->mn > 1) d[n++] = (struct dim){"stride_mn", t->mn, t->stride_mn};
    if (t->sf_k > 1) d[n++] = (struct dim){"stride_k", t->sf_k, t->stride_k};
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && d[j].stride < d[j - 1].stride; j--) {
            struct dim tmp = d[j];
            d[j] = d[j - 1];
            d[j - 1] = tmp;
        }
    int64_t extent = 0; /* largest element offset reached so far */
    const int empty = hfp4__sf_numel(t) == 0;
    for (int i = 0; i < n && !empty; i++) {
        HFP4_CHECK_ARG(d[i].stride > extent,
                       "%s: %s.%s = %lld is too small: it overlaps the %lld elements spanned by the smaller strides",
                       fn, what, d[i].name, (long long)d[i].stride, (long long)(extent + 1));
        HFP4_CHECK_ARG(d[i].stride < SF_MAX_OFFSET / d[i].size, "%s: %s.%s = %lld is too large", fn, what, d[i].name,
                       (long long)d[i].stride);
        extent += d[i].stride * (d[i].size - 1);
        HFP4_CHECK_ARG(extent < SF_MAX_OFFSET, "%s: %s spans too many elements", fn, what);
    }
    *norm = *t;
    if (norm->dtype == HFP4_DTYPE_UE8M0_PACKED) norm->dtype = HFP4_DTYPE_INT32;
    if (norm->num_groups == 0) norm->stride_group = 0;
    *extent_bytes = empty ? 0 : (extent + 1) * 4;
    return HFP4_OK;
}

void hfp4__sf_mn_major_desc(hfp4_dtype dtype, int32_t num_groups, int64_t mn, int64_t sf_k, hfp4_sf_tensor *out,
                            size_t *bytes) {
    int64_t t = hfp4__sf_align_up(mn, 4);
    out->data = NULL;
    out->dtype = dtype;
    out->num_groups = num_groups;
    out->mn = mn;
    out->sf_k = sf_k;
    out->stride_group = num_groups > 0 ? t * sf_k : 0;
    out->stride_mn = 1;
    out->stride_k = t;
    *bytes = (size_t)((num_groups > 0 ? num_groups : 1) * t * sf_k * 4);
}

hfp4_status hfp4__sf_report(const char *fn, const hfp4__sf_plan *plan, hfp4_sf_tensor *out, size_t *bytes) {
    HFP4_CHECK_ARG(out != NULL && bytes != NULL, "%s: out and bytes must not be NULL", fn);
    *out = plan->passthrough ? plan->in : plan->out;
    if (!plan->passthrough) out->data = NULL;
    *bytes = plan->passthrough ? 0 : plan->bytes;
    return HFP4_OK;
}

static int ranges_overlap(const void *a, int64_t a_bytes, const void *b, int64_t b_bytes) {
    if (a == NULL || b == NULL || a_bytes <= 0 || b_bytes <= 0) return 0;
    uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    return a0 < b0 + (uintptr_t)b_bytes && b0 < a0 + (uintptr_t)a_bytes;
}

hfp4_status hfp4__sf_bind(const char *fn, const char *what, hfp4__sf_plan *plan, void *dst, size_t dst_bytes,
                          const void *avoid, int64_t avoid_bytes) {
    const void *in = plan->in.data;
    HFP4_CHECK_ARG(plan->in_extent == 0 || in != NULL, "%s: the input scales' data is NULL", fn);
    HFP4_CHECK_ARG(((uintptr_t)in & 3) == 0, "%s: the input scales' data = %p must be 4-byte aligned", fn, in);
    if (plan->passthrough) {
        plan->out = plan->in;
        return HFP4_OK;
    }
    if (plan->bytes > 0) {
        HFP4_CHECK_ARG(dst != NULL, "%s: %s is NULL but the output needs %zu bytes", fn, what, plan->bytes);
        HFP4_CHECK_ARG(dst_bytes >= plan->bytes, "%s: %s_bytes = %zu is too small: the output needs %zu bytes", fn,
                       what, dst_bytes, plan->bytes);
        HFP4_CHECK_ARG(((uintptr_t)dst & 3) == 0, "%s: %s = %p must be 4-byte aligned", fn, what, dst);
        HFP4_CHECK_ARG(!ranges_overlap(dst, (int64_t)plan->bytes, plan->in.data, plan->in_extent),
                       "%s: %s overlaps the input scales (in-place transforms are not supported)", fn, what);
        HFP4_CHECK_ARG(!ranges_overlap(dst, (int64_t)plan->bytes, avoid, avoid_bytes),
                       "%s: %s overlaps the other operand's scales or output", fn, what);
    }
    plan->out.data = dst;
    return HFP4_OK;
}

hfp4_status hfp4__sf_check_options(const char *fn, const hfp4_sf_options *opts) {
    HFP4_CHECK_ARG(opts == NULL || (opts->flags & ~HFP4_SF_ROUND_UP) == 0, "%s: opts.flags = 0x%x has unknown bits", fn,
                   opts ? (unsigned)opts->flags : 0u);
    HFP4_CHECK_ARG(opts == NULL || opts->num_threads >= 0, "%s: opts.num_threads = %d must be >= 0", fn,
                   opts ? (int)opts->num_threads : 0);
    return HFP4_OK;
}
