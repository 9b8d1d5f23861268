/*
 * warp_decode.cu - the warp path of hfp4_gemm (warp_decode.h): FP8 x FP4 for groups of a few rows,
 * opt-in for the masked layout (HFP4_SM90_WARP_DECODE=1), automatic for dense GEMVs it splits 4 or 8
 * ways (hfp4__sm90_warp_wanted, sm90_plan.h).
 *
 * Why a second decode kernel: the main kernel (fp8_fp4_gemm.cuh) feeds wgmma from a TMA pipeline run
 * by producer warps, 128 weight rows per item. With one token (six experts, 192 such items on 264
 * CTA slots) its SMs get one or two items each and the first chunk arrives 6-10 us after entry
 * (bench/RESULTS.md v12-v13): T = 1 reached ~1.8 TB/s. Here a CTA is one warpgroup and a unit of
 * work one 64-row weight tile x up to 8 tokens of a group: the repacked layout (sm90_layout.h) gives
 * each thread, per k32 step, exactly its register fragment of wgmma m64n8k32, so the weight words go
 * from global memory straight into registers with 16-byte loads, 8 chunks ahead (no producer, no
 * barriers), and the unit's activations, their scales and the tile's weight scales are staged in
 * shared memory once per unit (cp.async). The live units are ranked through a prefix of the groups
 * in shared memory; each CTA of a persistent grid (3 a SM) takes a contiguous range of them, so the
 * SMs stream about the same bytes and consecutive units share their activations.
 *
 * Numerics are the main kernel's: folded chunks (1x128 scales, UE8M0 weights) chain their 4 k32
 * steps into one accumulator with the relative exponents in the conversion tables and promote once;
 * per-32 chunks, FP32 weight scales and 1x32 activation scales promote every k32 step's sum with its
 * own weight and activation scales.
 *
 * Where it stands (H200, bench/RESULTS.md v16): V4-Flash masked graph T = 1 w13 1.91 / w2 1.35 TB/s
 * against the main kernel's 1.82 / 1.27; from T = 8 on it is 20-30 % slower (each warpgroup's chain
 * of ~180 instructions a chunk with only 12 warps a SM), hence opt-in.
 *
 * K-split (wd_reduce; v17): launches with few units (a GEMV, a tensor-parallel shard at T = 1) run in
 * clusters whose CTAs share each unit's K and add their sums in the leader's shared memory. A CTA
 * streams ~0.5 us a chunk on its own, so a unit of 32 chunks set such a launch's time: dense GEMV
 * 4096 x 4096 16.7 us (main kernel) -> 14.7 us (4 parts of 8 chunks); V4-Flash TP8 w13 T = 1 graph
 * 0.36 (main) / 0.28 (unsplit) -> 0.37 TB/s (2 parts: masked launches stay at 2, below). Dense GEMVs
 * of M <= 8 take this path by default where the launcher splits them 4 or 8 ways (N up to ~6000 at
 * K >= 2048): 7-30 % faster than the main kernel there, slower with 2 parts or none.
 *
 * Where the parts live: warp_decode_config.cuh (shapes, wd_operands), warp_decode_chunk.cuh (a chunk's
 * loads, scales, wgmmas and promotion), warp_decode_stage.cuh (the units' prefix, the staging in
 * shared memory, the K-split's reduction); this file: the kernel and its launcher.
 */
#include "warp_decode.h"

#include "epilogue.cuh"
#include "ptx.cuh"
#include "warp_decode_chunk.cuh"
#include "warp_decode_config.cuh"
#include "warp_decode_stage.cuh"

#ifndef WD_EARLY
#define WD_EARLY 0 /* ring slots loaded before the staging has landed (see the NOTE in the kernel) */
#endif

template <bool W_FP32, bool G32>
struct wd_depth {
#ifndef WD_DEPTH_FAST
#define WD_DEPTH_FAST 8
#endif
    static constexpr int value = (W_FP32 || G32) ? 6 : WD_DEPTH_FAST; /* (the per-32 forms' registers: 6 is spill-free) */
};

