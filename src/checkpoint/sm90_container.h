/*
 * sm90_container.h - the "HFP4SM90" file: one SM90-repacked weight buffer (G groups of [N, K])
 * with a small header, written by `hfp4 repack` (docs/CHECKPOINTS.md specifies it byte for byte).
 *
 *   offset  bytes  field (little-endian)
 *   0       8      magic "HFP4SM90"
 *   8       4      container version (1)
 *   12      4      SM90 layout version (HFP4_SM90_WEIGHTS_VERSION)
 *   16      4      G, groups (>= 1, <= INT32_MAX)
 *   20      4      scale dtype: the hfp4_dtype value (5 = UE8M0, 1 = FP32)
 *   24      8      N (int64, >= 1)
 *   32      8      K (int64, positive multiple of 32)
 *   40      8      byte count = hfp4_sm90_weights_size(G, N, K, scale dtype)
 *   48      16     reserved, zero
 *   64      ...    the repacked buffer, exactly `byte count` bytes; the file ends there
 *
 * Why a header of its own rather than safetensors: the buffer is one opaque layout whose meaning
 * depends on (G, N, K, scale dtype, layout version); these five numbers are all a loader needs.
 */
#ifndef HFP4_CHECKPOINT_SM90_CONTAINER_H
#define HFP4_CHECKPOINT_SM90_CONTAINER_H

#include <stdint.h>

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HFP4__SM90_CONTAINER_MAGIC "HFP4SM90"
#define HFP4__SM90_CONTAINER_VERSION 1u
#define HFP4__SM90_CONTAINER_HEADER_BYTES 64

typedef struct hfp4__sm90_container {
    uint32_t container_version, layout_version;
    int32_t groups;
    hfp4_dtype scale_dtype; /* UE8M0 or FP32 */
    int64_t n, k;
    uint64_t bytes;         /* payload bytes */
} hfp4__sm90_container;

/* Fills *h for a buffer of (groups, n, k, scale_dtype) at the current versions (byte count from
 * hfp4_sm90_weights_size, whose errors it returns). */
hfp4_status hfp4__sm90_container_make(int32_t groups, int64_t n, int64_t k, hfp4_dtype scale_dtype, hfp4__sm90_container *h);

/* The 64 header bytes of *h. */
void hfp4__sm90_container_encode(const hfp4__sm90_container *h, unsigned char out[HFP4__SM90_CONTAINER_HEADER_BYTES]);

/* Parses and checks a header read from `path` (for messages) whose file is file_bytes long:
 * magic, versions, ranges, byte count consistent with the geometry, reserved bytes zero, and the
 * file exactly header + payload. INVALID_ARGUMENT naming the field and value. */
hfp4_status hfp4__sm90_container_decode(const char *path, const unsigned char in[HFP4__SM90_CONTAINER_HEADER_BYTES],
                                        uint64_t file_bytes, hfp4__sm90_container *h);

/* Reads a whole container: *payload is malloc'ed (h->bytes bytes, the caller frees it) and *b
 * describes it as an FP4_E2M1_SM90 B operand (host memory), as hfp4_ref_repack_sm90's `out` would.
 * INVALID_ARGUMENT for a missing or malformed file; OUT_OF_MEMORY. */
hfp4_status hfp4__sm90_container_load(const char *path, hfp4__sm90_container *h, void **payload, hfp4_matrix *b);

#ifdef __cplusplus
}
#endif

#endif
