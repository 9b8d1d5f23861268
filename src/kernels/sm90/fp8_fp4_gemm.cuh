/*
 * fp8_fp4_gemm.cuh - the SM90 FP8 x FP4 GEMM kernel (dense, m-grouped contiguous / psum, masked).
 *
 * Computes D[m, n] = sum_k (a[m,k] sa[m,k/ga]) (w[n,k] sw[n,k/32]) as D^T = W * A^T: the weights are
 * the register operand of wgmma (64 rows per warpgroup), the tokens are wgmma's N dimension (BT =
 * 8..128), so decode-sized batches waste nothing on padding and the FP4 -> FP8 conversion happens
 * in registers from 16-byte shared-memory loads of the repacked layout (sm90_layout.h), which the
 * producer bulk-copies into the pipeline stages.
 *
 * CTA = 3 warpgroups: WG0 and WG1 each own 64 weight rows of a 128-row tile; WG2's first warp is
 * the producer, which TMA-loads the activation tile (BT x 128 bytes per 128-K chunk, 128B swizzle),
 * bulk-copies both warpgroups' weights and weight scales (8 KB + scales per chunk) and copies the
 * activation scales into shared memory (cp.async, or converted by the producer for UE8M0 forms),
 * one pipeline stage per chunk.
 *
 * Exactness: a prmt table turns each FP4 value into e4m3 exactly. In a folded chunk (UE8M0 scales
 * within 11 binades of the row's largest, decided by the repack per 64-row tile and 128-K chunk)
 * the table carries the relative exponent, so the chunk's 4 k32 steps chain into one accumulator
 * that is promoted once with 2^(e_max-133) x the activation scale. Otherwise (FP32 scales, a wide
 * exponent spread, or 1x32 activation scales) every k32 step is promoted with its own scales:
 * slower, exact for any scale.
 */
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <stdint.h>

#include "fp4_to_fp8.cuh"
#include "fp8_fp4_gemm_params.h"
#include "ptx.cuh"
#include "scales.cuh"
#include "stage_copies.cuh"
#include "tile_config.cuh"
#include "wgmma_fp8_rs.cuh"
#include "work_items.cuh"

/* fin += acc x (row scale x activation scale): the thread's accumulators are rows (g, g+8) x token
 * columns 8j + 2t4 + {0, 1}. Without ROW_SCALED, fin is kept in the row scales' units (s0, s1
 * unused): one FFMA per accumulator. */
