/*
 * consumer_pipelined.cuh - the pieces of the consumers' look-ahead path for an item whose chunks are
 * all folded (UE8M0 weight scales; 1x128 activation scales, or 1x32 ones in the G32 kernels for
 * one-base items): the loop's shared-memory addresses
 * (lookahead_addrs), one chunk's fragments (load_convert_folded),
 * one step of the loop (pipelined_step), which issues chunk kc's wgmmas and, when there is a
 * chunk kc + 1 (HAS_NEXT), loads and converts it beside chunk kc's promotion, and the loop itself
 * (pipelined_item), which run_consumers (consumer.cuh) calls.
 */
#pragma once
#include <stdint.h>

#include "diag_timeline.cuh"
#include "fp4_to_fp8.cuh"
#include "item_header.cuh"
#include "promote.cuh"
#include "ptx.cuh"
#include "tile_config.cuh"
#include "wgmma_fp8_rs.cuh"

#ifndef HFP4_SM90_DESC_REDUX
#define HFP4_SM90_DESC_REDUX 1 /* the look-ahead loop's wgmma descriptors on the uniform datapath (pipelined_step) */
#endif

/* NOTE: when every chunk of the item is folded and the repack marked the tile as one base per row
 * over all of K (mode bit 1, sm90_layout.h: the common case with UE8M0 weight scales and 1x128
 * activation scales), chunk kc + 1 is awaited, loaded and converted while chunk kc's wgmmas run,
 * so the conversion hides behind the tensor cores instead of following them (ncu, w13 T = 16384:
 * 19 % of the consumers' stall samples were the wait for their own wgmmas), and every chunk
 * promotes with one FFMA per accumulator in the units of the rows' one base. Two register sets of
 * fragments, used alternately (each trip of the loop is two steps; the item's last one or two
 * chunks are steps after it, the last without a next chunk: five inlined steps per loop copy).
 * NOTE: the other all-folded items (a row whose non-zero 32-group scales span more than 11 binades
 * over K: rare) take a second copy of the loop, ROW_SCALED, which promotes every chunk with its
 * rows' scales (FMUL + FFMA) and fin in absolute units, with no vote: a vote in this loop cost ~8 %
 * of prefill (it split the step into basic blocks, so the promotion's scale loads could not be
 * scheduled before the wgmma wait; timing-only build without it, H200: w13 T = 16384 552 -> 592,
 * dense 684 -> 740 TFLOP/s). The ROW_SCALED copy measured +19 % on decode and +5 % on prefill for
 * such items (`bench --w-scales drift`) and no loss for one-base ones. Items with a per-32 chunk,
 * FP32 weight scales, or 1x32 activation scales outside the G32 kernels' one-base items (G32 below)
 * go chunk by chunk (consumer.cuh).
 * The decision (per warpgroup, made by the producer for the item's header, item_header.cuh:
 * finish_item_header; without headers, in a G32 kernel built with HFP4_SM90_G32_HEADER_SLOT=0, by
 * the consumers' vote, chunks_one_base): one-base when every mode byte (one per chunk) is one-base and not per-32,
 * all folded when none is per-32. */
/* A consumer thread's shared-window addresses of what the look-ahead loop reads, for stage 0: stage s
 * is at base + s x the region's stage stride (one IMAD each), set once per item.
 * NOTE: from the generic pointers of sm90_smem the loop recomputed the shared window's base
 * (S2R SR_CgaCtaId, LEA, masks: ~10 instructions) for the descriptor, the barriers and the loads
 * at every chunk, on the issue slots that bound the consumers. */
typedef struct sm90_lookahead_addrs {
    uint32_t desc_lo; /* the activation tile's wgmma descriptor, low word */
    uint32_t w;       /* this thread's 16-byte weight words (the second is HFP4_SM90_PAIR_BYTES on) */
    uint32_t ws;      /* its row r0's scale word (row r0 + 8's is 32 bytes on) */
    uint32_t full;    /* the stage's full barrier (the empty one is STAGES x 8 bytes on) */
    uint32_t as;      /* the stage's activation scales, at this thread's first pair (promote's t4 offset) */
} sm90_lookahead_addrs;

