/*
 * fp8_fp4_gemm.cu - instantiations and the launcher of the SM90 FP8 x FP4 GEMM (hfp4_gemm).
 */
#include "../../runtime/cuda_runtime.h"
#include "../../plan/sm90_plan.h"
#include "bf16_fp4_gemm.h"
#include "fp8_fp8_gemm.h"
#include "warp_decode.h"
#include "dyn_slots.h"
#include "fp8_fp4_gemm.cuh"
#include "diag_timeline_print.cuh"

#include <stdlib.h>
#include <string.h>

/* The kernel's tensor maps: A with the tile's box, D (the 128-token tile's TMA store; else unused),
 * A with an 8-row box (the 128-token tile's narrow items, narrow_items.cuh; else unused) */
typedef struct sm90_launch_maps {
    CUtensorMap a, d, a_narrow;
} sm90_launch_maps;

/* A switch kept for comparisons: on unless the environment sets `name` to "0", read once */
static int comparison_switch_on(const char *name, int *cache) { return hfp4__env_switch(name, 1, cache); }

/* programmatic dependent launch (the kernel's NOTE at grid_dependency_wait): on by default,
 * HFP4_SM90_PDL=0 turns it off, for comparison */
static int pdl_on(void) {
    static int pdl_switch = -1;
    return comparison_switch_on("HFP4_SM90_PDL", &pdl_switch);
}