template <bool W_FP32, bool G32>
__global__ void __launch_bounds__(WD_THREADS, WD_MAX_CTAS_PER_SM)
    hfp4_sm90_fp8_fp4_gemm_warp_decode_kernel(const __grid_constant__ hfp4_sm90_gemm_params p, const wd_operands o) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ uint8_t wd_smem_raw[];
    /* the activation tiles must start 1024-byte aligned (the swizzle's atom); the launcher adds the slack */
    uint8_t *act = wd_smem_raw + ((1024u - (smem_addr(wd_smem_raw) & 1023u)) & 1023u);
    float *as = (float *)(act + o.act_bytes);
    void *wsc = (void *)(as + (int64_t)o.kgroups * 8);             /* [chunks][64 rows] words or float4s */
    uint8_t *modes = (uint8_t *)wsc + o.scale_bytes;               /* [chunks]                          */
    int32_t *prefix = (int32_t *)(modes + ((p.w_chunks + 15) & ~15)); /* [groups + 1]                    */
    /* the K-split's (o.split > 1): the leader's slots for its partners' sums [split - 1][128 threads],
     * then its POSTED barrier and each CTA's FREE one (wd_reduce) */
    float4 *red = (float4 *)(((uintptr_t)(prefix + o.groups + 1) + 15) & ~(uintptr_t)15);
    uint64_t *red_bars = (uint64_t *)(red + (o.split - 1) * WD_THREADS);
    /* programmatic dependent launch (as the main kernel: its NOTE at grid_dependency_wait): nothing
     * in global memory is read before the grids before this one have completed, and the grids
     * after it are let in only then */
    WD_STAMP(t_entry);
    grid_wait_then_let_next_in();
    wd_build_prefix(p, o, prefix);
    WD_STAMP(t_prefix);
#ifdef HFP4_WD_DIAG
    __shared__ unsigned launch_no;
    if (threadIdx.x == 0) launch_no = blockIdx.x == 0 ? atomicAdd(&wd_diag_launch, 1) : atomicAdd(&wd_diag_launch, 0);
    __syncthreads();
    uint64_t t_staged = 0, t_loop = 0;
    int my_units = 0;