/* NOTE: the addresses pass through an opaque move, so the compiler keeps them in registers: it
 * rematerialized them from the shared window's base at every chunk instead (S2R SR_CgaCtaId, LEA,
 * masks), and t4 from SR_TID. */
static __device__ __forceinline__ uint32_t opaque(uint32_t v) {
    asm volatile("mov.b32 %0, %0;" : "+r"(v));
    return v;
}

template <int BT, bool W_FP32, int MINB>
static __device__ __forceinline__ sm90_lookahead_addrs lookahead_addrs(const sm90_smem sm, int wg_off, int warpgroup,
                                                                       int r0, int t4) {
    typedef sm90_tile_config<BT, W_FP32, MINB> cfg;
    static_assert(!W_FP32, "the look-ahead loop reads UE8M0 scale words (4 bytes a row)");
    sm90_lookahead_addrs a;
    a.desc_lo = opaque(smem_desc_lo_k128(smem_addr(sm.a_tiles)));
    a.w = opaque(smem_addr(sm.w_stages) + wg_off);
    a.ws = opaque(smem_addr(sm.ws_stages) + warpgroup * cfg::WS_WG_BYTES + r0 * 4);
    a.full = opaque(smem_addr(sm.full));
    a.as = opaque(smem_addr(sm.a_scale_s) + a_scale_t4_offset<BT>(t4) * 4);
    return a;
}

/* The folded chunk in stage `stage`: this thread's fragments of its 4 k32 steps (dst); its rows'
 * (r0, r0 + 8) e_max if asked (em). */
template <int BT, bool W_FP32, int MINB>
static __device__ __forceinline__ void load_convert_folded(const sm90_lookahead_addrs &ad, int stage,
                                                           uint32_t (&dst)[4][4], uint32_t *em = nullptr) {
    typedef sm90_tile_config<BT, W_FP32, MINB> cfg;
    const uint32_t w_st = ad.w + stage * cfg::W_STAGE_BYTES;
    const uint4 q0 = *(const uint4 *)smem_ptr(w_st);
    const uint4 q1 = *(const uint4 *)smem_ptr(w_st + HFP4_SM90_PAIR_BYTES);
    const uint32_t ws_st = ad.ws + stage * cfg::WS_STAGE_BYTES;
    const uint32_t e0 = *(const uint32_t *)smem_ptr(ws_st), e1 = *(const uint32_t *)smem_ptr(ws_st + 32);
    convert_folded_chunk(dst, q0, q1, e0, e1);
    if (em) {
        em[0] = (e0 >> 16) & 255;
        em[1] = (e1 >> 16) & 255;
    }
}

/* CARRY (the decode tiles, BT <= HFP4_SM90_CARRY_MAX_BT; run_consumers, consumer.cuh): one-base items
 * take the next item's first chunk words early.
 * An item's last step tests once, without blocking, whether the next stage has landed (it is the
 * next item's first stage, an all-padding tile's header-only stage or the end mark: a header always
 * sits there, item_header.cuh); if it has and its header says one-base for this warpgroup, the
 * thread loads that chunk's words while the last wgmmas run. After the epilogue the warpgroup waits
 * for that stage as before (uniform: it decides whether the run of one-base items goes on), and each
 * thread either converts the words it holds or loads them then. Why: at the 8-token tile an item's
 * first chunk was awaited, loaded and converted after the epilogue with nothing in flight (~370
 * cycles of ~13000 per w2 item, bench/RESULTS.md v11 phases). Measured (v13, H200, masked graph,
 * V4-Flash): +2-5 % at T = 8..128 (w2 T = 32 3.59 -> 3.73 TB/s). The raw words (10 registers) are
 * carried, not the converted fragments (18): with those the two-CTA kernel spilled 128 bytes at
 * its 96 registers. The test never blocks, so a late stage delays neither the epilogue nor the
 * stage's release (a blocking wait there would, whenever the producer lags: T = 1..8). */
