/*
 * ptx.cuh - thin inline-PTX wrappers for the Hopper features hfp4's kernels use: mbarriers, TMA
 * (cp.async.bulk.tensor), wgmma fences and shared-memory descriptors, named barriers.
 * Each wrapper is one instruction or one idiom; the kernels read as plain CUDA C on top of them.
 */
#pragma once
#include <cuda_bf16.h>
#include <stdint.h>

static __device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* ---- mbarrier ------------------------------------------------------------------------------- */

static __device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

/* Makes barrier initialization visible to the async proxy (TMA) before first use. */
static __device__ __forceinline__ void mbar_fence_init(void) {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/* A shared-memory address (the 32-bit shared window) as a pointer: loads through it stay LDS with
 * the 32-bit address, with no generic-to-shared arithmetic. */
static __device__ __forceinline__ const void *smem_ptr(uint32_t sa) {
    return __cvta_shared_to_generic(sa);
}

static __device__ __forceinline__ void mbar_arrive_sa(uint32_t bar) {
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(bar) : "memory");
}
static __device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
    mbar_arrive_sa(smem_addr(bar));
}

/* One arrival that also announces `bytes` of TMA traffic the phase must wait for. */
static __device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}" ::"r"(smem_addr(bar)),
                 "r"(bytes)
                 : "memory");
}

/* Counts `bytes` of the barrier's expected transaction bytes as arrived without a copy (a narrow
 * item's stage, whose TMA loads fewer bytes than the stage's fixed expect_tx: stage_copies.cuh) */
static __device__ __forceinline__ void mbar_complete_tx(uint64_t *bar, uint32_t bytes) {
    asm volatile("mbarrier.complete_tx.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

/* Blocks until the phase with the given parity has completed (bar: its shared-window address). */
static __device__ __forceinline__ void mbar_wait_sa(uint32_t bar, uint32_t parity) {
    asm volatile(
        "{\n.reg .pred done;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n}" ::"r"(bar),
        "r"(parity)
        : "memory");
}
static __device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
    mbar_wait_sa(smem_addr(bar), parity);
}

/* One test of the phase with the given parity: true once it has completed (try_wait may suspend
 * the thread for a short, system-dependent time first). */
static __device__ __forceinline__ bool mbar_try_wait_sa(uint32_t bar, uint32_t parity) {
    uint32_t done;
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    return done != 0;
}
static __device__ __forceinline__ bool mbar_try_wait(uint64_t *bar, uint32_t parity) {
    return mbar_try_wait_sa(smem_addr(bar), parity);
}

/* One non-blocking test of the phase with the given parity (bar: its shared-window address): true
 * once it has completed; never suspends the thread */
static __device__ __forceinline__ bool mbar_test_wait_sa(uint32_t bar, uint32_t parity) {
    uint32_t done;
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    return done != 0;
}

/* mbar_wait for a warp whose spinning would take issue slots from the consumers on its scheduler
 * (the producer): between tests it sleeps 32, 64, 128, then 256 ns.
 * NOTE: try_wait with a suspend-time hint compiles to NANOSLEEP.SYNCS, which wakes at every
 * barrier event of the CTA: ncu (w13 T = 16384) counted ~110 wake-ups per chunk, 13 % of all the
 * kernel's instructions, on the schedulers the consumers share. A plain nanosleep does not wake
 * early; 256 ns is a quarter of a 128-token chunk, and the producer runs stages ahead. */
static __device__ __forceinline__ void mbar_wait_sleeping_sa(uint32_t bar, uint32_t parity) {
    uint32_t ns = 32;
    while (!mbar_try_wait_sa(bar, parity)) {
        __nanosleep(ns);
        if (ns < 256) ns *= 2;
    }
}
static __device__ __forceinline__ void mbar_wait_sleeping(uint64_t *bar, uint32_t parity) {
    mbar_wait_sleeping_sa(smem_addr(bar), parity);
}

/* ---- TMA ------------------------------------------------------------------------------------ */

/* 3D tiled bulk tensor load global -> shared, completing on `bar`. Coordinates are in elements,
 * innermost first; out-of-bounds elements are filled with zeros. */
static __device__ __forceinline__ void tma_load_3d(void *dst, const void *tensor_map, uint64_t *bar, int32_t c0,
                                                   int32_t c1, int32_t c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];" ::
            "r"(smem_addr(dst)),
        "l"(tensor_map), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
}