#endif
    const int32_t units = prefix[o.groups];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int g = lane / 4, t = lane % 4;
    const int64_t chunks = p.w_chunks;
    const sm90_desc desc0 = smem_desc_k128_swizzle128(act);
    constexpr int WD_DEPTH = wd_depth<W_FP32, G32>::value;
    /* The K-split: `parts` CTAs of a cluster (consecutive ranks) share each unit, CTA `sub` of them
     * streaming chunks [sub chunks / parts, (sub + 1) chunks / parts), and the first of them (the
     * leader) adds the others' sums and stores the tile. Every CTA computes parts from the same
     * prefix, so a cluster agrees: the most the launch's cluster allows (o.split) while all the
     * parts of all the units run at once (units x parts <= CTAs) and each part keeps 2 chunks; 1
     * (each CTA on its own units) when the units fill the grid anyway. Why: a GEMV or a
     * tensor-parallel shard at T = 1 has a few dozen units of 32 chunks for ~400 CTA slots, and a
     * unit's chunks then set the launch's time (V4-Flash TP8 w13 T = 1: 48 units). */
    int parts = o.split;
    while (parts > 1 && ((int64_t)units * parts > (int64_t)gridDim.x || chunks < 2 * parts)) parts /= 2;
    if (o.parts > 0) parts = o.parts; /* (tests: several units a walker, leaders at ranks past 0) */
    const uint32_t rank = o.split > 1 ? cluster_cta_rank() : 0;
    const int sub = (int)(rank % (uint32_t)parts); /* this CTA's part of each unit */
    const int cb = (int)(sub * chunks / parts), ce = (int)((sub + 1) * chunks / parts);
    uint32_t red_phase = 0;
    if (parts > 1) {
        /* the barriers, initialized before any CTA of the cluster reaches another's (the cluster
         * barrier's release and acquire order the initialization before the first remote use) */
        if (threadIdx.x == 0) {
            mbar_init(&red_bars[0], (uint32_t)(parts - 1) * WD_THREADS); /* POSTED: the partners' threads */
            mbar_init(&red_bars[1], WD_THREADS);                          /* FREE: the leader's threads   */
            mbar_fence_init();
        }
        cluster_arrive();
        cluster_wait();
    }
    /* NOTE: walker w takes units [w U / W, (w + 1) U / W): consecutive units then mostly share a
     * group and token block (the tiles of one expert), whose activations are staged once for them
     * all. A walker is a CTA, or the parts CTAs of a unit under the K-split (consecutive blocks of a
     * cluster). */
    const int64_t walker = blockIdx.x / parts, walkers = gridDim.x / parts;
    const int32_t u_begin = (int32_t)(walker * units / walkers);
    const int32_t u_end = (int32_t)((walker + 1) * units / walkers);
    int64_t staged_group = -1, staged_block = -1;
    for (int32_t u = u_begin; u < u_end; u++) {
        /* the group holding unit u: the last one whose prefix is <= u (groups without units have
         * the same prefix as the next, and the search skips them) */
        int lo = 0, hi = o.groups - 1;
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (prefix[mid] <= u) lo = mid;
            else hi = mid - 1;
        }
        const int64_t group = lo, local = u - prefix[lo];
        const int64_t block = local / o.tiles, tile = local % o.tiles;
        const int64_t rows = wd_group_rows(p, lo), tok_base = block * WD_TOKENS;
        const int ntok = (int)(rows - tok_base < WD_TOKENS ? rows - tok_base : WD_TOKENS);
        const uint8_t *wq = p.w + group * p.w_group_bytes + tile * p.w_pairs * HFP4_SM90_PAIR_BYTES +
                            (warp * 32 + lane) * 16;
        const bool restage = group != staged_group || block != staged_block;
        staged_group = group;
        staged_block = block;

        /* NOTE: the staging's copies go out first, then the first WD_EARLY chunks' weights (none by
         * default), and the rest of the ring once the staging has landed. At T = 1 every SM starts
         * at once, and the whole ring's loads (~12 MB from all SMs) issued with the staging held
         * the first chunk back to ~9 us after entry; staged first, ~6 us (-DHFP4_WD_DIAG builds
         * print the timeline). H200, masked graph T = 1 / 32, w13: ring first 1.82 / 2.85, 2 slots
         * early 1.83 / 2.85, none 1.91 / 3.08 TB/s (bench/RESULTS.md v16). */
        __syncthreads(); /* the previous unit's wgmmas have read the tiles (each waited before its epilogue) */
        wd_stage_regs sr;
        wd_stage_issue<W_FP32>(p, o, act, wsc, group, tile, tok_base, ntok, restage, cb, ce, sr);
        wd_chunk ring[WD_DEPTH];
#pragma unroll
        for (int i = 0; i < WD_EARLY; i++)
            if (cb + i < ce) wd_load_chunk(ring[i], wq, cb + i);
        wd_stage_finish(p, o, as, modes, group, tok_base, ntok, restage, cb, ce, sr);
#pragma unroll
        for (int i = WD_EARLY; i < WD_DEPTH; i++)
            if (cb + i < ce) wd_load_chunk(ring[i], wq, cb + i);
        fence_proxy_async_shared(); /* generic-proxy writes, read by wgmma (async proxy) */
        __syncthreads();
#ifdef HFP4_WD_DIAG
        if (my_units++ == 0) t_staged = wd_now();