#ifndef HFP4_SM90_CARRY_MAX_BT
#define HFP4_SM90_CARRY_MAX_BT 64 /* (NVFLAGS_EXTRA=-DHFP4_SM90_CARRY_MAX_BT=0 builds without it, for A/Bs) */
#endif
typedef struct sm90_carried_chunk { /* a chunk's words, loaded early (CARRY below) */
    uint4 q0, q1;
    uint32_t e0, e1;
} sm90_carried_chunk;

/* G32 (1x32 activation scales, one-base items, every tile: HFP4_SM90_G32_MAX_BT): the look-ahead
 * loop with each chunk's 4 k32 steps in accumulators of their own, each promoted with its own
 * k-group's activation scales (a promotion a step where 1x128 scales take one a chunk). The weight
 * side is the one-base folding as for 1x128 (the 32-groups' relative exponents are inside the FP8 values),
 * so the sums are those of the general per-32 path (consumer.cuh), which 1x32 scales took before:
 * every step summed from zero, promoted in FP32. Why: transformers quantizes activations with
 * gran_k 32 for its FP4 experts (docs: deepseek-v4.md), and the general path ran decode at ~60 %
 * of the 1x128 speed (H200, masked T = 32: 2.37 vs 3.99 TB/s), prefill at ~40 %. The 4
 * accumulators are 2 BT registers a thread: 4 at once up to 32 tokens, in halves at the two-CTA
 * 8-token tile and at 64 tokens, one step at a time at 128 (QUARTERS: each step's wait then
 * serializes the warpgroup, the other warpgroup's wgmmas fill it). */
/* Whether every chunk of a tile is folded with one base over K (its mode bytes, sm90_layout.h), by
 * a whole warp: the G32 decision where there is no header to carry it (consumer.cuh) */
static __device__ __forceinline__ bool chunks_one_base(const uint8_t *modes, int64_t chunks, int lane) {
    bool ok = true;
#pragma unroll 1 /* (K > 4096 only) */
    for (int64_t c = lane; c < chunks; c += 32)
        ok = ok && (__ldg(modes + c) & (HFP4_SM90_MODE_PER32 | HFP4_SM90_MODE_ONE_BASE)) == HFP4_SM90_MODE_ONE_BASE;
    return __all_sync(0xFFFFFFFFu, ok);
}

/* Chunk kc, in stage s, whose fragments (cur) are loaded: its wgmmas go out; with HAS_NEXT, chunk
 * kc + 1 is awaited, loaded and converted into nxt beside the promotion of chunk kc into fin; then
 * the stage's release and (s, phase) stepped to the next stage. ROW_SCALED (a folded item that is not one-base):
 * fin is in absolute units and each chunk promotes with its rows' scales (emc: chunk kc's e_max,
 * emn: chunk kc + 1's, loaded here), FMUL + FFMA per accumulator but no vote and no branch; else one
 * FFMA per accumulator in the units of the rows' one base. */
template <int BT, bool W_FP32, int MINB, bool ROW_SCALED, bool HAS_NEXT, bool CARRY = false, bool G32 = false,
          int NW = BT>