/* TMA store shared -> global of a box at coordinates (c0, c1, c2) of the tensor map, from a
 * 1024-aligned buffer laid out as the map's swizzle says; completes asynchronously (bulk_commit,
 * bulk_wait_read: the buffer may be written again, bulk_wait_all: the writes are done). The
 * threads that wrote the buffer must fence_proxy_async first (generic-proxy writes made visible to
 * the async proxy), and a barrier must order them before the issuing thread. */
static __device__ __forceinline__ void tma_store_3d(const void *tensor_map, uint32_t src, int32_t c0, int32_t c1,
                                                    int32_t c2) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(tensor_map),
                 "r"(src), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}
static __device__ __forceinline__ void bulk_commit(void) { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
static __device__ __forceinline__ void bulk_wait_read(void) {
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
static __device__ __forceinline__ void bulk_wait_all(void) { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
static __device__ __forceinline__ void fence_proxy_async_shared(void) {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
/* Two floats as BF16 (round to nearest even), lo in the low half: one packed conversion */
static __device__ __forceinline__ uint32_t bf16x2_bits(float lo, float hi) {
    const __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);
    return *(const uint32_t *)&b;
}
/* Four 8x8 matrices of 16-bit elements from mma fragments (register i: matrix i, lane l holding
 * row l / 4, columns 2 (l % 4) and + 1), stored as they are: lanes 8i..8i+7 give the addresses of
 * matrix i's 8 rows (16 bytes each). */
static __device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0), "r"(r1),
                 "r"(r2), "r"(r3)
                 : "memory");
}
/* Four 8x8 matrices of 16-bit elements from mma fragments (register i: matrix i, lane l holding
 * row l / 4, columns 2 (l % 4) and + 1), stored transposed: lanes 8i..8i+7 give the addresses of
 * matrix i's 8 stored rows (16 bytes each), stored row k = the fragment's column k. */
static __device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                                         uint32_t r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0),
                 "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}

/* 1D bulk copy global -> shared of `bytes` (a multiple of 16, both addresses 16-byte aligned),
 * completing on `bar`. The weights take this path: each (64 rows x 128 K) chunk of the repacked
 * layout is one contiguous 4 KB block, so no tensor map is needed. */
static __device__ __forceinline__ void bulk_load(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
}

/* Asks L2 for `bytes` (a multiple of 16) from src, with nothing to wait on: the bulk copy that
 * later reads them finds them there or on their way. */
static __device__ __forceinline__ void bulk_prefetch_l2(const void *src, uint32_t bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}
/* The same for a box of a tensor map at coordinates (c0, c1, c2) */
static __device__ __forceinline__ void tma_prefetch_l2_3d(const void *tensor_map, int32_t c0, int32_t c1, int32_t c2) {
    asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global [%0, {%1, %2, %3}];" ::"l"(tensor_map), "r"(c0), "r"(c1),
                 "r"(c2)
                 : "memory");
}

/* The same with an L2 eviction policy (createpolicy), for data read exactly once. */
static __device__ __forceinline__ void bulk_load_hint(void *dst, const void *src, uint32_t bytes, uint64_t *bar,
                                                      uint64_t policy) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
            smem_addr(dst)),
        "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
        : "memory");
}

/* An L2 policy that evicts these lines first: streamed weights must not push activations out. */
/* (not volatile: a constant, so ptxas may make it once rather than before every copy) */
static __device__ __forceinline__ uint64_t l2_policy_evict_first(void) {
    uint64_t policy;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}

