/*
 * sm90_plan.c - support matrix and tile choice of the SM90 FP8 x FP4 kernels (see sm90_plan.h).
 */
#include <stdlib.h>
#include <string.h>

#include "sm90_plan.h"
#include "../weights/sm90_layout.h"

static int env_is_zero(const char *name) { return hfp4__env_is(name, "0"); }

/* The narrow-block split (narrow_items.cuh): without a hint, the contiguous layout's 128-row blocks
 * whose split row is padding (decode: a routed expert's 1-8 rows padded to 128, row 8; 16 or 32 as
 * hfp4__sm90_split_row says) go to a launch of the 8-token tile first (two CTAs an SM, the
 * decode tile), the others to the 128-token tile's narrow items. Where the blocks are 128-row
 * aligned and the 8-token launch's bitmask, prefix and block flags fit its shared memory (m <= 8 x
 * HFP4_SM90_SPLIT_MAX_TILES: V4-Flash under transformers' allocation up to T ~ 2048); beyond, the
 * tile follows m / groups as before. HFP4_SM90_NARROW_SPLIT=0 turns it off, for comparison (as do
 * HFP4_SM90_NARROW=0, HFP4_SM90_BALANCE=0 and a token tile capped at 64, which it needs). */
int hfp4__sm90_split_wanted(const hfp4_gemm_problem *p, int32_t alignment) {
    const char *cap = getenv("HFP4_SM90_MAX_TOKEN_TILE");
    return p->grouping == HFP4_GROUPING_CONTIGUOUS && p->expected_m == 0 && alignment % 128 == 0 &&
           hfp4__ceil_div(p->m, 8) <= HFP4_SM90_SPLIT_MAX_TILES && !env_is_zero("HFP4_SM90_NARROW_SPLIT") &&
           !env_is_zero("HFP4_SM90_NARROW") && !env_is_zero("HFP4_SM90_BALANCE") && !(cap && !strcmp(cap, "64"));
}

/* The narrow-block split's row (narrow_items.cuh): a 128-row block is narrow when row 32 is padding
 * where an expert's weights are at most 2 MB (n x k <= 2^22: the tensor-parallel shards, whose
 * one-expert blocks of 9-32 rows otherwise left the 128-token launch a lone item to stream); where
 * they are larger (a block of 9-32 rows would stream them two to four times from the 8-token tile)
 * 0: both launches pick 16 or 8 on the device from how many blocks have more than 8 rows
 * (work_items.cuh: split_row_auto; row 16 paid at T = 256 and cost at T = 512, and the host cannot
 * tell the two apart). HFP4_SM90_SPLIT_ROW=8, 16, 32 or auto fixes it (tests, comparisons). */
int32_t hfp4__sm90_split_row(int64_t n, int64_t k) {
    const char *env = getenv("HFP4_SM90_SPLIT_ROW");
    if (env && !strcmp(env, "8")) return 8;
    if (env && !strcmp(env, "16")) return 16;
    if (env && !strcmp(env, "32")) return 32;
    if (env && !strcmp(env, "auto")) return 0;
    return n * k <= ((int64_t)1 << 22) ? 32 : 0;
}

hfp4_status hfp4__sm90_plan_narrow_blocks(const char *fn, const hfp4_gemm_problem *p, const hfp4_sm90_plan *whole,
                                          hfp4_sm90_plan *narrow) {
    hfp4_gemm_problem q = *p;
    q.expected_m = 8; /* the 8-token tile */
    HFP4_TRY(hfp4__sm90_plan(fn, &q, narrow));
    /* (its block flags follow the bitmask and prefix in shared memory: tile_config.cuh) */
    if (narrow->block_tokens != 8 || narrow->params.balanced != 2 || narrow->grid_y > HFP4_SM90_SPLIT_MAX_TILES)
        return hfp4__fail(HFP4_ERR_INTERNAL, "%s: the narrow-block launch planned %d-token tiles (%lld), balanced %d",
                          fn, (int)narrow->block_tokens, (long long)narrow->grid_y, (int)narrow->params.balanced);
    narrow->params.narrow = 3;
    /* the 128-token launch's row: the two launches must agree on which blocks are narrow, or those
     * between the rows would be written by neither (each plan reads HFP4_SM90_SPLIT_ROW) */
    narrow->params.split_row = whole->params.split_row;
    /* (HFP4_SM90_SPLIT_EVICT_FIRST=0 keeps the weights in L2 normally, for comparison: with the split
     * at row 32 two-tile blocks read their weights twice; it did not help, bench/RESULTS.md v19) */
    if (env_is_zero("HFP4_SM90_SPLIT_EVICT_FIRST")) narrow->params.w_evict_first = 0;
    return HFP4_OK;
}

