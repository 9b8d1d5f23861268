/*
 * promote.cuh - how a consumer thread adds a wgmma accumulator to its FP32 sums of the tile (fin,
 * BT / 2 floats: rows (g, g+8) x token columns 8j + 2t4 + {0, 1}) with the weight-row and activation
 * scales, and the units fin is kept in while an item's chunks are folded. The state (fin and its
 * units) lives in run_consumers; these functions take it by pointer and reference.
 */
#pragma once
#include <stdint.h>

#include "scales.cuh"

/* A consumer thread's FP32 sums of its tile (fin): rows (g, g+8) x token columns 8j + 2t4 + {0, 1}.
 * A struct so that store_tile can take it by value. NOTE: through a pointer, the compiler numbered
 * fin's registers differently and the 128-token tile's SASS changed (split of the kernel into
 * files, see fp8_fp4_gemm.cuh). */
template <int BT>
struct sm90_fin {
    float v[BT / 2];
};

/* Where the producer stores token column c's activation scale among a stage's BT values of one
 * k-group (sa). From 16 tokens up, the four columns a consumer thread promotes with, per 16
 * columns ({16jj + 8h + 2t4 + e}: h, e in {0, 1}), sit together, so promote reads its scales with
 * BT / 16 conflict-free 16-byte loads (the 4 t4 lanes read 64 consecutive bytes) instead of BT / 8
 * 8-byte ones. The 8-token tile keeps the identity, and so does the 128-token one: there the wider
 * loads (or merely the permuted addresses) made ptxas spill the consumers' item-loop registers,
 * which are at their 208 limit. */
template <int BT>
static __device__ __forceinline__ int a_scale_slot(int c) {
    if constexpr (BT < 16 || BT == 128) return c;
    else return (c & ~15) | ((c & 7) >> 1) << 2 | ((c >> 3) & 1) << 1 | (c & 1);
}

/* a_scale_slot<BT>(c) for a column c equal to `lane` modulo 16 (the producer's c = (lane + 32t) % BT),
 * given lane_slot = a_scale_slot<BT>(lane & 15): the slot only permutes c's low 4 bits, so this is
 * one instruction (the full form cost the producer registers it does not have at BT = 128) */
template <int BT>
static __device__ __forceinline__ int a_scale_slot_of_lane(int c, int lane_slot) {
    if constexpr (BT < 16 || BT == 128) return c;
    else return (c & ~15) | lane_slot;
}

/* The float offset of a thread's first activation scale in promote's reads (t4: lane % 4) */
template <int BT>
static __device__ __forceinline__ int a_scale_t4_offset(int t4) {
    return BT < 16 || BT == 128 ? 2 * t4 : 4 * t4;
}

/* fin += acc x (row scale x activation scale): the thread's accumulators are rows (g, g+8) x token
 * columns 8j + 2t4 + {0, 1}. Without ROW_SCALED, fin is kept in the row scales' units (s0, s1
 * unused): one FFMA per accumulator. */
template <bool ROW_SCALED>
static __device__ __forceinline__ void promote_columns(float *fin, const float *acc, float s0, float s1, float2 sa2,
                                                       int j) {
    if constexpr (ROW_SCALED) {
        fin[4 * j + 0] += acc[4 * j + 0] * (s0 * sa2.x);
        fin[4 * j + 1] += acc[4 * j + 1] * (s0 * sa2.y);
        fin[4 * j + 2] += acc[4 * j + 2] * (s1 * sa2.x);
        fin[4 * j + 3] += acc[4 * j + 3] * (s1 * sa2.y);
    } else {
        fin[4 * j + 0] += acc[4 * j + 0] * sa2.x;
        fin[4 * j + 1] += acc[4 * j + 1] * sa2.y;
        fin[4 * j + 2] += acc[4 * j + 2] * sa2.x;
        fin[4 * j + 3] += acc[4 * j + 3] * sa2.y;
    }
}
/* BT: the accumulator's token columns; LBT: the tile whose scale layout sa has (a narrow item's
 * first 8, 32, 64 or 96 columns of the 128-token tile: narrow_items.cuh) */
template <int BT, bool ROW_SCALED, int LBT = BT>
static __device__ __forceinline__ void promote(float *fin, const float *acc, float s0, float s1, const float *sa,
                                               int t4) {
    static_assert(LBT == BT || LBT == 128, "a narrower accumulator only on the 128-token tile's identity layout");
    if constexpr (LBT < 16 || LBT == 128) {
#pragma unroll
        for (int j = 0; j < BT / 8; j++)
            promote_columns<ROW_SCALED>(fin, acc, s0, s1, *(const float2 *)(sa + 8 * j + a_scale_t4_offset<LBT>(t4)), j);
    } else {
#pragma unroll
        for (int jj = 0; jj < BT / 16; jj++) { /* one 16-byte load for the columns of j = 2jj, 2jj + 1 */
            const float4 q = *(const float4 *)(sa + 16 * jj + a_scale_t4_offset<BT>(t4));
            promote_columns<ROW_SCALED>(fin, acc, s0, s1, make_float2(q.x, q.y), 2 * jj);
            promote_columns<ROW_SCALED>(fin, acc, s0, s1, make_float2(q.z, q.w), 2 * jj + 1);
        }
    }
}

/* Moves fin to absolute units. fin's units while an item's chunks are folded (see the NOTE in
 * run_consumers, consumer.cuh): (rb0, rb1) the rows' (g, g+8) scales 2^(e_max - 133) fin is kept
 * in, (eb0, eb1) their e_max; eb = 0x100: fin is in absolute units (rb = 1). NOTE: four references
 * rather than one struct: a struct changed the order of the compiler's phi registers (and the
 * SASS) in the look-ahead path. */
template <int BT>
static __device__ __forceinline__ void to_absolute_units(float *fin, float &rb0, float &rb1, uint32_t &eb0,
                                                         uint32_t &eb1) {
#pragma unroll
    for (int j = 0; j < BT / 8; j++) {
        fin[4 * j + 0] *= rb0;
        fin[4 * j + 1] *= rb0;
        fin[4 * j + 2] *= rb1;
        fin[4 * j + 3] *= rb1;
    }
    rb0 = rb1 = 1.0f;
    eb0 = eb1 = 0x100;
}

/* Promotion of a folded chunk whose accumulator holds acc: fin's units are set by the
 * tile's first chunk (em: the rows' e_max); a chunk with another e_max, in any lane of the
 * warp, moves fin to absolute units and promotes with the row scales. */
template <int BT>
static __device__ __forceinline__ void promote_folded(float *fin, float &rb0, float &rb1, uint32_t &eb0, uint32_t &eb1,
                                                      const float *acc, uint32_t em0, uint32_t em1, const float *sa,
                                                      int32_t kc, int t4) {
    if (kc == 0) {
        eb0 = em0;
        eb1 = em1;
        rb0 = row_scale_from_emax(em0);
        rb1 = row_scale_from_emax(em1);
    }
    if (__all_sync(0xFFFFFFFFu, em0 == eb0 && em1 == eb1)) {
        promote<BT, false>(fin, acc, 1.0f, 1.0f, sa, t4);
    } else {
        if (eb0 != 0x100) to_absolute_units<BT>(fin, rb0, rb1, eb0, eb1);
        promote<BT, true>(fin, acc, row_scale_from_emax(em0), row_scale_from_emax(em1), sa, t4);
    }
}