static __device__ __forceinline__ bool pipelined_step(const sm90_lookahead_addrs &ad, uint32_t (&cur)[4][4],
                                                      uint32_t (&nxt)[4][4], const uint32_t (&emc)[2],
                                                      uint32_t (&emn)[2], float *fin, int &s, uint32_t &phase,
                                                      const sm90_smem *sm = nullptr, int warpgroup = 0,
                                                      sm90_carried_chunk *carry = nullptr) {
    typedef sm90_tile_config<BT, W_FP32, MINB, G32> cfg;
    constexpr int STAGES = cfg::STAGES;
    /* NOTE: with HFP4_SM90_DESC_REDUX the low word goes through a warp reduction (every lane holds
     * the same value) because its result is in a uniform register: ptxas then forms the 4 k32
     * steps' descriptors on the uniform datapath, where from the vector register the stage index
     * lives in it moved each one over with two R2UR, an IMAD.MOV and a VIADD. H200 (bench/RESULTS.md
     * v21, timed only): decode T = 8 +3...+4 % (masked graph w13 3.47-3.64 -> 3.72-3.73, w2
     * 3.22-3.24 -> 3.33-3.35 TB/s), prefill level. 0 restores the vector-register form. */
    sm90_desc desc;
#if HFP4_SM90_DESC_REDUX
    desc.lo = __reduce_max_sync(0xFFFFFFFFu, ad.desc_lo + s * (cfg::A_TILE_BYTES >> 4));
#else
    desc.lo = ad.desc_lo + s * (cfg::A_TILE_BYTES >> 4);
#endif
    desc.hi = SM90_DESC_HI_K128_SWIZZLE128;
    static_assert(!G32 || (!ROW_SCALED && BT <= HFP4_SM90_G32_MAX_BT), "G32: one-base items, UE8M0 weight scales");
    /* G32 in halves (two CTAs an SM, 96 registers: 4 accumulators spilled; and 64 columns, whose 4
     * accumulators would be 128 registers): steps 0-1, their promotion, then steps 2-3; one step at
     * a time at 96 and 128 columns (an accumulator is 48 or 64 registers there) (below) */
    constexpr bool QUARTERS = G32 && (NW == 128 || NW == 96);
    constexpr bool HALVES = G32 && !QUARTERS && (MINB == 2 || NW == 64);
    float acc[NW / 2];
    float accs[QUARTERS ? 1 : HALVES ? 2 : 4][NW / 2]; /* (G32 only) */
    if constexpr (QUARTERS) wgmma_fp8_rs_steps<NW, 1, 0>(accs, cur, desc);
    else if constexpr (HALVES) wgmma_fp8_rs_steps<NW, 2, 0>(accs, cur, desc);
    else if constexpr (G32) wgmma_fp8_rs_steps<NW, 4, 0, false>(accs, cur, desc);
    else wgmma_fp8_rs_chunk<NW>(acc, cur, desc);
    const int s1 = s + 1 == STAGES ? 0 : s + 1;
    const uint32_t phase1 = s1 == 0 ? phase ^ 1 : phase;
    /* NOTE: HAS_NEXT is a template argument (the item's last chunk is a step of its own,
     * pipelined_item), so chunk kc + 1's conversion and chunk kc's promotion share one basic
     * block. ptxas then waits for the wgmmas right after the loads below and interleaves the whole
     * conversion with the promotion's FFMAs (the two halves' order in the source does not survive):
     * +3-5 % over a runtime `if` around the conversion, which made two blocks that ran one after
     * the other (bench/RESULTS.md v10). */
    uint4 q0 = make_uint4(0, 0, 0, 0), q1 = q0;
    uint32_t e0 = 0, e1 = 0;
    if constexpr (HAS_NEXT) {
        mbar_wait_sa(ad.full + s1 * 8, phase1);
        /* (load_convert_folded's loads, written out: through a helper with reference outputs the
         * tiles' SASS changed) */
        const uint32_t w_st = ad.w + s1 * cfg::W_STAGE_BYTES;
        q0 = *(const uint4 *)smem_ptr(w_st);
        q1 = *(const uint4 *)smem_ptr(w_st + HFP4_SM90_PAIR_BYTES);
        const uint32_t ws_st = ad.ws + s1 * cfg::WS_STAGE_BYTES;
        e0 = *(const uint32_t *)smem_ptr(ws_st);
        e1 = *(const uint32_t *)smem_ptr(ws_st + 32);
        convert_folded_chunk<0, 2>(nxt, q0, q1, e0, e1);
        if constexpr (ROW_SCALED) {
            emn[0] = (e0 >> 16) & 255;
            emn[1] = (e1 >> 16) & 255;
        }
    }
    /* CARRY (the item's last step, one-base): one non-blocking test of the next stage; if it has
     * landed and its header says one-base for this warpgroup, this thread loads its words */
    bool loaded = false;
    if constexpr (CARRY && !HAS_NEXT && !ROW_SCALED) {
        if (mbar_test_wait_sa(ad.full + s1 * 8, phase1)) {
            const uint32_t flags = item_header_slot<BT, W_FP32, MINB, G32>(sm->a_scale_s, s1)->flags;
            if ((flags & (HFP4_SM90_HDR_END | HFP4_SM90_HDR_ZERO)) == 0 && (flags & HFP4_SM90_HDR_ONE_BASE(warpgroup)) != 0) {
                const uint32_t w_st = ad.w + s1 * cfg::W_STAGE_BYTES;
                carry->q0 = *(const uint4 *)smem_ptr(w_st);
                carry->q1 = *(const uint4 *)smem_ptr(w_st + HFP4_SM90_PAIR_BYTES);
                const uint32_t ws_st = ad.ws + s1 * cfg::WS_STAGE_BYTES;
                carry->e0 = *(const uint32_t *)smem_ptr(ws_st);
                carry->e1 = *(const uint32_t *)smem_ptr(ws_st + 32);
                loaded = true;
            }
        }
    }
    wgmma_wait<0>();
    if constexpr (QUARTERS) {
        const float *sa = (const float *)smem_ptr(ad.as + s * cfg::AS_STAGE_BYTES);
        wgmma_steps_waited<NW, 1, 0>(accs, cur);
        promote<NW, false, BT>(fin, accs[0], 1.0f, 1.0f, sa, 0); /* k-group 0 */
        wgmma_fp8_rs_steps<NW, 1, 1>(accs, cur, desc);
        wgmma_wait<0>();
        wgmma_steps_waited<NW, 1, 1>(accs, cur);
        promote<NW, false, BT>(fin, accs[0], 1.0f, 1.0f, sa + BT, 0);
        wgmma_fp8_rs_steps<NW, 1, 2>(accs, cur, desc);
        if constexpr (HAS_NEXT) convert_folded_chunk<2, 2>(nxt, q0, q1, e0, e1);
        wgmma_wait<0>();
        wgmma_steps_waited<NW, 1, 2>(accs, cur);
        promote<NW, false, BT>(fin, accs[0], 1.0f, 1.0f, sa + 2 * BT, 0);
        wgmma_fp8_rs_steps<NW, 1, 3>(accs, cur, desc);
        wgmma_wait<0>();
        wgmma_steps_waited<NW, 1, 3>(accs, cur);
        promote<NW, false, BT>(fin, accs[0], 1.0f, 1.0f, sa + 3 * BT, 0);
    } else if constexpr (HALVES) {
        const float *sa = (const float *)smem_ptr(ad.as + s * cfg::AS_STAGE_BYTES);
        wgmma_steps_waited<NW, 2, 0>(accs, cur);
#pragma unroll
        for (int st = 0; st < 2; st++) promote<NW, false, BT>(fin, accs[st], 1.0f, 1.0f, sa + st * BT, 0); /* k-group st */
        wgmma_fp8_rs_steps<NW, 2, 2>(accs, cur, desc);
        if constexpr (HAS_NEXT) convert_folded_chunk<2, 2>(nxt, q0, q1, e0, e1);
        wgmma_wait<0>();
        wgmma_steps_waited<NW, 2, 2>(accs, cur);
#pragma unroll
        for (int st = 0; st < 2; st++) promote<NW, false, BT>(fin, accs[st], 1.0f, 1.0f, sa + (2 + st) * BT, 0);
    } else if constexpr (G32) {
        wgmma_steps_waited<NW, 4>(accs, cur);
        if constexpr (HAS_NEXT) convert_folded_chunk<2, 2>(nxt, q0, q1, e0, e1);
        const float *sa = (const float *)smem_ptr(ad.as + s * cfg::AS_STAGE_BYTES);
#pragma unroll
        for (int st = 0; st < 4; st++) promote<NW, false, BT>(fin, accs[st], 1.0f, 1.0f, sa + st * BT, 0); /* k-group st */
    } else {
        wgmma_chunk_waited<NW>(acc, cur); /* the wgmmas read cur from registers until here */
        if constexpr (HAS_NEXT) convert_folded_chunk<2, 2>(nxt, q0, q1, e0, e1);
        const float *sa = (const float *)smem_ptr(ad.as + s * cfg::AS_STAGE_BYTES);
        if constexpr (ROW_SCALED)
            promote<NW, true, BT>(fin, acc, row_scale_from_emax(emc[0]), row_scale_from_emax(emc[1]), sa, 0);
        else promote<NW, false, BT>(fin, acc, 1.0f, 1.0f, sa, 0); /* t4's offset is in ad.as */
    }
    mbar_arrive_sa(ad.full + (STAGES + s) * 8); /* the empty barrier, after the last read of the stage: wgmmas waited, scales used */
    s = s1;
    phase = phase1;
    return loaded;
}