/* One lane of the whole, converged warp (elect.sync), for issuing copies.
 * NOTE: why not `lane == 0`: under elect.sync ptxas keeps warp-uniform operands (kernel
 * parameters, warp_uniform values, loop counters made of them) on the uniform datapath and issues a
 * bulk copy or TMA from uniform registers; under `if (lane == 0)` it wraps each copy in an ELECT /
 * R2UR / BRA.U.ANY loop (~10 instructions a copy, seen in a test kernel's SASS). */
static __device__ __forceinline__ bool elect_one_sync(void) {
    uint32_t pred;
    asm volatile("{\n.reg .pred p;\nelect.sync _|p, 0xffffffff;\nselp.u32 %0, 1, 0, p;\n}" : "=r"(pred));
    return pred != 0;
}

/* x, the same in every lane of the converged warp, as ptxas can see it: a REDUX result lives in a
 * uniform register (see elect_one_sync) */
static __device__ __forceinline__ int32_t warp_uniform(int32_t x) { return __reduce_max_sync(0xFFFFFFFFu, x); }

static __device__ __forceinline__ void tma_prefetch_descriptor(const void *tensor_map) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(tensor_map) : "memory");
}

/* 4-byte asynchronous copy global -> shared (cp.async); with `valid` false nothing is read and
 * the destination gets zeros. Completion is tracked per thread (cp_async_mbar_arrive_noinc). */
static __device__ __forceinline__ void cp_async_4_zfill(void *dst, const void *src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(valid ? 4 : 0)
                 : "memory");
}

/* 16-byte asynchronous copy global -> shared (cp.async.cg: L2 only); with `valid` false nothing is
 * read and the destination gets zeros. cp_async_wait_all waits for this thread's copies. */
static __device__ __forceinline__ void cp_async_16_zfill(void *dst, const void *src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
}
static __device__ __forceinline__ void cp_async_wait_all(void) { asm volatile("cp.async.wait_all;" ::: "memory"); }

/* One arrival on `bar`, made when all of this thread's earlier cp.async copies have landed. */
static __device__ __forceinline__ void cp_async_mbar_arrive_noinc(uint64_t *bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_addr(bar)) : "memory");
}

/* ---- wgmma ---------------------------------------------------------------------------------- */

static __device__ __forceinline__ void wgmma_fence(void) { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
static __device__ __forceinline__ void wgmma_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
static __device__ __forceinline__ void wgmma_wait(void) {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/* Keeps the compiler from moving accesses to `r` across wgmma issue/wait points. */
static __device__ __forceinline__ void reg_fence(float &r) { asm volatile("" : "+f"(r)::"memory"); }
static __device__ __forceinline__ void reg_fence(uint32_t &r) { asm volatile("" : "+r"(r)::"memory"); }

/* A K-major, 128B-swizzled tile's descriptor low word from its shared-window address, 1024-aligned
 * (the swizzle's atom) and below 2^18 (tile_config.cuh asserts it for the carve-up), as the
 * look-ahead loop keeps it (consumer_pipelined.cuh) */
static __device__ __forceinline__ uint32_t smem_desc_lo_k128(uint32_t tile_sa) {
    return (tile_sa >> 4) | (1u << 16);
}
/* Shared-memory matrix descriptor for a K-major operand whose rows are 128 bytes, written by TMA
 * with 128-byte swizzle: 8-row core groups are 1024 bytes apart (SBO), LBO is unused for swizzled
 * K-major layouts, layout type 1 = 128B swizzle. The tile must start 1024-byte aligned; advancing
 * K by 32 bytes adds 2 to the encoded start address.
 * NOTE: kept as two 32-bit halves. The high half (SBO, swizzle) is a constant, and the start
 * address (14 bits of addr >> 4, < 2^14 for any shared-memory address) never carries into it, so
 * a step along K is one 32-bit add. As one 64-bit value, every wgmma's
 * descriptor cost a 64-bit add and two register moves to the uniform datapath (~25 instructions per
 * 128-K chunk in the 128-token tile's loop). */
typedef struct sm90_desc {
    uint32_t lo, hi;
} sm90_desc;
#define SM90_DESC_HI_K128_SWIZZLE128 ((1024u >> 4) | (1u << 30))
static __device__ __forceinline__ sm90_desc smem_desc_k128_swizzle128(const void *tile) {
    sm90_desc d;
    d.lo = smem_desc_lo_k128(smem_addr(tile) & 0x3FFFFu); /* start address; LBO = 1 (unused) */
    d.hi = SM90_DESC_HI_K128_SWIZZLE128;                      /* SBO 1024 bytes; 128-byte swizzle */
    return d;
}
/* the descriptor `rows` 128-byte rows further (a multiple of 8: whole swizzle atoms) */
static __device__ __forceinline__ sm90_desc desc_advance_rows(sm90_desc d, int rows) {
    d.lo += (uint32_t)rows * (128u >> 4);
    return d;
}
/* the descriptor `k32` steps of 32 bytes further along K */
static __device__ __forceinline__ sm90_desc desc_advance_k32(sm90_desc d, int k32) {
    d.lo += 2u * (uint32_t)k32;
    return d;
}

/* ---- register reallocation between warpgroups (setmaxnreg) ---------------------------------- */

/* Every thread of the warpgroup must execute these (sync.aligned). */
template <int REGS>
static __device__ __forceinline__ void warpgroup_reg_alloc(void) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}
template <int REGS>
static __device__ __forceinline__ void warpgroup_reg_dealloc(void) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}