int32_t hfp4__sm90_pick_block_tokens(int64_t rows_per_group, int32_t alignment) {
    /* Decode-sized groups want the narrowest wgmma N (nothing wasted on padding rows); large ones
     * the widest tile that keeps the accumulators in registers. */
    /* NOTE: the 128-token tile is the default for large groups since it measured faster on the
     * H200 (V4-Flash w13 T = 16384: 447 vs 345 TFLOP/s, T = 4096: 300 vs 221; dense 8192^3: 594
     * vs 428); HFP4_SM90_MAX_TOKEN_TILE=64 caps it, for comparison. */
    int32_t cap = 128;
    const char *env = getenv("HFP4_SM90_MAX_TOKEN_TILE");
    if (env && !strcmp(env, "64")) cap = 64;
    int32_t bt = rows_per_group <= 8    ? 8
                 : rows_per_group <= 16 ? 16
                 : rows_per_group <= 32 ? 32
                 : rows_per_group <= 64 ? 64
                                        : cap;
    if (alignment > 0)
        while (bt > 8 && alignment % bt != 0) bt /= 2;
    return bt;
}

hfp4_status hfp4__sm90_plan(const char *fn, const hfp4_gemm_problem *p, hfp4_sm90_plan *plan) {
    HFP4_TRY(hfp4_check_problem(p, 1));
    HFP4_REQUIRE(p->b.dtype == HFP4_DTYPE_FP4_E2M1_SM90,
                 "%s: b.dtype = %s has no SM90 kernel; repack FP4 weights with hfp4_repack_sm90 "
                 "(b.dtype fp4_e2m1_sm90)",
                 fn, hfp4_dtype_name(p->b.dtype));
    HFP4_REQUIRE(p->a.dtype == HFP4_DTYPE_FP8_E4M3,
                 "%s: a.dtype = %s has no SM90 kernel yet (FP8 e4m3 activations only)", fn,
                 hfp4_dtype_name(p->a.dtype));
    HFP4_REQUIRE(p->a.ld % 16 == 0, "%s: a.ld = %lld bytes must be a multiple of 16 for the TMA loads", fn,
                 (long long)p->a.ld);
    HFP4_REQUIRE(((uintptr_t)p->a.data) % 16 == 0, "%s: a.data = %p must be 16-byte aligned for the TMA loads", fn,
                 p->a.data);
    HFP4_REQUIRE(p->grouping != HFP4_GROUPING_MASKED || p->num_groups == 1 || p->a.stride_group % 16 == 0,
                 "%s: a.stride_group = %lld bytes must be a multiple of 16 for the TMA loads", fn,
                 (long long)p->a.stride_group);
    HFP4_REQUIRE(((uintptr_t)p->b.data) % 16 == 0 && ((uintptr_t)p->b.scales.data) % 16 == 0,
                 "%s: b.data = %p and b.scales.data = %p must be 16-byte aligned for the bulk copies (use the buffer "
                 "hfp4_repack_sm90 filled, not an offset view of it)", fn, p->b.data, p->b.scales.data);
    HFP4_REQUIRE(p->k <= (int64_t)1 << 30 && p->m <= (int64_t)1 << 30,
                 "%s: m = %lld, k = %lld exceed the 2^30 TMA coordinate range", fn, (long long)p->m, (long long)p->k);

    memset(plan, 0, sizeof *plan);
    int32_t alignment = p->m_alignment ? p->m_alignment : HFP4_DEFAULT_M_ALIGNMENT;
    int64_t rows = p->m;
    if (p->grouping == HFP4_GROUPING_CONTIGUOUS || p->grouping == HFP4_GROUPING_CONTIGUOUS_PSUM)
        rows = p->expected_m > 0 ? p->expected_m : hfp4__ceil_div(p->m, p->num_groups);
    else if (p->grouping == HFP4_GROUPING_MASKED && p->expected_m > 0)
        rows = p->expected_m;
    int is_contig = p->grouping == HFP4_GROUPING_CONTIGUOUS || p->grouping == HFP4_GROUPING_CONTIGUOUS_PSUM;
    plan->block_tokens = hfp4__sm90_pick_block_tokens(rows, is_contig ? alignment : 0);
    /* The narrow-block split (below) runs the 128-token tile whatever m / groups says: its narrow
     * blocks go to the 8-token launch, and the 128-token tile's narrow items serve the rest (with
     * transformers' allocation, m / groups is 24 at T = 8 and 48 at T = 16: 32- and 64-token tiles
     * that computed 32 or 64 columns of one-row segments at one CTA an SM). */
    /* (Not where m / groups already asks for the 8-token tile: T = 1 under transformers, m / groups
     * = 3, where the split's second launch cost 8 us of 31: H200, V4-Flash w13 1.75 -> 1.35 TB/s.) */
    plan->rows_tile = plan->block_tokens;
    plan->narrow_split = plan->block_tokens > 8 && hfp4__sm90_split_wanted(p, alignment);
    if (plan->narrow_split) plan->block_tokens = 128;
    plan->w_fp32 = p->b.scales.dtype == HFP4_DTYPE_FP32;

    hfp4_sm90_geometry geo = hfp4_sm90_geometry_make(p->num_groups, p->n, p->k, plan->w_fp32);
    plan->grid_x = geo.n_pad / HFP4_SM90_N_ALIGN;
    plan->grid_y = hfp4__ceil_div(p->m, plan->block_tokens);
    plan->grid_z = p->grouping == HFP4_GROUPING_MASKED ? p->num_groups : 1;

    hfp4_sm90_gemm_params *k = &plan->params;
    k->grouping = (int32_t)p->grouping;
    k->layout = p->layout;
    k->m_alignment = alignment;
    k->tiles_n = plan->grid_x;
    k->tiles_m = plan->grid_y;
    k->tiles_total = plan->grid_x * plan->grid_y * plan->grid_z;
    /* the kernels count work items in 32-bit integers */
    HFP4_REQUIRE(k->tiles_total < ((int64_t)1 << 30),
                 "%s: %lld work items (m = %lld, n = %lld, groups = %d) exceed 2^30", fn, (long long)k->tiles_total,
                 (long long)p->m, (long long)p->n, (int)p->num_groups);
    /* (after the check: tiles_n and tiles_m are then below 2^30, as hfp4_sm90_divisor needs) */
    hfp4_sm90_divisor((uint32_t)k->tiles_n, &k->tiles_n_mul, &k->tiles_n_shift);
    hfp4_sm90_divisor((uint32_t)k->tiles_m, &k->tiles_m_mul, &k->tiles_m_shift);
    /* (only the psum layout divides by it, rows < 2^30; there check_problem has made it a positive
     * int32, below 2^31 as hfp4_sm90_divisor needs. Other layouts leave it unchecked: unused.) */
    hfp4_sm90_divisor((uint32_t)alignment, &k->m_align_mul, &k->m_align_shift);
    k->num_groups = p->num_groups;
    /* NOTE: with the masked layout most items of a decode batch are dead (rows past masked_m), and
     * CTA c walking items c, c + G, ... gets the live ones unevenly: with 46 of 256 experts routed
     * (V4-Flash T = 8) each CTA's stride meets ~5.6 live items on average but the busiest ~11, and
     * the launch lasts as long as the busiest. Balanced, each CTA takes every G-th live item, ranked
     * through a prefix of the groups' live items that the kernel builds in shared memory.
     * HFP4_SM90_BALANCE=0 turns it off, for comparison. */
    const char *bal = getenv("HFP4_SM90_BALANCE");
    /* The contiguous layout (expert ids) likewise: its token tiles that compute are spread as
     * unevenly, and most decode tiles are padding, each once an item of its own that only wrote
     * zeros; balanced, the CTAs share the computing items and then zero the padding tiles in one
     * pass of vector stores. */
    k->balanced = 0;
    if (plan->block_tokens <= 64 && !(bal && !strcmp(bal, "0"))) {
        if (p->grouping == HFP4_GROUPING_MASKED && p->num_groups <= HFP4_SM90_BALANCE_MAX_GROUPS) k->balanced = 1;
        if (p->grouping == HFP4_GROUPING_CONTIGUOUS && plan->grid_y <= HFP4_SM90_BALANCE_MAX_TILES) k->balanced = 2;
    }
    k->m = p->m;
    k->n = p->n;
    k->k = p->k;
    k->a_scales = p->a.scales.data;
    k->a_scale_dtype = (int32_t)p->a.scales.dtype;
    k->a_gran_k = p->a.scales.gran_k;
    k->a_scale_stride_mn = p->a.scales.stride_mn;
    k->a_scale_stride_k = p->a.scales.stride_k;
    k->a_scale_stride_group = p->a.scales.stride_group;
    k->a_k_groups = hfp4__ceil_div(p->k, p->a.scales.gran_k);
    k->w = (const uint8_t *)p->b.data;
    k->w_group_bytes = geo.n_pad * geo.k_pad / 2;
    k->w_scales = p->b.scales.data;
    k->w_scale_group_elems = geo.n_pad * geo.chunks; /* one uint32 (UE8M0) or float4 (FP32) per row and chunk */
    k->w_pairs = geo.pairs;
    k->w_chunks = geo.chunks;
    k->w_tiles = geo.tiles;
    k->w_modes = (const uint8_t *)p->b.data + geo.mode_offset;
    /* one token tile per group reads each weight tile once: keep it from evicting reused data */
    k->w_evict_first = rows <= plan->block_tokens;
    k->d = p->d.data;
    k->c = p->d.c;
    k->d_fp32 = p->d.dtype == HFP4_DTYPE_FP32;
    k->ldd = p->d.ld;
    k->d_stride_group = p->d.stride_group;
    k->d_zero_padding = p->d_padding != HFP4_D_PADDING_ANY;
    {
        /* 16-byte stores of 8 outputs need every row (and group) of D and C to start 16-byte aligned */
        const int64_t esz = k->d_fp32 ? 4 : 2, per16 = 16 / esz;
        const int rows_ok = p->d.ld % per16 == 0 && (p->grouping != HFP4_GROUPING_MASKED || p->num_groups == 1 ||
                                                     p->d.stride_group % per16 == 0); /* one group: no group stride */
        const int base_ok = ((uintptr_t)p->d.data) % 16 == 0 && ((uintptr_t)p->d.c) % 16 == 0;
        k->d_vec = rows_ok && base_ok;
    }
    /* NOTE: the 128-token tile stores D by TMA (the consumers write the tile once to shared memory
     * and go on; their global-store loop was ~8 % of prefill: V4-Flash w13 T = 16384 574 -> 629
     * TFLOP/s with no epilogue at all, H200). BF16 without C: FP32 output and C keep the vector
     * stores. HFP4_SM90_TMA_STORE=0 turns it off, for comparison. N a multiple of 8: the TMA store
     * clips a row at n only to 16 bytes (the FP8-weight kernel's wrote D's padding columns so,
     * bench/RESULTS.md v40). */
    {
        const char *env = getenv("HFP4_SM90_TMA_STORE");
        k->d_tma = plan->block_tokens == 128 && k->d_vec && !k->d_fp32 && p->d.c == NULL && p->n % 8 == 0 &&
                   !(env && !strcmp(env, "0"));
    }

    /* NOTE: HFP4_SM90_SPLIT=1 (off by default) runs the 8-token tile in clusters of two CTAs, which
     * split each item's K between them when a launch has at most half as many live items as CTAs
     * (decided on the device: split_k.cuh); it needs the balanced walk, item headers, and 8 chunks;
     * built for UE8M0 weight scales with 1x128 activation scales (the form the tests split) (a split
     * of fewer measured slower: TP8 w2, K = 256). Off because a layer's two GEMMs chained under PDL
     * lost with it (H200, bench/RESULTS.md v12: V4-Flash layer graph T = 64/128 -5...-7 %, TP8 layer
     * T = 1 -20 %), though TP8 w13 alone gained at T = 1 (+12...+21 %); the cluster launch's gains at
     * T = 8 followed the routing. */
    {
        const char *env = getenv("HFP4_SM90_SPLIT");
        k->split = plan->block_tokens == 8 && k->balanced != 0 && geo.chunks >= 8 &&
                           !plan->w_fp32 && p->a.scales.gran_k == 128 && env && !strcmp(env, "1")
                       ? 2
                       : 0;
        k->split_max_items = 0;
    }
    /* The dynamic walk (dynamic_walk.cuh: work items handed out in the order the CTAs ask, from a
     * counter the launcher gives the launch): the decode tiles with the balanced walk and no K-split
     * (the kernel uses it when a launch has enough items), and the 128-token tile of the contiguous
     * and psum layouts, its items in raster order (not the narrow-block split's 128-token launch,
     * which leaves the short segments to the other; the launcher takes a counter only with more
     * items than CTAs). HFP4_SM90_DYNAMIC=0 turns it off, for comparison. */
    {
        const int prefill = plan->block_tokens == 128 && is_contig && !plan->narrow_split;
        k->dynamic = (prefill || (k->balanced != 0 && k->split == 0)) && !env_is_zero("HFP4_SM90_DYNAMIC");
        k->dyn_slot = -1;
    }
    /* Narrow items (narrow_items.cuh): the 128-token tile of the contiguous and psum layouts loads and
     * computes only the first 8, 32, 64 or 96 token columns of an item whose rows end there (a
     * decode segment of a few rows padded to 128, which DeepGEMM's contiguous API, having no
     * expected_m, sends to this tile; a group's last tile in prefill). HFP4_SM90_NARROW=0 turns it
     * off, for comparison. */
    k->narrow = plan->narrow_split ? 2 /* (hfp4__sm90_split_wanted) */
                                   : plan->block_tokens == 128 && is_contig && !env_is_zero("HFP4_SM90_NARROW");
    k->split_row = hfp4__sm90_split_row(p->n, p->k); /* (the split's 8-token launch takes this plan's) */

    plan->warp_decode = hfp4__sm90_warp_wanted(p, plan);
    const int64_t warp_groups = p->grouping == HFP4_GROUPING_MASKED ? p->num_groups : 1;
    plan->warp_split =
        plan->warp_decode ? hfp4__sm90_warp_split(geo.chunks, p->a.scales.gran_k == 32, plan->w_fp32, warp_groups) : 1;
    /* the automatic choice needs a split of 4 or 8 (the launcher checks the units too) */
    if (plan->warp_decode == 2 && plan->warp_split < 4) {
        plan->warp_decode = 0;
        plan->warp_split = 1;
    }

    plan->a_dims[0] = p->k;
    plan->a_dims[1] = p->m;
    plan->a_dims[2] = p->grouping == HFP4_GROUPING_MASKED ? p->num_groups : 1;
    plan->a_strides[0] = p->a.ld;
    /* one group: the group stride is never used, and may be 0 (which TMA rejects) */
    plan->a_strides[1] = p->grouping == HFP4_GROUPING_MASKED && p->num_groups > 1 ? p->a.stride_group : p->a.ld * p->m;
    /* (unused when 1 group) */
    if (plan->a_strides[1] % 16 != 0) plan->a_strides[1] = hfp4__align(plan->a_strides[1], 16);
    return HFP4_OK;
}

