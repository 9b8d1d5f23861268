/*
 * scale_access.c - see scale_access.h.
 */
#include "scale_access.h"

float hfp4__scale_get(const hfp4_scales *s, int64_t g, int64_t row, int64_t j) {
    int byte;
    int64_t off = hfp4__scale_offset(s, g, row / s->gran_mn, j, &byte);
    switch (s->dtype) {
    case HFP4_DTYPE_FP32: return ((const float *)s->data)[off];
    case HFP4_DTYPE_UE8M0: return hfp4_ue8m0_decode(((const uint8_t *)s->data)[off]);
    case HFP4_DTYPE_UE8M0_PACKED: {
        uint32_t w = ((const uint32_t *)s->data)[off];
        return hfp4_ue8m0_decode((uint8_t)(w >> (8 * byte)));
    }
    default: return 1.0f;
    }
}

uint8_t hfp4__scale_get_ue8m0(const hfp4_scales *s, int64_t g, int64_t row, int64_t j) {
    int byte;
    int64_t off = hfp4__scale_offset(s, g, row / s->gran_mn, j, &byte);
    if (s->dtype == HFP4_DTYPE_UE8M0) return ((const uint8_t *)s->data)[off];
    uint32_t w = ((const uint32_t *)s->data)[off];
    return (uint8_t)(w >> (8 * byte));
}

void hfp4__scale_put(const hfp4_scales *s, int64_t g, int64_t sr, int64_t j, float value, uint8_t e) {
    int byte;
    int64_t off = hfp4__scale_offset(s, g, sr, j, &byte);
    switch (s->dtype) {
    case HFP4_DTYPE_FP32: ((float *)s->data)[off] = value; break;
    case HFP4_DTYPE_UE8M0: ((uint8_t *)s->data)[off] = e; break;
    case HFP4_DTYPE_UE8M0_PACKED: {
        uint32_t *w = (uint32_t *)s->data + off;
        *w = (*w & ~(0xFFu << (8 * byte))) | ((uint32_t)e << (8 * byte));
        break;
    }
    default: break;
    }
}

/* scale rows and storage columns (packed: words) of `rows` x `k` at the description's granularity */
static void scale_grid(const hfp4_scales *s, int64_t rows, int64_t k, int64_t *srows, int64_t *sk) {
    *srows = hfp4__ceil_div(rows, s->gran_mn);
    *sk = hfp4__ceil_div(k, s->gran_k);
    if (s->dtype == HFP4_DTYPE_UE8M0_PACKED) *sk = hfp4__ceil_div(*sk, 4);
}

int64_t hfp4__scales_bytes(const hfp4_scales *s, int64_t groups, int64_t rows, int64_t k) {
    int64_t srows, sk;
    scale_grid(s, rows, k, &srows, &sk);
    const int64_t units = (groups - 1) * s->stride_group + (srows - 1) * s->stride_mn + (sk - 1) * s->stride_k + 1;
    return units * (int64_t)hfp4_dtype_storage_bytes(s->dtype);
}

hfp4_status hfp4__check_scales(const char *fn, const char *what, const hfp4_scales *s, unsigned allowed_mask,
                               int64_t groups, int64_t rows, int64_t k, int32_t gran_mn, int32_t gran_k) {
    HFP4_CHECK_ARG(s->dtype >= 0 && s->dtype < 32 && (allowed_mask >> s->dtype) & 1u,
                   "%s: %s.dtype = %s (%d) is not an accepted scale dtype here", fn, what, hfp4_dtype_name(s->dtype),
                   (int)s->dtype);
    HFP4_CHECK_ARG(s->data != NULL, "%s: %s.data is NULL", fn, what);
    /* scales are read as whole storage units (FP32 and packed words: 4 bytes), on the GPU too, where
     * a misaligned load is a sticky device fault rather than a status */
    const size_t unit = hfp4_dtype_storage_bytes(s->dtype);
    HFP4_CHECK_ARG((uintptr_t)s->data % unit == 0, "%s: %s.data = %p must be %d-byte aligned for %s scales", fn, what,
                   s->data, (int)unit, hfp4_dtype_name(s->dtype));
    HFP4_CHECK_ARG(s->gran_mn == gran_mn, "%s: %s.gran_mn = %d, expected %d", fn, what, (int)s->gran_mn, (int)gran_mn);
    HFP4_CHECK_ARG(s->gran_k == gran_k, "%s: %s.gran_k = %d, expected %d", fn, what, (int)s->gran_k, (int)gran_k);
    int64_t srows, sk;
    scale_grid(s, rows, k, &srows, &sk); /* (gran_mn and gran_k are the expected ones by now) */
    HFP4_CHECK_ARG(s->stride_mn >= 0 && s->stride_k >= 0 && s->stride_group >= 0,
                   "%s: %s strides (mn %lld, k %lld, group %lld) must be >= 0", fn, what, (long long)s->stride_mn,
                   (long long)s->stride_k, (long long)s->stride_group);
    /* every offset below 2^60 (and so none of the products below can overflow) */
    HFP4_CHECK_ARG(hfp4__extent_ok(srows, s->stride_mn, 1) &&
                       hfp4__extent_ok(sk, s->stride_k, 1 + (srows - 1) * s->stride_mn) &&
                       hfp4__extent_ok(groups, s->stride_group, (srows - 1) * s->stride_mn + (sk - 1) * s->stride_k + 1),
                   "%s: %s strides (mn %lld, k %lld, group %lld): the last scale lies past 2^60 units", fn, what,
                   (long long)s->stride_mn, (long long)s->stride_k, (long long)s->stride_group);
    /* The rows x K-groups grid must not alias: the inner stride steps within the outer one. */
    int ok;
    if (srows <= 1) ok = sk <= 1 || s->stride_k >= 1;
    else if (sk <= 1) ok = s->stride_mn >= 1;
    else ok = (s->stride_k >= 1 && s->stride_mn >= s->stride_k * sk) || (s->stride_mn >= 1 && s->stride_k >= s->stride_mn * srows);
    HFP4_CHECK_ARG(ok,
                   "%s: %s strides (mn %lld, k %lld) are too small for %lld scale rows x %lld scale columns", fn, what,
                   (long long)s->stride_mn, (long long)s->stride_k, (long long)srows, (long long)sk);
    if (groups > 1) {
        int64_t extent = (srows - 1) * s->stride_mn + (sk - 1) * s->stride_k + 1;
        HFP4_CHECK_ARG(s->stride_group >= extent,
                       "%s: %s.stride_group = %lld is smaller than one group's scales (%lld units)", fn, what,
                       (long long)s->stride_group, (long long)extent);
    }
    return HFP4_OK;
}