/* ---- thread-block clusters (the K-splits: the decode tile's pairs, split_k.cuh; the warp path's) -- */

/* This CTA's rank in its cluster (0 with no cluster launch) */
static __device__ __forceinline__ uint32_t cluster_cta_rank(void) {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
/* The shared::cluster address of the same shared-memory location in the cluster's CTA `rank` */
static __device__ __forceinline__ uint32_t cluster_map(uint32_t smem_sa, uint32_t rank) {
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(smem_sa), "r"(rank));
    return r;
}
/* A store to another CTA's shared memory (address from cluster_map) */
static __device__ __forceinline__ void st_cluster_f32(uint32_t addr, float v) {
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(addr), "f"(v) : "memory");
}
/* A 16-byte store to another CTA's shared memory (address from cluster_map, 16-byte aligned) */
static __device__ __forceinline__ void st_cluster_v4_f32(uint32_t addr, float x, float y, float z, float w) {
    asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "f"(x), "f"(y), "f"(z), "f"(w) : "memory");
}
/* A 32-bit load from another CTA's shared memory (address from cluster_map) */
static __device__ __forceinline__ int32_t ld_cluster_s32(uint32_t addr) {
    int32_t v;
    asm volatile("ld.shared::cluster.s32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
    return v;
}
/* An atomic add to another CTA's shared memory (address from cluster_map); returns the old value */
static __device__ __forceinline__ int32_t atomic_add_cluster_s32(uint32_t addr, int32_t v) {
    int32_t old;
    asm volatile("atom.shared::cluster.add.s32 %0, [%1], %2;" : "=r"(old) : "r"(addr), "r"(v) : "memory");
    return old;
}
/* An arrival on another CTA's barrier (address from cluster_map) that releases this thread's
 * earlier shared-memory writes (and reads) to the threads that wait for the phase at cluster scope */
static __device__ __forceinline__ void mbar_arrive_cluster(uint32_t remote_bar) {
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote_bar) : "memory");
}
/* mbar_wait for a phase completed by another CTA's arrivals: acquires their writes at cluster scope */
static __device__ __forceinline__ void mbar_wait_cluster(uint64_t *bar, uint32_t parity) {
    asm volatile(
        "{\n.reg .pred done;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n}" ::"r"(smem_addr(bar)),
        "r"(parity)
        : "memory");
}
/* The cluster barrier in two halves (every thread of every CTA of the cluster, whole warps): an
 * arrival releases this thread's earlier writes (barrier initialization included), the wait
 * returns once every non-exited thread of the cluster has arrived */
