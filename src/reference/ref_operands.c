/*
 * ref_operands.c - see ref_operands.h.
 */
#include <math.h>
#include <string.h>

#include "ref_operands.h"
#include "../weights/repack_sm90.h"
#include "scale_access.h"

void hfp4__ref_tables_init(hfp4__ref_tables *t) {
    t->num_groups = 1;
    for (int i = 0; i < 256; i++) t->fp8[i] = (double)hfp4_fp8_decode((uint8_t)i);
    for (int i = 0; i < 16; i++) t->fp4[i] = (double)hfp4_fp4_decode((uint8_t)i);
}

void hfp4__ref_decode_row(const hfp4__ref_tables *t, const hfp4_matrix *x, int64_t group, int64_t row, int64_t k,
                          double *out) {
    int64_t base = group * x->stride_group + row * x->ld; /* storage units of x's dtype */
    if (x->dtype == HFP4_DTYPE_FP4_E2M1_SM90) {
        /* repacked weights: read back through the layout's own decoder (src/weights/) */
        hfp4_sm90_geometry geo;
        hfp4__sm90_geometry_of(x, t->num_groups, &geo);
        for (int64_t i = 0; i < k; i++) out[i] = hfp4__sm90_weight_value(x, &geo, group, row, i);
        return;
    }
    if (x->dtype == HFP4_DTYPE_BF16) {
        const uint16_t *src = (const uint16_t *)x->data + base;
        for (int64_t i = 0; i < k; i++) out[i] = (double)hfp4_bf16_decode(src[i]);
        return;
    }
    /* FP8 and FP4: one scale per gran_k elements, fetched once per K-group. */
    const uint8_t *src = (const uint8_t *)x->data + base;
    int64_t gran = x->scales.gran_k;
    for (int64_t j0 = 0; j0 < k; j0 += gran) {
        double scale = (double)hfp4__scale_get(&x->scales, group, row, j0 / gran);
        int64_t j1 = j0 + gran < k ? j0 + gran : k;
        if (x->dtype == HFP4_DTYPE_FP8_E4M3) {
            for (int64_t i = j0; i < j1; i++) out[i] = t->fp8[src[i]] * scale;
        } else {
            /* packed FP4: the even K index is the low nibble of byte i/2 */
            for (int64_t i = j0; i < j1; i++) {
                uint8_t byte = src[i >> 1];
                out[i] = t->fp4[(i & 1) ? byte >> 4 : byte & 15] * scale;
            }
        }
    }
}

double hfp4__ref_load_c(const void *c, hfp4_dtype dtype, int64_t index) {
    if (dtype == HFP4_DTYPE_FP32) return (double)((const float *)c)[index];
    return (double)hfp4_bf16_decode(((const uint16_t *)c)[index]);
}

/* double -> float rounding to odd: truncate, then set the last bit if anything was dropped.
 * Rounding to odd with >= 2 spare bits and then to nearest even gives exactly the nearest-even
 * result of the wider value, so double -> (odd) float -> bf16 rounds only once. A plain
 * (float) cast would round twice and can turn a value just above a bf16 tie into an exact tie. */
static float round_to_odd_float(double x) {
    float f = (float)x;
    if ((double)f == x || isnan(x) || isinf(f)) return f;
    if (fabs((double)f) > fabs(x)) f = nextafterf(f, 0.0f);
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u |= 1u;
    memcpy(&f, &u, sizeof f);
    return f;
}

void hfp4__ref_store_d(void *d, hfp4_dtype dtype, int64_t index, double value) {
    if (dtype == HFP4_DTYPE_FP32) ((float *)d)[index] = (float)value; /* one round to nearest even */
    else ((uint16_t *)d)[index] = hfp4_bf16_encode(round_to_odd_float(value));
}
