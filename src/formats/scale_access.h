/*
 * scale_access.h - reading and writing one scale factor through an hfp4_scales description.
 *
 * The reference, the quantizers, the repack and the layout toolkit all address scales the same
 * way (include/hfp4.h, struct hfp4_scales); this is that addressing, written once.
 */
#ifndef HFP4_SCALE_ACCESS_H
#define HFP4_SCALE_ACCESS_H

#include "internal.h"

/* Storage-unit offset of the scale for (group g, scale row sr = row / gran_mn, K-group j), and for
 * packed UE8M0 the byte within that word. */
static inline int64_t hfp4__scale_offset(const hfp4_scales *s, int64_t g, int64_t sr, int64_t j, int *byte) {
    if (s->dtype == HFP4_DTYPE_UE8M0_PACKED) {
        *byte = (int)(j & 3);
        return g * s->stride_group + sr * s->stride_mn + (j >> 2) * s->stride_k;
    }
    *byte = 0;
    return g * s->stride_group + sr * s->stride_mn + j * s->stride_k;
}

/* The scale of (group g, row `row` of the operand, K-group j) as a float (exact). */
float hfp4__scale_get(const hfp4_scales *s, int64_t g, int64_t row, int64_t j);

/* The raw UE8M0 byte of that scale (dtype UE8M0 or UE8M0_PACKED only). */
uint8_t hfp4__scale_get_ue8m0(const hfp4_scales *s, int64_t g, int64_t row, int64_t j);

/* Stores `value` (FP32) or `e` (UE8M0 byte, for UE8M0 and UE8M0_PACKED) at (g, scale row sr, j). */
void hfp4__scale_put(const hfp4_scales *s, int64_t g, int64_t sr, int64_t j, float value, uint8_t e);

/* Validates a scale description for an operand of `groups` x `rows` x `k` with the expected
 * granularity: non-null data aligned to its storage unit (4 bytes for FP32 and UE8M0_PACKED), a
 * scale dtype in `allowed_mask` (bit (1 << dtype)), gran as given,
 * non-negative strides, and that every addressed element lies inside distinct storage
 * (stride_mn and stride_k may not alias: one of them must step over the other's full extent).
 * `what` names the operand in messages ("a.scales"). */
hfp4_status hfp4__check_scales(const char *fn, const char *what, const hfp4_scales *s, unsigned allowed_mask,
                               int64_t groups, int64_t rows, int64_t k, int32_t gran_mn, int32_t gran_k);

/* The bytes from s->data to the end of the last scale of `groups` x `rows` x `k` (the same shape
 * and granularity hfp4__check_scales accepted, which keeps this below 2^62 bytes). */
int64_t hfp4__scales_bytes(const hfp4_scales *s, int64_t groups, int64_t rows, int64_t k);

#endif
