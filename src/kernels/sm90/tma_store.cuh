/*
 * tma_store.cuh - the 128-token tile's TMA store of D (p.d_tma, epilogue.cuh): the staging
 * buffer's swizzled layout and the warpgroup's write of its 64 x 128 BF16 box into it by stmatrix,
 * then one thread's bulk tensor store.
 */
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <stdint.h>

#include "promote.cuh"
#include "ptx.cuh"
#include "work_items.cuh"

/* The byte offset of D's element (token c, weight row r of the warpgroup's 64) in a TMA store's
 * staging buffer (16 KB from a 1024-aligned start inside the warpgroup's transpose buffer): rows of
 * 64 BF16 (128 bytes), 16-byte chunks XOR-ed with the row's index within its 8-row atom (the
 * 128-byte swizzle of D's map, hfp4_gemm). */
static __device__ __forceinline__ uint32_t staging_offset(int c, int r) {
    return (uint32_t)(c * 128 + ((((r >> 3) ^ c) & 7) << 4) + (r & 7) * 2);
}

/* The 128-token tile's TMA store (p.d_tma): the thread's sums as BF16 into the warpgroup's staging
 * buffer (zeros for rows that are not real), then one thread stores the 64 x 128 box. The caller
 * has waited for the previous store's reads of the buffer.
 * NOTE: the accumulators' layout is the mma fragment's (rows g, g + 8 = weight rows, columns 2 t4,
 * + 1 = tokens), so stmatrix .trans writes them as D's rows (tokens) of 8 weight rows, 16 bytes at
 * a time: per thread 8 stmatrix and 32 packed conversions instead of 64 2-byte stores and 64
 * conversions. */
template <int MINB>
static __device__ __forceinline__ void store_tile_tma(const CUtensorMap *d_map, const sm90_tile &tile, int64_t wtile,
                                                      int64_t dgroup, const sm90_fin<128> &fin, uint32_t staging,
                                                      const uint32_t (&real_mask)[4], int warpgroup, int tid,
                                                      int lane) {
    const int t4 = lane % 4;
    const bool all_real = (real_mask[0] & real_mask[1] & real_mask[2] & real_mask[3]) == 0xFFFFFFFFu;
    /* this lane's stored row: matrix lane / 8 = (j + 1 if >= 2, bottom 8 weight rows if odd), row lane % 8 */
    const uint32_t row_addr = staging + staging_offset(8 * (lane / 16) + lane % 8, (tid / 32) * 16 + 8 * ((lane / 8) & 1));
#pragma unroll
    for (int j = 0; j < 16; j += 2) {
        uint32_t w[4];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int jj = j + h, c = 8 * jj + 2 * t4;
            float v0 = fin.v[4 * jj + 0], v1 = fin.v[4 * jj + 1], v2 = fin.v[4 * jj + 2], v3 = fin.v[4 * jj + 3];
            if (!all_real) {
                const uint32_t bits = real_mask[jj / 4] >> (c & 31); /* columns c, c + 1 */
                if (!(bits & 1u)) v0 = v2 = 0.0f;
                if (!(bits & 2u)) v1 = v3 = 0.0f;
            }
            w[2 * h] = bf16x2_bits(v0, v1);     /* weight row g: tokens c, c + 1 */
            w[2 * h + 1] = bf16x2_bits(v2, v3); /* weight row g + 8 */
        }
        /* rows 8j.. of the buffer: 1 KB further per j; the swizzle's XOR (token % 8) is the same */
        stmatrix_x4_trans(row_addr + 1024 * j, w[0], w[1], w[2], w[3]);
    }
    fence_proxy_async_shared(); /* the writes, visible to the TMA unit */
    warpgroup_barrier<MINB == 2>(warpgroup);
    if (tid == 0) {
        tma_store_3d(d_map, staging, (int32_t)(wtile * 64), tile.m0, (int32_t)dgroup);
        bulk_commit();
    }
}