int64_t hfp4__sm90_warp_smem_bytes(int64_t chunks, int gran32, int w_fp32, int64_t groups, int32_t split) {
    const int64_t bytes = 1024 + chunks * 1024 + (int64_t)sizeof(float) * 8 * (gran32 ? 4 * chunks : chunks) +
                          chunks * 64 * (w_fp32 ? 16 : 4) + ((chunks + 15) & ~(int64_t)15) +
                          (int64_t)sizeof(int32_t) * (groups + 1);
    /* the K-split's slots (16-byte aligned after the prefix) and its two barriers */
    return split > 1 ? hfp4__align(bytes, 16) + (int64_t)(split - 1) * 128 * 16 + 16 : bytes;
}

static int warp_split_cap = -1; /* hfp4__sm90_warp_split_set: -1 the plan decides */
static int warp_split_env = -1; /* HFP4_SM90_WARP_SPLIT, read once */

void hfp4__sm90_warp_split_set(int max_split) { __atomic_store_n(&warp_split_cap, max_split, __ATOMIC_RELAXED); }

int32_t hfp4__sm90_warp_split(int64_t chunks, int gran32, int w_fp32, int64_t groups) {
    if (!hfp4__env_switch("HFP4_SM90_WARP_SPLIT", 1, &warp_split_env)) return 1;
    const int cap = __atomic_load_n(&warp_split_cap, __ATOMIC_RELAXED);
    int32_t s = HFP4_SM90_WARP_MAX_SPLIT;
    if (cap >= 1 && cap < s) s = cap;
    while (s > 1 && (chunks < (int64_t)s * HFP4_SM90_WARP_MIN_PIECE ||
                     hfp4__sm90_warp_smem_bytes(chunks, gran32, w_fp32, groups, s) > HFP4_SM90_WARP_MAX_SMEM))
        s /= 2;
    return s;
}