#endif

        float fin[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        auto scales_of = [&](int64_t c) {
            wd_scales<W_FP32> sc;
            const int srow = (int)c * 64 + warp * 16 + g;
            if constexpr (W_FP32) {
                sc.sf0 = ((const float4 *)wsc)[srow];
                sc.sf1 = ((const float4 *)wsc)[srow + 8];
                sc.mode = HFP4_SM90_MODE_PER32;
            } else {
                sc.sw0 = ((const uint32_t *)wsc)[srow];
                sc.sw1 = ((const uint32_t *)wsc)[srow + 8];
                sc.mode = modes[c];
            }
            return sc;
        };
        for (int64_t c0 = cb; c0 < ce; c0 += WD_DEPTH) {
            static_assert(WD_DEPTH % 2 == 0, "pairs of ring slots");
            if constexpr (!W_FP32 && !G32) {
#pragma unroll
                for (int i = 0; i < WD_DEPTH; i += 2) {
                    const int64_t c = c0 + i;
                    if (c >= ce) break;
                    const wd_scales<W_FP32> s0 = scales_of(c);
                    const sm90_desc desc = desc_advance_rows(desc0, (int)(8 * c));
                    if (c + 1 < ce) {
                        const wd_scales<W_FP32> s1 = scales_of(c + 1);
                        if (!((s0.mode | s1.mode) & HFP4_SM90_MODE_PER32)) {
                            wd_compute_pair(ring[i], ring[i + 1], s0, s1, as, c, desc, t, fin);
                        } else {
                            wd_compute_chunk<W_FP32, G32>(ring[i], s0, as, c, desc, t, fin);
                            wd_compute_chunk<W_FP32, G32>(ring[i + 1], s1, as, c + 1, desc_advance_rows(desc, 8), t, fin);
                        }
                        if (c + 1 + WD_DEPTH < ce) wd_load_chunk(ring[i + 1], wq, c + 1 + WD_DEPTH);
                    } else {
                        wd_compute_chunk<W_FP32, G32>(ring[i], s0, as, c, desc, t, fin);
                    }
                    if (c + WD_DEPTH < ce) wd_load_chunk(ring[i], wq, c + WD_DEPTH);
                }
            } else {
                /* one chunk at a time (per-32 forms) */
#pragma unroll
                for (int i = 0; i < WD_DEPTH; i++) {
                    const int64_t c = c0 + i;
                    if (c >= ce) break;
                    const wd_scales<W_FP32> sc = scales_of(c);
                    wd_compute_chunk<W_FP32, G32>(ring[i], sc, as, c, desc_advance_rows(desc0, (int)(8 * c)), t, fin);
                    /* NOTE: the next load into this slot goes out after the chunk's use, into the same
                     * registers; a copy of the slot before the load (cur = ring[i]) made ptxas rotate
                     * the ring by moves that waited for the load just issued (ncu: a third of all
                     * stalls on L1TEX), i.e. no load ahead at all */
                    if (c + WD_DEPTH < ce) wd_load_chunk(ring[i], wq, c + WD_DEPTH);
                }
            }
        }
#ifdef HFP4_WD_DIAG
        t_loop = wd_now();
#endif
        if (parts > 1 && !wd_reduce(fin, red, red_bars, sub, rank - (uint32_t)sub, parts, red_phase)) continue;
        /* D[group][token][n]: rows g, g + 8 of the warp's slice, tokens 2t, 2t + 1 */
        const int64_t n0 = tile * 64 + warp * 16 + g;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int64_t n = n0 + 8 * r;
            if (n >= p.n) continue;
#pragma unroll
            for (int cidx = 0; cidx < 2; cidx++) {
                if (2 * t + cidx >= ntok) continue;
                store_d_value(p, group * p.d_stride_group + (tok_base + 2 * t + cidx) * p.ldd + n, fin[2 * r + cidx], true);
            }
        }
    }
    /* no CTA leaves while a partner may still write to its slots or arrive on its barriers */
    if (parts > 1) {
        cluster_arrive();
        cluster_wait();
    }