template <int BT, bool W_FP32, int MINB = 1, bool SPLIT = false, bool G32 = false, bool EARLY = false>
static hfp4_status launch(const char *fn, const hfp4_sm90_plan *plan, const hfp4_current_device *dev,
                          const sm90_launch_maps *maps, cudaStream_t stream) {
    typedef sm90_tile_config<BT, W_FP32, MINB, G32> cfg;
    auto kernel = hfp4_sm90_fp8_fp4_gemm_kernel<BT, W_FP32, MINB, SPLIT, G32, EARLY>;
    HFP4_REQUIRE(cfg::SMEM_BYTES <= dev->max_smem_optin, "%s: tile BT=%d needs %d bytes of shared memory, device has %d",
                 fn, BT, cfg::SMEM_BYTES, dev->max_smem_optin);
    /* NOTE: set on every call: the attribute belongs to the current context (a cache would go
     * stale after cudaDeviceReset), and the call is cheap and legal during graph capture. */
    HFP4_CUDA_TRY(fn, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, cfg::SMEM_BYTES));
    /* two CTAs per SM need the largest shared-memory carve-out (2 x 112 KB); it is a hint, and the
     * default, but say so rather than rely on the driver's choice (review) */
    if (MINB > 1)
        HFP4_CUDA_TRY(fn, cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                               cudaSharedmemCarveoutMaxShared));
    static int built_regs = 0; /* per instantiation (hfp4__require_kernel_regs says why) */
    HFP4_TRY(hfp4__require_kernel_regs(fn, "kernel", (const void *)kernel, &built_regs, 3,
                                       cfg::PRODUCER_REGS + 2 * cfg::CONSUMER_REGS));
    /* Persistent: one CTA per SM (MINB per SM) walks the work items, so the producer streams the
     * next item's weights while the consumers finish the current one, and unrouted experts' or
     * all-padding items cost a shuffle, not a CTA launch (FOR_EACH_ITEM probes 32 items per load).
     * (One CTA per masked item was measured at 90 us for V4-Flash w13 T = 1: ~8000 CTAs that only
     * read masked_m and exit.) */
    const int64_t items = plan->params.tiles_total;
    int64_t ctas = items < (int64_t)dev->num_sms * MINB ? items : (int64_t)dev->num_sms * MINB;
    HFP4_REQUIRE(ctas <= 0x7FFFFFFF, "%s: %lld work items exceed the grid limit", fn, (long long)ctas);
    hfp4_sm90_gemm_params params = plan->params;
    /* a counter slot (dyn_slots.h) only where the device may walk dynamically: dyn_wanted's item
     * headers (item_headers_on) and 8 chunks, mirrored here, so that captured launches that never
     * can (the TP shards' short K, 1x32 scales on a tile without a header slot) hold no slot */
    const bool headers = cfg::HEADER_SLOT || params.a_gran_k != 32; /* (item_headers_on) */
    if (BT <= 64 && params.dynamic && headers && params.w_chunks >= 8)
        params.dyn_slot = hfp4__sm90_dyn_slot(dev->device, stream);
    /* the 128-token tile's contiguous and psum items in order (the plan's choice, dynamic_walk.cuh),
     * with item headers (the consumers do not walk) and more items than CTAs (else every item is a
     * CTA's first) */
    if (BT == 128 && params.dynamic && headers && items > ctas)
        params.dyn_slot = hfp4__sm90_dyn_slot(dev->device, stream);
    /* Prefill items in raster groups of token tiles (work_items.cuh item_tiles), the 128-token tile
     * only, in the layouts whose items carry no group index (all but masked), where there is more
     * than one group (a group's items, G x tiles_n, then stay below the plan's 2^30):
     * - dense, 16 token tiles (the FP8 x FP8 kernel's FW_GROUP_M), where the weights are too large to
     *   stay in L2 while n-tile-fastest waves stream all of them (more than 16 MB of FP4: a third of
     *   the H200's 50 MB L2). H200, 8192^3 (32 MB of FP4): L2 hits 72 -> 92 %, DRAM reads 1.00 ->
     *   0.29 GB a launch, sustained 787-791 -> 815-817 TFLOP/s; 4096 x 4096 x 7168 (15 MB) and
     *   16384 x 7168 x 2048 (7 MB), whose weights stay in L2 either way, measured ~1 % slower with it.
     * - contiguous and psum, 4 token tiles (about one expert's rows at V4-Flash T = 16384): V4-Flash
     *   w13 T = 16384 DRAM reads 6.44 -> 5.25 GB, sustained 677-681 -> 690 TFLOP/s; w2 and T = 4096
     *   level; 16 tiles read as much DRAM as none (a group's first and last experts straddle it).
     *   Not in the narrow-block split's 128-token launch (p.narrow 2: contiguous without a hint, up
     *   to ~48k rows, decode sizes among them), where it was not measured.
     * (bench/RESULTS.md v37.) HFP4_SM90_RASTER=0 turns both off, 1 takes them whatever the weights'
     * size (comparisons; the GPU tests' small shapes); read at each such launch. */
    if (BT == 128 && params.grouping != HFP4_K_MASKED) {
        const char *env = getenv("HFP4_SM90_RASTER");
        const int forced = env && strcmp(env, "1") == 0, off = env && strcmp(env, "0") == 0;
        const int shift = params.grouping == HFP4_K_DENSE ? 4 : 2, g = 1 << shift; /* (a power of two: item_tiles) */
        const int big = params.grouping != HFP4_K_DENSE || params.n * params.k / 2 > ((int64_t)16 << 20);
        if (!off && params.tiles_m > g && params.narrow != 2 && (forced || big)) hfp4_sm90_set_raster(&params, shift);
    }
    if (SPLIT) {
        /* the K-split (split_k.cuh): clusters of two CTAs, so an even grid; they split when the live
         * items are at most half the CTAs (HFP4_SM90_SPLIT_ITEMS overrides the bound: 0 never
         * splits, a large value always does; for comparison and the tests) */
        ctas += ctas & 1;
        params.split_max_items = dev->num_sms * MINB / 2; /* (the CTA slots, not a grid capped at the items) */
        const char *env = getenv("HFP4_SM90_SPLIT_ITEMS");
        if (env && *env) params.split_max_items = atoi(env);
    }
    /* cudaLaunchKernelEx reports this launch's own error, never one left pending by the caller */
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3((unsigned)ctas, 1, 1);
    config.blockDim = dim3(384, 1, 1);
    config.dynamicSmemBytes = cfg::SMEM_BYTES;
    config.stream = stream;
    const int pdl = pdl_on();
    cudaLaunchAttribute attr[2];
    int nattr = 0;
    if (SPLIT) {
        attr[nattr].id = cudaLaunchAttributeClusterDimension;
        attr[nattr].val.clusterDim.x = 2;
        attr[nattr].val.clusterDim.y = 1;
        attr[nattr].val.clusterDim.z = 1;
        nattr++;
    }
    if (pdl) {
        attr[nattr].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[nattr].val.programmaticStreamSerializationAllowed = 1;
        nattr++;
    }
    config.attrs = attr;
    config.numAttrs = nattr;
    HFP4_CUDA_TRY(fn, cudaLaunchKernelEx(&config, kernel, maps->a, maps->d, maps->a_narrow, params));
    /* (the opt-in timeline's grid; the 128-token tile records none, so its data would be stale) */
    __atomic_store_n(&diag_last_grid, BT < 128 ? (int)ctas : 0, __ATOMIC_RELAXED);
    return HFP4_OK;
}

/* The tile's kernel: G32 the 1x32-scale copies (consumer_pipelined.cuh), two_ctas the 8-token
 * tile at two CTAs per SM, early the EARLY kernel (HFP4_GEMM_OVERLAP_PREVIOUS) where there is one:
 * the two-CTA 8-token tile with UE8M0 weight scales (decode's: what the layers of a decode step run
 * back to back); elsewhere the flag is ignored (hfp4.h) */