static int warp_override = -1; /* hfp4__sm90_warp_set: -1 the switch decides */
static int warp_env = -2;      /* HFP4_SM90_WARP_DECODE, read once: 1 "1", 0 "0", -1 anything else */

void hfp4__sm90_warp_set(int on) { __atomic_store_n(&warp_override, on < 0 ? -1 : (on ? 1 : 0), __ATOMIC_RELAXED); }

/* -1: no switch (automatic), 0: off, 1: on */
static int warp_switch(void) {
    const int over = __atomic_load_n(&warp_override, __ATOMIC_RELAXED);
    return over >= 0 ? over : hfp4__env_tristate("HFP4_SM90_WARP_DECODE", &warp_env);
}

int hfp4__sm90_warp_wanted(const hfp4_gemm_problem *p, const hfp4_sm90_plan *plan) {
    const int sw = warp_switch();
    if (sw == 0 || (sw < 0 && p->grouping != HFP4_GROUPING_NONE)) return 0;
    int64_t rows, groups = 1;
    if (p->grouping == HFP4_GROUPING_MASKED) {
        rows = p->expected_m > 0 ? p->expected_m : p->m;
        groups = p->num_groups;
    } else if (p->grouping == HFP4_GROUPING_NONE) {
        rows = p->m;
    } else {
        return 0;
    }
    const hfp4_sm90_gemm_params *k = &plan->params;
    /* (the main kernel serves the rest: more rows, long K, very many groups, FP32 weight scales
     * whose staged copy would not fit) */
    const int fits =
        rows <= HFP4_SM90_WARP_TOKENS && groups <= HFP4_SM90_WARP_MAX_GROUPS && p->k <= HFP4_SM90_WARP_MAX_K &&
        hfp4__sm90_warp_smem_bytes(k->w_chunks, k->a_gran_k == 32, plan->w_fp32, groups, 1) <= HFP4_SM90_WARP_MAX_SMEM;
    return !fits ? 0 : sw > 0 ? 1 : 2;
}
