/*
 * repack_sm90.h - internal entry points of the SM90 weight repack (see sm90_layout.h).
 */
#ifndef HFP4_REPACK_SM90_H
#define HFP4_REPACK_SM90_H

#include "internal.h"
#include "../weights/sm90_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Argument checks shared by the CPU and GPU repack (no scale values are read). */
hfp4_status hfp4__sm90_check_repack_args(const char *fn, const hfp4_matrix *w, int32_t num_groups,
                                         hfp4_dtype scale_dtype, const void *dst, size_t dst_bytes,
                                         const hfp4_matrix *out, hfp4_sm90_geometry *geo);

/* Fills *out to describe a repacked buffer at dst (data = weights, scales.data = scale region). */
void hfp4__sm90_describe(const hfp4_sm90_geometry *geo, void *dst, hfp4_matrix *out);

/* Geometry of a repacked B operand as described by hfp4__sm90_describe. */
hfp4_status hfp4__sm90_geometry_of(const hfp4_matrix *b, int32_t num_groups, hfp4_sm90_geometry *geo);

/* The exact value (code x scale, in double: an FP4 value times an FP32 scale can need 27 bits) of
 * weight (group, n, k) of a repacked host buffer. */
double hfp4__sm90_weight_value(const hfp4_matrix *b, const hfp4_sm90_geometry *geo, int64_t group, int64_t n, int64_t k);

#ifdef __cplusplus
}
#endif

#endif