template <bool W_FP32, bool G32>
static hfp4_status dispatch_tile(const char *fn, const hfp4_sm90_plan *plan, const hfp4_current_device *dev,
                                 const sm90_launch_maps *maps, cudaStream_t stream, int two_ctas, int early) {
    static_assert(HFP4_SM90_G32_MAX_BT == 128, "G32 kernels for every tile below");
    switch (plan->block_tokens) {
    case 8:
        if constexpr (!W_FP32) /* (without PDL there is nothing to overlap) */
            if (two_ctas && early && plan->params.split != 2 && pdl_on())
                return launch<8, W_FP32, 2, false, G32, true>(fn, plan, dev, maps, stream);
        /* the K-split kernel (split_k.cuh) where the plan asks for it (HFP4_SM90_SPLIT=1): launched
         * in clusters of two CTAs, which split items only when they are few. NOTE: the cluster
         * launch alone (never splitting) measured +3...+7 % at T = 8 for some routings and -1...-2 %
         * for another, -3 % at T = 1, and a layer's two GEMMs chained slower (bench/RESULTS.md v12) */
        if constexpr (!W_FP32 && !G32) /* (the plan splits UE8M0 weight scales with 1x128 scales only) */
            if (two_ctas && plan->params.split == 2) return launch<8, W_FP32, 2, true>(fn, plan, dev, maps, stream);
        return two_ctas ? launch<8, W_FP32, 2, false, G32>(fn, plan, dev, maps, stream)
                        : launch<8, W_FP32, 1, false, G32>(fn, plan, dev, maps, stream);
    case 16: return launch<16, W_FP32, 1, false, G32>(fn, plan, dev, maps, stream);
    case 32: return launch<32, W_FP32, 1, false, G32>(fn, plan, dev, maps, stream);
    case 64: return launch<64, W_FP32, 1, false, G32>(fn, plan, dev, maps, stream);
    case 128: return launch<128, W_FP32, 1, false, G32>(fn, plan, dev, maps, stream);
    }
    return hfp4__fail(HFP4_ERR_INTERNAL, "%s: no kernel for block_tokens = %d", fn, plan->block_tokens);
}

template <bool W_FP32>
static hfp4_status dispatch_bt(const char *fn, const hfp4_sm90_plan *plan, const hfp4_current_device *dev,
                               const sm90_launch_maps *maps, cudaStream_t stream, int early) {
    /* NOTE: the 8-token decode tile runs two CTAs per SM: its consumers are latency-bound (a chain
     * of ~195 instructions per chunk and warp), so twice the warps per scheduler stream more bytes
     * (H200, V4-Flash w13 masked T = 32: 2.11 -> 2.37 TB/s). HFP4_SM90_DECODE_2CTA=0 selects one
     * CTA per SM, for comparison. */
    static int two_ctas_switch = -1;
    const int two_ctas = comparison_switch_on("HFP4_SM90_DECODE_2CTA", &two_ctas_switch);
    /* NOTE: 1x32 activation scales (transformers passes them) take the G32 kernels
     * (consumer_pipelined.cuh), with UE8M0 weight scales, at every tile: H200, V4-Flash masked graph
     * w13 T = 8 / 32 2.14 / 2.42 -> 3.30 / 3.78 TB/s, prefill T = 16384 w13 254 -> 365 TFLOP/s
     * (bench/RESULTS.md v14). HFP4_SM90_G32=0 keeps the general path, for comparison. */
    static int g32_switch = -1;
    if constexpr (!W_FP32)
        if (plan->params.a_gran_k == 32 && plan->params.split != 2 && comparison_switch_on("HFP4_SM90_G32", &g32_switch))
            return dispatch_tile<W_FP32, true>(fn, plan, dev, maps, stream, two_ctas, early);
    return dispatch_tile<W_FP32, false>(fn, plan, dev, maps, stream, two_ctas, early);
}

static hfp4_status plan_and_check(const char *fn, const hfp4_gemm_problem *problem, hfp4_sm90_plan *plan,
                                  hfp4_current_device *dev) {
    HFP4_TRY(hfp4__sm90_plan(fn, problem, plan));
    HFP4_TRY(hfp4__require_sm90(fn, dev));
    return HFP4_OK;
}

extern "C" hfp4_status hfp4_gemm_supported(const hfp4_gemm_problem *problem) {
    if (problem && problem->b.dtype == HFP4_DTYPE_FP8_E4M3) /* (fp8_fp8_gemm.h) */
        return hfp4__sm90_fp8_weights_gemm("hfp4_gemm", problem, NULL, 0);
    hfp4_sm90_plan plan;
    hfp4_current_device dev;
    return plan_and_check("hfp4_gemm", problem, &plan, &dev);
}

extern "C" hfp4_status hfp4_gemm(const hfp4_gemm_problem *problem, hfp4_stream stream) {
    return hfp4_gemm_flags(problem, 0, stream);
}