template <int BT, bool ROW_SCALED>
static __device__ __forceinline__ void promote(float *fin, const float *acc, float s0, float s1, const float *sa,
                                               int t4) {
#pragma unroll
    for (int j = 0; j < BT / 8; j++) {
        const float2 sa2 = *(const float2 *)(sa + 8 * j + 2 * t4);
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
}

/* The 4 k32 steps' e4m3 register fragments of a folded chunk from this thread's two 16-byte words
 * (q0, q1) and its rows' scale words (e0, e1: the relative exponent of each 32-group, sm90_layout.h):
 * words of step st are (k 4t..4t+3, k 16+4t..16+4t+3) for rows (g, g+8). */
static __device__ __forceinline__ void convert_folded_chunk(uint32_t (&a)[4][4], uint4 q0, uint4 q1, uint32_t e0,
                                                            uint32_t e1) {
    const uint32_t wlo[4] = {q0.x, q0.z, q1.x, q1.z};
    const uint32_t whi[4] = {q0.y, q0.w, q1.y, q1.w};
#pragma unroll
    for (int st = 0; st < 4; st++) {
        uint32_t lo0, hi0, lo1, hi1;
        fp8_table((e0 >> (4 * st)) & 15, lo0, hi0);
        fp8_table((e1 >> (4 * st)) & 15, lo1, hi1);
        a[st][0] = fp4x4_row_lo_to_fp8(wlo[st], lo0, hi0);
        a[st][1] = fp4x4_row_hi_to_fp8(wlo[st], lo1, hi1);
        a[st][2] = fp4x4_row_lo_to_fp8(whi[st], lo0, hi0);
        a[st][3] = fp4x4_row_hi_to_fp8(whi[st], lo1, hi1);
    }
}

template <int BT, bool W_FP32, int MINB = 1>
__global__ void __launch_bounds__(384, MINB)
    hfp4_sm90_fp8_fp4_gemm_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ hfp4_sm90_gemm_params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef sm90_tile_config<BT, W_FP32, MINB> cfg;
    constexpr int STAGES = cfg::STAGES;
    extern __shared__ uint8_t smem_raw[];
    /* aligned by pointer arithmetic on smem_raw (not through an integer cast), so the compiler
     * still knows every access below is to shared memory and emits LDS/STS, not generic loads */
    uint8_t *smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    uint8_t *a_tiles = smem;                                     /* 1024-aligned (128B swizzle)  */
    uint8_t *w_stages = a_tiles + STAGES * cfg::A_TILE_BYTES;    /* 1024-aligned                  */
    uint8_t *ws_stages = w_stages + STAGES * cfg::W_STAGE_BYTES;
    float *a_scale_s = (float *)(ws_stages + STAGES * cfg::WS_STAGE_BYTES);
    float *out_s = a_scale_s + STAGES * 4 * BT;
    uint64_t *full = (uint64_t *)(out_s + 2 * BT * cfg::OUT_LD);
    uint64_t *empty = full + STAGES;

    const int warpgroup = threadIdx.x / 128;
    const int tid = threadIdx.x % 128;
    const int lane = threadIdx.x % 32;
    if (threadIdx.x == 0) {
        /* NOTE: every thread that touches a stage's shared memory arrives itself (32 producer lanes,
         * 256 consumer threads) rather than one lane after __syncwarp: same cost in practice, and
         * the ordering is then per thread, which compute-sanitizer's racecheck can follow. */
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&full[s], 33); /* 32 producer lanes + lane 0's expect_tx arrival */
            mbar_init(&empty[s], 256);
        }
        mbar_fence_init();
    }
    __syncthreads();

    const int64_t chunks = p.w_chunks;
    const bool gran32 = p.a_gran_k == 32;

    if (warpgroup == 2) {
        /* ---- producer: activation tiles by TMA, weights and their scales by bulk copies,
         * activation scales and chunk modes by plain loads ---- */
        /* NOTE: the producer needs few registers and hands the rest to the consumers. The split must
         * sum to at most 3 x 168 = 504, the registers the CTA is launched with: with 80 + 2 x 216
         * the consumers' setmaxnreg.inc waited forever (a hang seen on the H200). The 128-token
         * tile needs 88 in the producer (its 16 scale values per lane; ptxas spills at 80) and fits
         * its consumers in 208. */
        warpgroup_reg_dealloc<cfg::PRODUCER_REGS>();
        /* NOTE: the four producer warps take chunks round-robin. Each chunk costs the producer one
         * global-load round trip for the activation scales before its stage can be published; one
         * warp alone made that latency the pace of the whole CTA (~1300 cycles per chunk). */
        const int pwarp = threadIdx.x / 32 - 8;
        if (pwarp == 0 && lane == 0) tma_prefetch_descriptor(&a_map);
        const int nj = gran32 ? 4 : 1;
        int64_t iter = 0; /* chunks published so far: stage = iter % STAGES, as the consumers count */
        FOR_EACH_ITEM(BT, p, item, lay) {
        sm90_tile tile;
        if (!resolve_tile<BT>(p, item, lay, tile) || !tile.compute) continue;
        const int64_t wt0 = tile.n_tile * 2; /* the CTA's first 64-row weight tile */
        const uint8_t *w_src = p.w + (int64_t)tile.expert * p.w_group_bytes + wt0 * p.w_pairs * HFP4_SM90_PAIR_BYTES;
        const uint8_t *ws_src = (const uint8_t *)p.w_scales +
                                ((int64_t)tile.expert * p.w_scale_group_elems + wt0 * chunks * 64) * (W_FP32 ? 16 : 4);
        /* Producer warp w publishes the chunks whose *global* index (iter + kc) is w mod 4, so
         * each warp steps by exactly 4 chunks, across work items too. With STAGES >= 4 the chunk
         * two rounds back on the stage it waits for is then always released, which is what makes
         * the parity wait unambiguous (a per-item split let a warp jump 7 chunks and pass a wait
         * two phases early when chunks % 4 != 0, e.g. K = 896 with the 64-token tile). */
        for (int64_t kc = ((pwarp - iter % 4) % 4 + 4) % 4; kc < chunks; kc += 4) {
            const int s = (int)((iter + kc) % STAGES);
            const uint32_t phase = (uint32_t)(((iter + kc) / STAGES) & 1);
            uint64_t *bar = &full[s];
            float *sa = a_scale_s + s * 4 * BT;
            constexpr int PER_LANE = (BT * 4 + 31) / 32;
            /* only the lanes' rounds that hold scales: BT values per k-group (looping to PER_LANE
             * made 4x too many rounds for 1x128 scales) */
            const int rounds = (BT * nj + 31) / 32;
            if (p.a_scale_dtype == 1 /* FP32 */) {
                /* NOTE: FP32 activation scales go by cp.async 4-byte copies that complete on the
                 * stage's barrier (arrive.noinc), so no producer lane ever waits for a load: with
                 * plain loads each producer warp had one chunk in flight, and four chunks of 8 KB
                 * per ~2 us load latency held decode to ~15 GB/s per SM. */
                /* NOTE: a sleeping wait: the producer warps spun ~120 times per chunk on this barrier
                 * (ncu, w13 T = 16384: 360 of the producer's 909 instructions per chunk), issue
                 * slots the consumers on the same scheduler need */
                mbar_wait_sleeping(&empty[s], phase ^ 1);
                if (lane == 0) issue_stage_copies<BT, W_FP32, MINB>(p, &a_map, tile, kc, s, a_tiles, w_stages, ws_stages, w_src, ws_src, bar);
#pragma unroll 2
                for (int t = 0; t < rounds; t++) {
                    const int idx = lane + 32 * t;
                    if (idx < BT * nj) {
                        const int i = idx % BT, j = idx / BT;
                        const int64_t row = tile.m0 + i;
                        const int64_t kg = gran32 ? kc * 4 + j : kc;
                        const bool in = row < tile.valid_end && kg < p.a_k_groups;
                        const float *src = (const float *)p.a_scales;
                        if (in) src += a_scale_index(p, tile.a_group, row, kg);
                        cp_async_4_zfill(sa + j * BT + i, src, in);
                    }
                }
                cp_async_mbar_arrive_noinc(bar);
            } else {
                /* UE8M0 forms need converting: load first (independent of the stage), then wait for
                 * the stage, convert and store; a few values per lane at a time keep the producer
                 * within its register budget */
                constexpr int BATCH = PER_LANE < cfg::SCALE_BATCH ? PER_LANE : cfg::SCALE_BATCH;
#pragma unroll
                for (int b0 = 0; b0 < PER_LANE; b0 += BATCH) {
                    if (b0 > 0 && b0 >= rounds) break;
                    float v[BATCH];
#pragma unroll
                    for (int t = 0; t < BATCH; t++) {
                        const int idx = lane + 32 * (b0 + t);
                        v[t] = 0.0f;
                        if (idx < BT * nj) {
                            const int i = idx % BT, j = idx / BT;
                            const int64_t row = tile.m0 + i;
                            const int64_t kg = gran32 ? kc * 4 + j : kc;
                            if (row < tile.valid_end && kg < p.a_k_groups) v[t] = load_a_scale(p, tile.a_group, row, kg);
                        }
                    }
                    if (b0 == 0) mbar_wait_sleeping(&empty[s], phase ^ 1);
#pragma unroll
                    for (int t = 0; t < BATCH; t++) {
                        const int idx = lane + 32 * (b0 + t);
                        if (idx < BT * nj) sa[(idx / BT) * BT + idx % BT] = v[t];
                    }
                }
                if (lane == 0) issue_stage_copies<BT, W_FP32, MINB>(p, &a_map, tile, kc, s, a_tiles, w_stages, ws_stages, w_src, ws_src, bar);
                mbar_arrive(bar);
            }
        }
        iter += chunks;
        }
        return;
    }

    /* ---- consumers: warpgroup `warpgroup` owns weight rows [64 * wtile, 64 * wtile + 64) ---- */
    warpgroup_reg_alloc<cfg::CONSUMER_REGS>();
    const int warp_in_wg = tid / 32, g8 = lane / 4, t4 = lane % 4;
    /* chunks consumed so far, as (stage, phase) = (n % STAGES, (n / STAGES) & 1): the producer counts
     * the same chunks; stepping them here avoids a 64-bit modulo per chunk */
    int s = 0;
    uint32_t phase = 0;
    FOR_EACH_ITEM(BT, p, item, lay) {
    sm90_tile tile;
    if (!resolve_tile<BT>(p, item, lay, tile)) continue;
    const int64_t wtile = tile.n_tile * 2 + warpgroup;
    float fin[BT / 2];
#pragma unroll
    for (int i = 0; i < BT / 2; i++) fin[i] = 0.0f;

    if (tile.compute) {
        const int r0 = warp_in_wg * 16 + g8; /* row within the 64-row tile; r1 = r0 + 8 */
        /* chunk modes (0 folded, 1 per-32) from the repacked buffer, one byte per chunk of the
         * tile, read a chunk ahead so the load is off the critical path */
        const uint8_t *modes = p.w_modes + ((int64_t)tile.expert * p.w_tiles + wtile) * chunks;
        uint32_t mode_next = W_FP32 || BT == 128 ? 1u : __ldg(modes);
        /* NOTE: fin is kept in units of the weight rows' scale 2^(e_max - 133) of the tile's first
         * chunk (rb0, rb1), so a folded chunk with the same e_max (every chunk of a row whose
         * 32-group scales fit in 11 binades: the repack gives such a row one base for the whole K)
         * promotes with one FFMA per accumulator instead of FMUL + FFMA. The first chunk that differs, in any lane of the warp, converts fin to absolute
         * units (a power-of-two multiply) and the item continues on the general promotion.
         * eb = 0x100: fin is in absolute units. */
        float rb0 = 1.0f, rb1 = 1.0f;
        uint32_t eb0 = 0x100, eb1 = 0x100;
        auto to_absolute_units = [&]() {
#pragma unroll
            for (int j = 0; j < BT / 8; j++) {
                fin[4 * j + 0] *= rb0;
                fin[4 * j + 1] *= rb0;
                fin[4 * j + 2] *= rb1;
                fin[4 * j + 3] *= rb1;
            }
            rb0 = rb1 = 1.0f;
            eb0 = eb1 = 0x100;
        };
        /* Promotion of a folded chunk whose accumulator holds acc: fin's units are set by the
         * tile's first chunk (em: the rows' e_max); a chunk with another e_max, in any lane of the
         * warp, moves fin to absolute units and promotes with the row scales. */
        auto promote_folded = [&](const float *acc, uint32_t em0, uint32_t em1, const float *sa, int32_t kc) {
            if (kc == 0) {
                eb0 = em0;
                eb1 = em1;
                rb0 = row_scale_from_emax(em0);
                rb1 = row_scale_from_emax(em1);
            }
            if (__all_sync(0xFFFFFFFFu, em0 == eb0 && em1 == eb1)) {
                promote<BT, false>(fin, acc, 1.0f, 1.0f, sa, t4);
            } else {
                if (eb0 != 0x100) to_absolute_units();
                promote<BT, true>(fin, acc, row_scale_from_emax(em0), row_scale_from_emax(em1), sa, t4);
            }
        };
        /* NOTE: when every chunk of the item is folded (the common case: UE8M0 weight scales, 1x128
         * activation scales), chunk kc + 1 is awaited, loaded and converted while chunk kc's wgmmas
         * run, so the conversion hides behind the tensor cores instead of following them (ncu, w13
         * T = 16384: 19 % of the consumers' stall samples were the wait for their own wgmmas). Two
         * register sets of fragments, used alternately (the loop body is written twice). */
        bool pipelined = false;
        if constexpr (!W_FP32) {
            if (!gran32) {
                uint32_t per32 = 0;
                for (int32_t c = lane; c < (int32_t)chunks; c += 32) per32 |= __ldg(modes + c);
                pipelined = !__any_sync(0xFFFFFFFFu, per32 != 0);
            }
        }
        if (pipelined) {
            const int wg_off = warpgroup * cfg::W_WG_BYTES + tid * 16;
            auto load_convert = [&](int stage, uint32_t (&dst)[4][4], uint32_t &em0, uint32_t &em1) {
                const uint8_t *w_st = w_stages + stage * cfg::W_STAGE_BYTES + wg_off;
                const uint4 q0 = *(const uint4 *)w_st;
                const uint4 q1 = *(const uint4 *)(w_st + HFP4_SM90_PAIR_BYTES);
                const uint32_t *ws_st = (const uint32_t *)(ws_stages + stage * cfg::WS_STAGE_BYTES + warpgroup * cfg::WS_WG_BYTES);
                const uint32_t e0 = ws_st[r0], e1 = ws_st[r0 + 8];
                convert_folded_chunk(dst, q0, q1, e0, e1);
                em0 = (e0 >> 16) & 255;
                em1 = (e1 >> 16) & 255;
            };
            auto step = [&](int32_t kc, uint32_t (&cur)[4][4], uint32_t (&nxt)[4][4], uint32_t emc0, uint32_t emc1,
                            uint32_t &emn0, uint32_t &emn1) {
                const uint64_t desc = smem_desc_k128_swizzle128(a_tiles + s * cfg::A_TILE_BYTES);
                float acc[BT / 2];
                wgmma_fp8_rs_chunk<BT>(acc, cur, desc);
                const int s1 = s + 1 == STAGES ? 0 : s + 1;
                const uint32_t phase1 = s1 == 0 ? phase ^ 1 : phase;
                if (kc + 1 < (int32_t)chunks) {
                    mbar_wait(&full[s1], phase1);
                    load_convert(s1, nxt, emn0, emn1);
                }
                wgmma_wait<0>();
#pragma unroll
                for (int r = 0; r < BT / 2; r++) reg_fence(acc[r]);
                /* the wgmmas read cur from registers until they complete: keep it live and unchanged */
#pragma unroll
                for (int st = 0; st < 4; st++)
#pragma unroll
                    for (int r = 0; r < 4; r++) reg_fence(cur[st][r]);
                promote_folded(acc, emc0, emc1, a_scale_s + s * 4 * BT, kc);
                mbar_arrive(&empty[s]); /* after the last read of the stage: wgmmas waited, scales used */
                s = s1;
                phase = phase1;
            };
            uint32_t fa[4][4], fb[4][4];
            uint32_t ea0, ea1, eb0n = 0, eb1n = 0;
            mbar_wait(&full[s], phase);
            load_convert(s, fa, ea0, ea1);
            for (int32_t kc = 0; kc < (int32_t)chunks; kc += 2) {
                step(kc, fa, fb, ea0, ea1, eb0n, eb1n);
                if (kc + 1 < (int32_t)chunks) step(kc + 1, fb, fa, eb0n, eb1n, ea0, ea1);
            }
        }
        for (int32_t kc = 0; kc < (int32_t)chunks && !pipelined; kc++) {
            mbar_wait(&full[s], phase);
            const uint8_t *w_st = w_stages + s * cfg::W_STAGE_BYTES + warpgroup * cfg::W_WG_BYTES + tid * 16;
            const uint4 q0 = *(const uint4 *)w_st;
            const uint4 q1 = *(const uint4 *)(w_st + HFP4_SM90_PAIR_BYTES);
            const uint8_t *ws_st = ws_stages + s * cfg::WS_STAGE_BYTES + warpgroup * cfg::WS_WG_BYTES;
            float4 f0, f1;
            uint32_t e0 = 0, e1 = 0;
            if constexpr (W_FP32) {
                f0 = ((const float4 *)ws_st)[r0];
                f1 = ((const float4 *)ws_st)[r0 + 8];
            } else {
                e0 = ((const uint32_t *)ws_st)[r0];
                e1 = ((const uint32_t *)ws_st)[r0 + 8];
            }
            uint32_t mode = mode_next;
            if constexpr (BT == 128) {
                mode = W_FP32 ? 1u : __ldg(modes + kc); /* no register to spare: read now (L1 hit after the first) */
            } else if (!W_FP32 && kc + 1 < (int32_t)chunks) {
                mode_next = __ldg(modes + kc + 1); /* a chunk ahead */
            }
            const uint64_t desc = smem_desc_k128_swizzle128(a_tiles + s * cfg::A_TILE_BYTES);
            const float *sa = a_scale_s + s * 4 * BT;
            /* words of step st: (k 4t..4t+3, k 16+4t..16+4t+3) for rows (g, g+8) */
            const uint32_t wlo[4] = {q0.x, q0.z, q1.x, q1.z};
            const uint32_t whi[4] = {q0.y, q0.w, q1.y, q1.w};
            if (mode == 0 && !gran32) {
                    /* folded chunk: the per-32 scales are inside the FP8 values, so the 4 k32 steps
                     * chain into one accumulator and one promotion per 128 K (DeepGEMM's cost) */
                    uint32_t a[4][4];
                    convert_folded_chunk(a, q0, q1, e0, e1);
                    float acc[BT / 2];
                    wgmma_fp8_rs_chunk<BT>(acc, a, desc);
                    wgmma_wait<0>();
#pragma unroll
                    for (int st = 0; st < 4; st++)
#pragma unroll
                        for (int r = 0; r < 4; r++) reg_fence(a[st][r]); /* read by the wgmmas until here */
#pragma unroll
                    for (int r = 0; r < BT / 2; r++) reg_fence(acc[r]);
                    promote_folded(acc, (e0 >> 16) & 255, (e1 >> 16) & 255, sa, kc);
                } else {
                    if (eb0 != 0x100) to_absolute_units();
                    /* per-32 chunk: one accumulator and one promotion per k32 step (exact for any
                     * scale). NOTE: the steps' wgmmas go out NACC at a time into NACC accumulators
                     * with one wait (the 1x32 activation scales transformers passes make every chunk
                     * take this path; one wait per step serialized it): 4 up to the 32-token tile
                     * (the two-CTA 8-token one included), 2 at 64 tokens (4 spill there next to the
                     * look-ahead path's registers), 1 at 128 tokens (no registers to spare). */
                    /* the tables and weight scales of k32 step st */
                    auto step_scales = [&](int st, uint32_t(&lo)[2], uint32_t(&hi)[2], float(&sw)[2]) {
                        if constexpr (W_FP32) {
                            fp8_table(6, lo[0], hi[0]);
                            lo[1] = lo[0];
                            hi[1] = hi[0];
                            sw[0] = st == 0 ? f0.x : st == 1 ? f0.y : st == 2 ? f0.z : f0.w;
                            sw[1] = st == 0 ? f1.x : st == 1 ? f1.y : st == 2 ? f1.z : f1.w;
                        } else if (mode == 0) { /* folded words, per-32 activation scales */
                            fp8_table((e0 >> (4 * st)) & 15, lo[0], hi[0]);
                            fp8_table((e1 >> (4 * st)) & 15, lo[1], hi[1]);
                            sw[0] = row_scale_from_emax((e0 >> 16) & 255);
                            sw[1] = row_scale_from_emax((e1 >> 16) & 255);
                        } else {
                            fp8_table(6, lo[0], hi[0]);
                            lo[1] = lo[0];
                            hi[1] = hi[0];
                            sw[0] = ue8m0_to_float((e0 >> (8 * st)) & 0xFF);
                            sw[1] = ue8m0_to_float((e1 >> (8 * st)) & 0xFF);
                        }
                    };
                    constexpr int NACC = BT > 64 ? 1 : BT == 64 ? 2 : 4;
#pragma unroll
                    for (int st0 = 0; st0 < 4; st0 += NACC) {
                        float sw[NACC][2];
                        uint32_t a[NACC][4];
#pragma unroll
                        for (int i = 0; i < NACC; i++) { /* a step's tables die with its conversion */
                            const int st = st0 + i;
                            uint32_t lo[2], hi[2];
                            step_scales(st, lo, hi, sw[i]);
                            a[i][0] = fp4x4_row_lo_to_fp8(wlo[st], lo[0], hi[0]);
                            a[i][1] = fp4x4_row_hi_to_fp8(wlo[st], lo[1], hi[1]);
                            a[i][2] = fp4x4_row_lo_to_fp8(whi[st], lo[0], hi[0]);
                            a[i][3] = fp4x4_row_hi_to_fp8(whi[st], lo[1], hi[1]);
                        }
                        float acc[NACC][BT / 2];
#pragma unroll
                        for (int i = 0; i < NACC; i++)
#pragma unroll
                            for (int r = 0; r < 4; r++) reg_fence(a[i][r]);
                        wgmma_fence();
#pragma unroll
                        for (int i = 0; i < NACC; i++) wgmma_fp8_rs<BT>(acc[i], a[i], desc + 2 * (st0 + i), 0);
                        wgmma_commit();
                        wgmma_wait<0>();
#pragma unroll
                        for (int i = 0; i < NACC; i++) {
#pragma unroll
                            for (int r = 0; r < 4; r++) reg_fence(a[i][r]); /* read by the wgmma until here */
#pragma unroll
                            for (int r = 0; r < BT / 2; r++) reg_fence(acc[i][r]);
                            promote<BT, true>(fin, acc[i], sw[i][0], sw[i][1], sa + (gran32 ? (st0 + i) * BT : 0), t4);
                        }
                    }
                }
            mbar_arrive(&empty[s]); /* after the last read of the stage: wgmma waited, scales used */
            if (++s == STAGES) {
                s = 0;
                phase ^= 1;
            }
        }
        to_absolute_units();
    }

    const int64_t dgroup = p.grouping == HFP4_K_MASKED ? tile.a_group : 0;
    if (!tile.compute) {
        /* all-padding tile (most tiles of a decode batch in the contiguous layout): zeros straight
         * to D, without the transpose and its barriers; 16 bytes per store when rows are aligned */
        if (p.d_vec) {
            const int per16 = p.d_fp32 ? 4 : 8; /* outputs per 16-byte store */
            for (int idx = tid; idx < BT * 64 / per16; idx += 128) {
                const int64_t row = tile.m0 + idx / (64 / per16), n = wtile * 64 + (idx % (64 / per16)) * per16;
                if (n >= p.n || row >= tile.zero_end) continue;
                const int64_t off = dgroup * p.d_stride_group + row * p.ldd + n;
                if (n + per16 <= p.n) {
                    if (p.d_fp32) *(float4 *)((float *)p.d + off) = make_float4(0.f, 0.f, 0.f, 0.f);
                    else *(uint4 *)((__nv_bfloat16 *)p.d + off) = make_uint4(0u, 0u, 0u, 0u);
                } else {
                    for (int e = 0; e < per16 && n + e < p.n; e++) {
                        if (p.d_fp32) ((float *)p.d)[off + e] = 0.0f;
                        else ((__nv_bfloat16 *)p.d)[off + e] = __float2bfloat16_rn(0.0f);
                    }
                }
            }
            continue;
        }
        for (int idx = tid; idx < BT * 64; idx += 128) {
            const int64_t row = tile.m0 + idx / 64, n = wtile * 64 + idx % 64;
            if (n >= p.n || row >= tile.zero_end) continue;
            const int64_t off = dgroup * p.d_stride_group + row * p.ldd + n;
            if (p.d_fp32) ((float *)p.d)[off] = 0.0f;
            else ((__nv_bfloat16 *)p.d)[off] = __float2bfloat16_rn(0.0f);
        }
        continue;
    }

    /* ---- epilogue: transpose through shared memory, then coalesced stores along N ---- */
    /* Which rows are real: below valid_end and, in the contiguous layout, with an expert id. One
     * load per lane and 32 rows, issued before the transpose so the latency overlaps it; a ballot
     * turns them into bit masks. (Reading the id per stored element made 32 dependent loads per
     * thread and tile: ~8 % of the consumers' stall samples at T = 4096.) */
    constexpr int MASKS = (BT + 31) / 32;
    int32_t row_id[MASKS];
#pragma unroll
    for (int q = 0; q < MASKS; q++) {
        const int c = 32 * q + lane;
        const int64_t row = tile.m0 + c;
        row_id[q] = -1;
        if (c < BT && row < tile.valid_end) row_id[q] = p.grouping == HFP4_K_CONTIGUOUS ? p.layout[row] : 0;
    }
    float *os = out_s + warpgroup * BT * cfg::OUT_LD;
    warpgroup_barrier<MINB == 2>(warpgroup); /* the previous tile's stores have read os */
    {
        const int r0 = warp_in_wg * 16 + g8;
#pragma unroll
        for (int j = 0; j < BT / 8; j++) {
            const int c = 8 * j + 2 * t4;
            os[c * cfg::OUT_LD + r0] = fin[4 * j + 0];
            os[(c + 1) * cfg::OUT_LD + r0] = fin[4 * j + 1];
            os[c * cfg::OUT_LD + r0 + 8] = fin[4 * j + 2];
            os[(c + 1) * cfg::OUT_LD + r0 + 8] = fin[4 * j + 3];
        }
    }
    uint32_t real_mask[MASKS];
#pragma unroll
    for (int q = 0; q < MASKS; q++) real_mask[q] = __ballot_sync(0xFFFFFFFFu, row_id[q] >= 0 && row_id[q] < p.num_groups);
    warpgroup_barrier<MINB == 2>(warpgroup);
    if (p.d_vec) {
        /* 8 consecutive n per thread and pass (16-byte BF16 stores, 2 x 16 bytes for FP32): a
         * warpgroup's 64 rows x BT tokens take BT / 16 passes instead of BT / 2 element stores.
         * The host sets d_vec only when D (and C) rows and groups are 16-byte aligned. */
        for (int idx = tid; idx < BT * 8; idx += 128) {
            const int c = idx / 8, r8 = (idx % 8) * 8;
            const int64_t row = tile.m0 + c;
            const int64_t n = wtile * 64 + r8;
            if (n >= p.n || row >= tile.zero_end) continue;
            uint32_t mask = real_mask[0];
#pragma unroll
            for (int q = 1; q < MASKS; q++)
                if (c >= 32 * q) mask = real_mask[q];
            const bool real = (mask >> (c & 31)) & 1u;
            const int64_t off = dgroup * p.d_stride_group + row * p.ldd + n;
            if (n + 8 > p.n) { /* the N tail: element by element */
                for (int e = 0; e < 8 && n + e < p.n; e++) {
                    float v = real ? os[c * cfg::OUT_LD + r8 + e] : 0.0f;
                    if (p.d_fp32) {
                        if (real && p.c) v += ((const float *)p.c)[off + e];
                        ((float *)p.d)[off + e] = v;
                    } else {
                        if (real && p.c) v += __bfloat162float(((const __nv_bfloat16 *)p.c)[off + e]);
                        ((__nv_bfloat16 *)p.d)[off + e] = __float2bfloat16_rn(v);
                    }
                }
                continue;
            }
            float v[8];
            const float4 lo = *(const float4 *)(os + c * cfg::OUT_LD + r8), hi = *(const float4 *)(os + c * cfg::OUT_LD + r8 + 4);
            v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
#pragma unroll
            for (int e = 0; e < 8; e++) v[e] = real ? v[e] : 0.0f;
            if (p.d_fp32) {
                if (real && p.c) {
                    const float4 c0 = *(const float4 *)((const float *)p.c + off), c1 = *(const float4 *)((const float *)p.c + off + 4);
                    v[0] += c0.x, v[1] += c0.y, v[2] += c0.z, v[3] += c0.w, v[4] += c1.x, v[5] += c1.y, v[6] += c1.z, v[7] += c1.w;
                }
                *(float4 *)((float *)p.d + off) = make_float4(v[0], v[1], v[2], v[3]);
                *(float4 *)((float *)p.d + off + 4) = make_float4(v[4], v[5], v[6], v[7]);
            } else {
                if (real && p.c) {
                    const uint4 cw = *(const uint4 *)((const __nv_bfloat16 *)p.c + off);
                    const uint32_t w[4] = {cw.x, cw.y, cw.z, cw.w};
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const float2 f = __bfloat1622float2(*(const __nv_bfloat162 *)&w[e]);
                        v[2 * e] += f.x;
                        v[2 * e + 1] += f.y;
                    }
                }
                uint32_t w[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const __nv_bfloat162 b = __floats2bfloat162_rn(v[2 * e], v[2 * e + 1]);
                    w[e] = *(const uint32_t *)&b;
                }
                *(uint4 *)((__nv_bfloat16 *)p.d + off) = make_uint4(w[0], w[1], w[2], w[3]);
            }
        }
        continue;
    }
    for (int idx = tid; idx < BT * 64; idx += 128) {
        const int c = idx / 64, rr = idx % 64;
        const int64_t row = tile.m0 + c;
        const int64_t n = wtile * 64 + rr;
        if (n >= p.n || row >= tile.zero_end) continue;
        uint32_t mask = real_mask[0];
#pragma unroll
        for (int q = 1; q < MASKS; q++)
            if (c >= 32 * q) mask = real_mask[q];
        const bool real = (mask >> (c & 31)) & 1u;
        const int64_t off = dgroup * p.d_stride_group + row * p.ldd + n;
        float v = real ? os[c * cfg::OUT_LD + rr] : 0.0f;
        if (p.d_fp32) {
            if (real && p.c) v += ((const float *)p.c)[off];
            ((float *)p.d)[off] = v;
        } else {
            if (real && p.c) v += __bfloat162float(((const __nv_bfloat16 *)p.c)[off]);
            ((__nv_bfloat16 *)p.d)[off] = __float2bfloat16_rn(v);
        }
    }
    }
#else
    /* Built for another architecture: never launched there (the host checks the device). */
    __trap();
#endif
}
