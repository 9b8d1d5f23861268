/*
 * repack_experts.h - FP4 expert weights from a safetensors checkpoint into an HFP4SM90 container
 * file (sm90_container.h), one group in memory at a time.
 *
 * Each group is repacked by hfp4_ref_repack_sm90 on its own; its weight, scale and mode regions
 * are then placed at group g of the G-group buffer. That is exactly the G-group repack because the
 * layout (sm90_layout.h) stores each region group-major with a per-group size that does not depend
 * on G; tests/test_checkpoint.c checks the bytes against one hfp4_ref_repack_sm90 call over all
 * groups. Memory: one group of source and repacked weights plus the G groups' scales and modes
 * (about 1/16 of the weights with UE8M0 storage, 1/4 with FP32).
 *
 * Scale storage follows hfp4_sm90_weights_scale_dtype's rule over all groups: UE8M0 when every
 * scale is a power of two (always for F8_E8M0 sources), else FP32 (exact, never folded).
 */
#ifndef HFP4_CHECKPOINT_REPACK_EXPERTS_H
#define HFP4_CHECKPOINT_REPACK_EXPERTS_H

#include "fp4_experts.h"
#include "sm90_container.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hfp4__repack_result {
    hfp4__sm90_container header; /* what was written                                        */
    int64_t chunk_tiles;         /* (group, 64-row tile with a real row, 128-K chunk) triples  */
    int64_t folded;              /* of those, stored folded (mode bit 0 clear)                 */
    int64_t tiles;               /* (group, 64-row tile with a real row) pairs                 */
    int64_t one_base;            /* of those, one-base (mode bit 1): the look-ahead path       */
} hfp4__repack_result;

/* Repacks parts[0..count) (each contributing all its groups, in order; all with the same N, K) into
 * the container file out_path, written to a temporary file beside it and renamed over it when
 * complete, so a failure leaves an existing out_path as it was (a device or pipe is written in
 * place). INVALID_ARGUMENT for mismatched parts, a scale the repack rejects (naming the tensor), an
 * output path that cannot be created; IO for a failing write or rename (disk full: the system's
 * reason is in the message); OUT_OF_MEMORY. */
hfp4_status hfp4__repack_experts_to_file(hfp4__st_file *file, const hfp4__fp4_expert *parts, int32_t count,
                                         const char *out_path, hfp4__repack_result *result);

#ifdef __cplusplus
}
#endif

#endif