extern "C" hfp4_status hfp4_gemm_flags(const hfp4_gemm_problem *problem, uint32_t flags, hfp4_stream stream) {
    const char *fn = flags ? "hfp4_gemm_flags" : "hfp4_gemm";
    HFP4_CHECK_ARG((flags & ~(uint32_t)HFP4_GEMM_OVERLAP_PREVIOUS) == 0, "%s: flags = 0x%x has bits hfp4.h does not define",
                     fn, (unsigned)flags);
    /* (FP8 weights and the warp path take no early start: they wait for the kernel before, as always) */
    if (problem && problem->b.dtype == HFP4_DTYPE_FP8_E4M3) /* FP8 weights: their own kernel (fp8_fp8_gemm.h) */
        return hfp4__sm90_fp8_weights_gemm(fn, problem, (cudaStream_t)stream, 1);
    hfp4_sm90_plan plan;
    hfp4_current_device dev;
    HFP4_TRY(plan_and_check(fn, problem, &plan, &dev));
    const int early = (flags & HFP4_GEMM_OVERLAP_PREVIOUS) != 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (plan.warp_decode) {
        int taken = 0;
        const hfp4_status st = hfp4__sm90_warp_decode(fn, problem, &plan, &dev, s, &taken);
        if (st != HFP4_OK || taken) return st;
    }
    sm90_launch_maps maps;
    uint32_t box[3] = {128, (uint32_t)plan.block_tokens, 1};
    HFP4_TRY(hfp4__make_tensor_map_u8_3d(fn, &maps.a, problem->a.data, plan.a_dims, plan.a_strides, box));
    maps.d = maps.a_narrow = maps.a; /* unused without the TMA store, and without narrow items */
    if (plan.params.narrow) {
        const uint32_t narrow_box[3] = {128, 8, 1};
        HFP4_TRY(hfp4__make_tensor_map_u8_3d(fn, &maps.a_narrow, problem->a.data, plan.a_dims, plan.a_strides, narrow_box));
    }
    if (plan.params.d_tma) {
        /* D as [groups][m][n] BF16 (ld, stride_group in elements; the plan's d_vec made them 16-byte
         * multiples, and ld * 2 * m for one group); a warpgroup's box: its 64 weight rows (n) x the
         * tile's 128 tokens */
        const int64_t g = problem->grouping == HFP4_GROUPING_MASKED ? problem->num_groups : 1;
        const int64_t dims[3] = {problem->n, problem->m, g};
        const int64_t strides[2] = {problem->d.ld * 2, g > 1 ? problem->d.stride_group * 2 : problem->d.ld * 2 * problem->m};
        const uint32_t d_box[3] = {64, 128, 1};
        /* a map the driver rejects (D beyond its limits) leaves the vector stores, which need none */
        if (hfp4__make_tensor_map_bf16_3d(fn, "D", &maps.d, problem->d.data, dims, strides, d_box) != HFP4_OK) {
            plan.params.d_tma = 0;
            hfp4_clear_error(); /* the call succeeds: no stale message */
        }
    }
    /* the opt-in BF16 path (bf16_fp4_gemm.h) has no narrow-block split: it takes every block (a plan
     * with params.narrow 0), and only where the rows per group picked the 128-token tile themselves
     * (the split's decode problems stay on the split) */
    if (hfp4__sm90_bf16_wanted(&plan) && (!plan.narrow_split || plan.rows_tile == 128)) {
        hfp4_sm90_plan whole = plan;
        whole.params.narrow = 0;
        whole.narrow_split = 0;
        int taken = 0;
        const hfp4_status st = hfp4__sm90_bf16_gemm(fn, problem, &whole, &dev, &maps.d, s, &taken);
        if (st != HFP4_OK || taken) return st;
    }
    if (plan.narrow_split) {
        /* the narrow-block split (narrow_items.cuh): the 8-token launch takes the narrow blocks
         * first (its A map is the 8-row one), then this plan's launch the rest; they write disjoint
         * rows of D */
        hfp4_sm90_plan narrow;
        HFP4_TRY(hfp4__sm90_plan_narrow_blocks(fn, problem, &plan, &narrow));
        const sm90_launch_maps narrow_maps = {maps.a_narrow, maps.a_narrow, maps.a_narrow};
        HFP4_TRY(narrow.w_fp32 ? dispatch_bt<true>(fn, &narrow, &dev, &narrow_maps, s, early)
                               : dispatch_bt<false>(fn, &narrow, &dev, &narrow_maps, s, early));
    }
    return plan.w_fp32 ? dispatch_bt<true>(fn, &plan, &dev, &maps, s, early)
                       : dispatch_bt<false>(fn, &plan, &dev, &maps, s, early);
}