#ifdef HFP4_WD_DIAG
    if (threadIdx.x == 0 && launch_no == 3 && blockIdx.x % 8 == 0)
        printf("wd_diag cta %d units %d entry %llu prefix +%llu staged +%llu loop +%llu end +%llu\n", (int)blockIdx.x,
               my_units, (unsigned long long)t_entry, (unsigned long long)(t_prefix - t_entry),
               (unsigned long long)(t_staged ? t_staged - t_entry : 0), (unsigned long long)(t_loop ? t_loop - t_entry : 0),
               (unsigned long long)(wd_now() - t_entry));
#endif
#else
    /* Built for another architecture: never launched there (the host checks the device). */
    __trap();
#endif
}

/* Clusters of `split` CTAs of a warp-path kernel (instance inst: W_FP32 x 2 + G32) with `bytes` of
 * shared memory that are resident at once, asked of the runtime once per instance, cluster size,
 * device and size (a few sizes each: a layer's two GEMMs alternate): host work each launch would
 * repeat otherwise. 0 when the runtime cannot tell (its error is cleared: the launch goes unsplit). */
#define WD_CACHE_DEVICES 16
#define WD_CACHE_WAYS 4
static uint64_t wd_cluster_cache[4][4][WD_CACHE_DEVICES][WD_CACHE_WAYS]; /* bytes << 32 | clusters + 1; 0: free */
static int wd_resident_clusters(const void *kernel, int inst, const hfp4_current_device *dev, cudaLaunchConfig_t config,
                                cudaLaunchAttribute *attr, int nattr, size_t bytes, int32_t split) {
    const int l = split == 2 ? 1 : split == 4 ? 2 : 3;
    uint64_t *ways = dev->device >= 0 && dev->device < WD_CACHE_DEVICES ? wd_cluster_cache[inst][l][dev->device] : NULL;
    for (int w = 0; ways && w < WD_CACHE_WAYS; w++) {
        const uint64_t v = __atomic_load_n(&ways[w], __ATOMIC_RELAXED);
        if (v != 0 && (v >> 32) == (uint64_t)bytes) return (int)(uint32_t)v - 1;
    }
    attr[nattr].id = cudaLaunchAttributeClusterDimension;
    attr[nattr].val.clusterDim.x = (unsigned)split;
    attr[nattr].val.clusterDim.y = 1;
    attr[nattr].val.clusterDim.z = 1;
    config.attrs = attr;
    config.numAttrs = nattr + 1;
    config.gridDim = dim3((unsigned)(dev->num_sms * split), 1, 1); /* (a multiple of the cluster size) */
    config.dynamicSmemBytes = bytes;
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, kernel, &config) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0; /* (not cached: it may be transient) */
    }
    if (ways) { /* the first free way, else the one the bytes hash to */
        int w = 0;
        while (w < WD_CACHE_WAYS && __atomic_load_n(&ways[w], __ATOMIC_RELAXED) != 0) w++;
        if (w == WD_CACHE_WAYS) w = (int)((bytes >> 4) % WD_CACHE_WAYS);
        __atomic_store_n(&ways[w], ((uint64_t)bytes << 32) | (uint32_t)(n + 1), __ATOMIC_RELAXED);
    }
    return n;
}

/* (tests) hfp4__sm90_warp_split_test */
static int wd_test_parts = 0, wd_test_max_ctas = 0;
void hfp4__sm90_warp_split_test(int parts, int max_ctas) {
    __atomic_store_n(&wd_test_parts, parts, __ATOMIC_RELAXED);
    __atomic_store_n(&wd_test_max_ctas, max_ctas, __ATOMIC_RELAXED);
}

/* The kernel instance's shared-memory limit, set to the most any plan asks (HFP4_SM90_WARP_MAX_SMEM,
 * or what the device allows), one constant: the attribute is the function's, not the launch's, so
 * setting it per launch to each launch's size raced with other host threads' launches. Set at
 * every launch, as the other launchers do: the attribute belongs to the current context, so a flag
 * "already raised" kept per device went stale after cudaDeviceReset or in a second context on the
 * device (the launch then failed against the 48 KB default). */