/* The look-ahead loop of an all-folded item (pipelined_step): fin, kept in the units of chunk 0's
 * row bases for a one-base item (rb, eb: see promote_folded) or in absolute units (ROW_SCALED), and
 * the consumers' stage counter (s, phase). CARRY (one-base items only): `carried` says this thread
 * holds the item's first chunk words in *carry (the previous item's last step loaded them; the
 * stage has landed); the return value says *carry now holds the next item's. */
template <int BT, bool W_FP32, int MINB, bool ROW_SCALED, bool CARRY = false, bool G32 = false, int NW = BT>
static __device__ __forceinline__ bool pipelined_item(const sm90_smem sm, int64_t chunks, int wg_off, int warpgroup,
                                                      int r0, int t4, float *fin, float &rb0, float &rb1,
                                                      uint32_t &eb0, uint32_t &eb1, int &s, uint32_t &phase,
                                                      sm90_carried_chunk *carry = nullptr, bool carried = false) {
    static_assert(!CARRY || !ROW_SCALED, "the carry serves one-base items");
    uint32_t fa[4][4], fb[4][4], ea[2], ebn[2] = {0, 0};
    const sm90_lookahead_addrs ad = lookahead_addrs<BT, W_FP32, MINB>(sm, wg_off, warpgroup, r0, t4);
    if (CARRY && carried) {
        convert_folded_chunk(fa, carry->q0, carry->q1, carry->e0, carry->e1);
        ea[0] = (carry->e0 >> 16) & 255;
        ea[1] = (carry->e1 >> 16) & 255;
    } else {
        mbar_wait_sa(ad.full + s * 8, phase);
        load_convert_folded<BT, W_FP32, MINB>(ad, s, fa, ea);
    }
    if constexpr (CARRY) __syncwarp(); /* (per-thread paths above; the wgmmas below are .sync.aligned) */
    HFP4_DIAG_PHASE(HFP4_DIAG_PH_FIRST);
    if constexpr (!ROW_SCALED) {
        eb0 = ea[0];
        eb1 = ea[1];
        rb0 = row_scale_from_emax(ea[0]);
        rb1 = row_scale_from_emax(ea[1]);
    }
    /* two chunks a trip (fragments fa, then fb), the last one or two after the loop: the item's
     * last chunk converts no next one (HAS_NEXT false) */
    int32_t kc = 0;
    for (; kc + 2 < (int32_t)chunks; kc += 2) {
        pipelined_step<BT, W_FP32, MINB, ROW_SCALED, true, false, G32, NW>(ad, fa, fb, ea, ebn, fin, s, phase);
        pipelined_step<BT, W_FP32, MINB, ROW_SCALED, true, false, G32, NW>(ad, fb, fa, ebn, ea, fin, s, phase);
    }
    if (kc + 2 == (int32_t)chunks) {
        pipelined_step<BT, W_FP32, MINB, ROW_SCALED, true, false, G32, NW>(ad, fa, fb, ea, ebn, fin, s, phase);
        return pipelined_step<BT, W_FP32, MINB, ROW_SCALED, false, CARRY, G32, NW>(ad, fb, fa, ebn, ea, fin, s, phase, &sm,
                                                                               warpgroup, carry);
    }
    return pipelined_step<BT, W_FP32, MINB, ROW_SCALED, false, CARRY, G32, NW>(ad, fa, fb, ea, ebn, fin, s, phase, &sm,
                                                                           warpgroup, carry);
}