static __device__ __forceinline__ void cluster_arrive(void) {
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
static __device__ __forceinline__ void cluster_wait(void) {
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

/* ---- programmatic dependent launch ------------------------------------------------------------ */

/* Waits until the grids this one depends on (launched before it in the stream with programmatic
 * serialization) have completed and their memory is visible; returns at once without PDL. */
static __device__ __forceinline__ void grid_dependency_wait(void) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
}
/* Lets the grids that depend on this one be scheduled once every CTA has done so or exited (they
 * still wait for this grid's completion before reading its results); no effect without PDL. */
static __device__ __forceinline__ void grid_launch_dependents(void) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
/* The library's kernels' order: wait for the grids before, then let the next one in. So when an
 * hfp4 GEMM starts, everything enqueued before the kernel just before it has completed: what
 * HFP4_GEMM_OVERLAP_PREVIOUS's early reads rely on (hfp4.h, fp8_fp4_gemm.cuh's NOTE). */
static __device__ __forceinline__ void grid_wait_then_let_next_in(void) {
    grid_dependency_wait();
    grid_launch_dependents();
}

/* ---- barriers and misc ---------------------------------------------------------------------- */

/* Barrier over `COUNT` threads (a multiple of 32) with id ID in 1..15 (0 is __syncthreads). The id
 * is an immediate so ptxas counts only the barriers used (a register id reserves all 16, which can
 * cap the CTAs per SM). */
template <int ID, int COUNT>
static __device__ __forceinline__ void named_barrier_sync(void) {
    asm volatile("bar.sync %0, %1;" ::"n"(ID), "n"(COUNT) : "memory");
}

/* The 128 threads of consumer warpgroup `wg` (0 or 1) synchronize among themselves (barrier id
 * 1 + wg). IMMEDIATE: ids as immediates, so ptxas reserves 3 barriers instead of all 16 (needed for
 * two CTAs per SM); the register form keeps the 128-token tile's consumers within 208 registers. */
template <bool IMMEDIATE>
static __device__ __forceinline__ void warpgroup_barrier(int wg) {
    if constexpr (IMMEDIATE) {
        if (wg == 0) named_barrier_sync<1, 128>();
        else named_barrier_sync<2, 128>();
    } else {
        asm volatile("bar.sync %0, 128;" ::"r"(wg + 1) : "memory");
    }
}

/* The sum of v over lanes 0..lane of a full warp (an inclusive scan by shuffles). */
static __device__ __forceinline__ int32_t warp_inclusive_sum(int32_t v, int lane) {
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        const int32_t u = __shfl_up_sync(0xFFFFFFFFu, v, d);
        if (lane >= d) v += u;
    }
    return v;
}

static __device__ __forceinline__ uint32_t prmt(uint32_t lo, uint32_t hi, uint32_t sel) {
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(sel));
    return r;
}

/* 16 bytes read once, past L1: weights streamed from global memory straight into registers */
static __device__ __forceinline__ uint4 ldg_stream_16(const void *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

/* acc += A B with mma.sync m16n8k32, e4m3 x e4m3 into FP32, one warp: A's 16 x 32 fragment a0..a3
 * (4 bytes each: rows g and g + 8 at K 4t.., then the same rows at K 16 + 4t..; g = lane / 4,
 * t = lane % 4), B's 32 x 8 fragment b0 (K 4t.. of column g), b1 (K 16 + 4t..), acc rows g (0, 1)
 * and g + 8 (2, 3) at columns 2t, 2t + 1. (On SM90 ptxas makes it F2FP conversions to FP16 and HMMA
 * with FP32 accumulation: exact products.) */
static __device__ __forceinline__ void mma_e4m3_m16n8k32(float (&acc)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                                         uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