static hfp4_status wd_raise_smem_limit(const char *fn, const void *kernel, const hfp4_current_device *dev) {
    const int limit = HFP4_SM90_WARP_MAX_SMEM < dev->max_smem_optin ? HFP4_SM90_WARP_MAX_SMEM : dev->max_smem_optin;
    HFP4_CUDA_TRY(fn, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, limit));
    return HFP4_OK;
}

template <bool W_FP32, bool G32>
static hfp4_status launch_warp(const char *fn, const hfp4_gemm_problem *problem, const hfp4_sm90_plan *plan,
                               const hfp4_current_device *dev, cudaStream_t stream, int *taken) {
    auto kernel = hfp4_sm90_fp8_fp4_gemm_warp_decode_kernel<W_FP32, G32>;
    const hfp4_sm90_gemm_params &k = plan->params;
    wd_operands o;
    o.a = (const uint8_t *)problem->a.data;
    o.a_ld = problem->a.ld;
    o.groups = problem->grouping == HFP4_GROUPING_MASKED ? problem->num_groups : 1;
    o.a_stride_group = problem->grouping == HFP4_GROUPING_MASKED ? problem->a.stride_group : 0;
    o.tiles = (int32_t)((problem->n + 63) / 64);
    o.kgroups = (int32_t)(G32 ? 4 * k.w_chunks : k.w_chunks);
    o.act_bytes = (uint32_t)(k.w_chunks * 1024);
    o.scale_bytes = (uint32_t)(k.w_chunks * 64 * (W_FP32 ? 16 : 4));
    /* the units (tiles x token blocks x groups) are counted in 32 bits on the device: at most twice
     * the plan's work items (64- not 128-row tiles, 8-token blocks), which it keeps below 2^30 */
    const int64_t most = (int64_t)o.tiles * ((k.m + WD_TOKENS - 1) / WD_TOKENS) * o.groups;
    if (most >= ((int64_t)1 << 31))
        return hfp4__fail(HFP4_ERR_INTERNAL, "%s: %lld warp-path units (m = %lld, n = %lld, groups = %d) exceed 2^31", fn,
                          (long long)most, (long long)k.m, (long long)problem->n, (int)o.groups);
    cudaLaunchConfig_t config = {};
    config.blockDim = dim3(WD_THREADS, 1, 1);
    config.stream = stream;
    cudaLaunchAttribute attr[2];
    int nattr = 0;
    static int pdl = -1; /* HFP4_SM90_PDL=0 turns programmatic dependent launch off, as for the main kernel */
    if (hfp4__env_switch("HFP4_SM90_PDL", 1, &pdl)) {
        attr[nattr].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[nattr].val.programmaticStreamSerializationAllowed = 1;
        nattr++;
    }
    /* The K-split's cluster size: the plan's is the most K allows. A dense problem's units are
     * known here: the largest size whose clusters, all resident at once, give every unit its parts
     * (units <= resident clusters; the kernel then splits each unit that many ways). A masked
     * launch's units are known on the device only: at most 2, whose clusters fill the same CTA
     * slots as single CTAs. NOTE: H200, 3 CTAs a SM: clusters of 4 and 8 hold 368 and 360 CTAs where
     * 396 fit alone; V4-Flash T = 1 (384 units, too many to split) launched in clusters of 8 put two
     * units on some CTAs: w13 1.92 -> 1.23 TB/s (bench/RESULTS.md v17). */
    HFP4_TRY(wd_raise_smem_limit(fn, (const void *)kernel, dev));
    int32_t split = plan->warp_split > 1 ? plan->warp_split : 1;
    if (problem->grouping == HFP4_GROUPING_MASKED && split > 2) split = 2;
    const int test_parts = __atomic_load_n(&wd_test_parts, __ATOMIC_RELAXED);
    int clusters = 0;
    for (; split > 1; split /= 2) {
        const size_t bytes = (size_t)hfp4__sm90_warp_smem_bytes(k.w_chunks, G32, W_FP32, o.groups, split);
        if (bytes > (size_t)dev->max_smem_optin) continue;
        clusters = wd_resident_clusters((const void *)kernel, 2 * W_FP32 + G32, dev, config, attr, nattr, bytes, split);
        if (clusters >= 1 && (problem->grouping == HFP4_GROUPING_MASKED || most <= clusters || test_parts > 0)) break;
    }
    o.split = split > 1 ? split : 1;
    /* the automatic choice (plan->warp_decode 2, dense GEMVs) is the warp path's only where it
     * splits K 4 or 8 ways: with 2 parts or none the main kernel was faster (bench/RESULTS.md v17) */
    if (plan->warp_decode == 2 && o.split < 4) return HFP4_OK;
    o.parts = test_parts > 0 && test_parts <= o.split ? test_parts : 0;
    const size_t smem = (size_t)hfp4__sm90_warp_smem_bytes(k.w_chunks, G32, W_FP32, o.groups, o.split);
    /* a device with less shared memory than the plan allows (72 KB) leaves the problem to the main
     * kernel, which the plan has checked too */
    if (smem > (size_t)dev->max_smem_optin) return HFP4_OK;
    config.dynamicSmemBytes = smem;
    /* persistent: as many CTAs as fit on the SMs at once (each takes a fixed range of units, so a
     * CTA that waited for a slot would hold its units back); with the K-split, whole clusters of
     * o.split CTAs (the kernel decides how many of them share a unit), and at most o.split CTAs a
     * unit */
    int64_t ctas = 0;
    if (o.split > 1) {
        attr[nattr].id = cudaLaunchAttributeClusterDimension;
        attr[nattr].val.clusterDim.x = (unsigned)o.split;
        attr[nattr].val.clusterDim.y = 1;
        attr[nattr].val.clusterDim.z = 1;
        nattr++;
        ctas = (int64_t)clusters * o.split;
        const int64_t need = (most > 0 ? most : 1) * o.split;
        if (ctas > need) ctas = need;
    }
    if (ctas == 0) {
        int per_sm = 0;
        HFP4_CUDA_TRY(fn, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, WD_THREADS, smem));
        if (per_sm < 1) return HFP4_OK; /* (the main kernel then) */
        ctas = (int64_t)dev->num_sms * per_sm;
        if (ctas > most) ctas = most > 0 ? most : 1;
    }
    const int test_ctas = __atomic_load_n(&wd_test_max_ctas, __ATOMIC_RELAXED);
    if (test_ctas > 0 && ctas > test_ctas) ctas = test_ctas / o.split > 0 ? test_ctas / o.split * o.split : o.split;
    config.gridDim = dim3((unsigned)ctas, 1, 1);
    config.attrs = attr;
    config.numAttrs = nattr;
    HFP4_CUDA_TRY(fn, cudaLaunchKernelEx(&config, kernel, k, o));
    *taken = 1;
    return HFP4_OK;
}

hfp4_status hfp4__sm90_warp_decode(const char *fn, const hfp4_gemm_problem *problem, const hfp4_sm90_plan *plan,
                                   const hfp4_current_device *dev, cudaStream_t stream, int *taken) {
    *taken = 0;
    const bool g32 = plan->params.a_gran_k == 32;
    if (plan->w_fp32) return g32 ? launch_warp<true, true>(fn, problem, plan, dev, stream, taken)
                                 : launch_warp<true, false>(fn, problem, plan, dev, stream, taken);
    return g32 ? launch_warp<false, true>(fn, problem, plan, dev, stream, taken)
               : launch_warp<false, false>(fn, problem, plan, dev, stream, taken);
}
