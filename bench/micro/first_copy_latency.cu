/*
 * first_copy_latency.cu - how long does a decode launch's first chunk take to land, and why?
 *
 * Written when the 8-token decode kernel's DIAG timeline had its first stage's copies go out ~3.7 us
 * after entry and land ~8.0, whether or not L2 was asked for the same bytes 1.7 us earlier, with or
 * without the L2 flush, with the pages touched early. Its answer (bench/RESULTS.md v30): the first
 * round lands its first chunk ~2 us after its copies, translation and copy order aside; which sent
 * the search back to the DIAG hooks, whose own global round trips made up the rest (the stage is
 * complete at ~5.0 us). This micro launches V4-Flash
 * w13 T = 1's shape of first copies (192 of 264 CTAs, two an SM, each taking one 256 KB item of one of
 * 6 experts in a 2 GB weight set: two 4 KB blocks a chunk, 128 KB apart) and stamps, per CTA, the
 * issue and the landing of its first chunk and of its last, for
 *   mode tma:  one thread issues C chunks of bulk copies (cp.async.bulk, as the kernel's producer)
 *   mode lsu:  the CTA's 128 threads load the same bytes with 16-byte loads (as the floor kernel)
 *   mode ldgsts: the same with cp.async 16-byte copies into shared memory (LDGSTS), waited per chunk
 *   mode stage: a decode stage as the kernel fills it: the activation box by TMA (tensor map, 8 rows
 *               x 128 bytes), both halves' weights and weight scales by bulk copies (evict-first),
 *               the FP32 activation scales by 4-byte cp.async from 8 lanes, 32 lanes' arrive.noinc
 *               and the expect_tx arrival (33 arrivals)
 *   mode chain: the same, but (as for the kernel's first chunk) the scales' cp.async and the arrivals
 *               wait for a global read issued after the bulk copies (the item header's round trip)
 *   mode kernel: the decode kernel's first round: four producer warps take chunks round-robin, chunk
 *               c >= 4 goes out once chunk c - 4 has landed (the landing window), chunk 0's header
 *               read goes out before its copies and its scales after the read returns; a fifth warp
 *               stamps the landings
 *   mode kernel+pdl: the same launched with programmatic stream serialization right behind the L2
 *               flush, waiting on the grid before it (griddepcontrol) as the GEMM does
 * and for three states of the memory system before the launch:
 *   cold:  L2 emptied by reading 256 MB, and 6 experts not touched for many launches (other experts
 *          of the set were read in between: their pages' translations are likely gone)
 *   tlb:   L2 emptied, the same 6 experts read just before the flush
 *   hot:   the same experts, no flush (the bytes in L2)
 * Prints, per mode, state and chunk count C, the p50 / max over CTAs of: issue (us after the first
 * CTA's entry), first chunk landed after its issue, last chunk landed after the first issue.
 *
 * Build (here):  make BUILD=build-dev build-dev/first_copy_latency
 * Run (device):  build-dev/first_copy_latency [first mode]   (a second; modes from `first mode` on:
 *                 0 tma, 1 lsu, 2 ldgsts, 3 stage, 4 chain, 5 kernel, 6 kernel+pdl)
 * Results: bench/results/h200-first-copy-latency-v30.txt, read in bench/RESULTS.md v30.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "micro_tensor_map.cuh"
#include "sm90/ptx.cuh"

#define EXPERTS 256
#define EXPERT_BYTES (8u << 20)   /* 4096 x 4096 FP4 */
#define ITEM_BYTES (256u << 10)   /* 128 rows x 4096 K FP4 */
#define HALF_BYTES (128u << 10)   /* 64 rows: the item's two halves, each chunk a 4 KB block of both */
#define ITEMS_PER_EXPERT 32
#define HIT 6
#define BUSY_CTAS (HIT * ITEMS_PER_EXPERT) /* 192 */
#define MAX_C 11 /* (the stage modes; the lsu mode holds at most LSU_C chunks in registers) */
#define LSU_C 8
#define SMEM_BYTES (108 << 10) /* two CTAs an SM, as the decode kernel */
#define FLUSH_BYTES (256u << 20)

enum { MODE_TMA = 0, MODE_LSU = 1, MODE_LDGSTS = 2, MODE_STAGE = 3, MODE_CHAIN = 4, MODE_KERNEL = 5, MODE_KERNEL_PDL = 6, MODES = 7 };
#define WS_EXPERT_BYTES (512u << 10) /* UE8M0 weight scales: 4096 rows x 128 groups */
#define WS_CHUNK_BYTES 256           /* a 64-row half's scales of one chunk */
#define A_ROWS 8                     /* the 8-token tile's activation rows (T = 1: one real) */
#define K_ELEMS 4096
#define A_BOX_BYTES (A_ROWS * 128)
enum { T_ENTRY, T_ISSUE, T_FIRST, T_LAST, T_COUNT };

static __device__ __forceinline__ unsigned long long now_ns(void) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* the time once `dep` is known (the stamp cannot go before the loads that make it) */
static __device__ __forceinline__ unsigned long long now_ns_after(unsigned dep) {
    unsigned long long t;
    asm volatile("{\n.reg .u32 d;\nmov.u32 d, %1;\nmov.u64 %0, %%globaltimer;\n}" : "=l"(t) : "r"(dep));
    return t;
}

static __device__ __forceinline__ void ldgsts16(uint32_t dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
static __device__ __forceinline__ void ldgsts_arrive(uint64_t *bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_addr(bar)) : "memory");
}

struct fc_extra {
    const uint8_t *ws;    /* weight scales, WS_EXPERT_BYTES an expert */
    const float *a_scale; /* [expert][A_ROWS][K / 128] */
    const uint32_t *hdr;  /* a word per expert (the header's read) */
};

__global__ void __launch_bounds__(160) first_copy_kernel(const __grid_constant__ CUtensorMap a_map, const uint8_t *w,
                                                         const int *hit, int mode, int chunks,
                                                         unsigned long long *stamps, unsigned *sink, fc_extra x) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u); /* (the 128B swizzle's atoms) */
    __shared__ uint64_t bars[MAX_C];
    const unsigned long long entry = now_ns();
    unsigned long long *st = stamps + (size_t)blockIdx.x * T_COUNT;
    if (mode == MODE_KERNEL_PDL) {
        asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
        asm volatile("griddepcontrol.wait;" ::: "memory");
    }
    if (threadIdx.x == 0) st[T_ENTRY] = entry;
    if (blockIdx.x >= BUSY_CTAS) return;
    const int expert = hit[blockIdx.x / ITEMS_PER_EXPERT], it = (int)(blockIdx.x % ITEMS_PER_EXPERT);
    const uint8_t *item = w + (size_t)expert * EXPERT_BYTES + (size_t)it * ITEM_BYTES;
    if (threadIdx.x == 0) {
        for (int c = 0; c < chunks; c++) mbar_init(&bars[c], mode == MODE_LDGSTS ? 128 : mode >= MODE_STAGE ? 33 : 1);
        mbar_fence_init();
        if (mode >= MODE_STAGE) asm volatile("prefetch.tensormap [%0];" ::"l"(&a_map) : "memory");
    }
    __syncthreads();
    unsigned long long issue = now_ns(), first = 0, last = 0;
    const bool idle = mode < MODE_KERNEL && threadIdx.x >= 128; /* (the first modes use 128 threads) */
    if (idle) {
    } else if (mode >= MODE_KERNEL) {
        const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
        const uint8_t *ws = x.ws + (size_t)expert * WS_EXPERT_BYTES + (size_t)it * 2 * (K_ELEMS / 128) * WS_CHUNK_BYTES;
        uint8_t *a_dst = smem, *w_dst = smem + MAX_C * A_BOX_BYTES, *ws_dst = w_dst + MAX_C * 8192;
        float *sa = (float *)(ws_dst + MAX_C * 2 * WS_CHUNK_BYTES);
        if (warp < 4) {
            uint64_t policy;
            asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
            for (int c = warp; c < chunks; c += 4) {
                if (c >= 4) mbar_wait(&bars[c - 4], 0); /* the landing window */
                unsigned hdr = 0;
                if (c == 0 && lane == 0) hdr = __ldg(x.hdr + expert); /* the header's read, before the copies */
                if (lane == 0) {
                    if (c != 0) mbar_arrive_expect_tx(&bars[c], A_BOX_BYTES + 8192 + 2 * WS_CHUNK_BYTES);
                    tma_load_3d(a_dst + c * A_BOX_BYTES, &a_map, &bars[c], c * 128, 0, expert);
                    for (int h = 0; h < 2; h++) {
                        bulk_load_hint(w_dst + c * 8192 + h * 4096, item + h * HALF_BYTES + c * 4096, 4096, &bars[c], policy);
                        bulk_load_hint(ws_dst + (c * 2 + h) * WS_CHUNK_BYTES,
                                       ws + (size_t)(h * (K_ELEMS / 128) + c) * WS_CHUNK_BYTES, WS_CHUNK_BYTES, &bars[c], policy);
                    }
                }
                const unsigned dep = __shfl_sync(0xFFFFFFFFu, hdr, 0) & 0x80000000u; /* (chunk 0: the read returned) */
                if (c == 0 && lane == 0) mbar_arrive_expect_tx(&bars[c], A_BOX_BYTES + 8192 + 2 * WS_CHUNK_BYTES);
                if (lane < A_ROWS)
                    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr(sa + c * A_ROWS + lane)),
                                 "l"(x.a_scale + ((size_t)expert * A_ROWS + lane) * (K_ELEMS / 128) + c + dep), "r"(lane == 0 ? 4 : 0)
                                 : "memory");
                ldgsts_arrive(&bars[c]);
            }
        } else if (lane == 0) {
            mbar_wait(&bars[0], 0);
            first = now_ns();
            mbar_wait(&bars[chunks - 1], 0);
            last = now_ns();
        }
    } else if (mode >= MODE_STAGE) {
        if (threadIdx.x < 32) {
            const uint8_t *ws = x.ws + (size_t)expert * WS_EXPERT_BYTES + (size_t)it * 2 * (K_ELEMS / 128) * WS_CHUNK_BYTES;
            uint64_t policy;
            asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
            const int lane = (int)threadIdx.x;
            uint8_t *a_dst = smem, *w_dst = smem + MAX_C * A_BOX_BYTES, *ws_dst = w_dst + MAX_C * 8192;
            if (lane == 0)
                for (int c = 0; c < chunks; c++) {
                    tma_load_3d(a_dst + c * A_BOX_BYTES, &a_map, &bars[c], c * 128, 0, expert);
                    for (int h = 0; h < 2; h++) {
                        bulk_load_hint(w_dst + c * 8192 + h * 4096, item + h * HALF_BYTES + c * 4096, 4096, &bars[c], policy);
                        bulk_load_hint(ws_dst + (c * 2 + h) * WS_CHUNK_BYTES,
                                       ws + (size_t)(h * (K_ELEMS / 128) + c) * WS_CHUNK_BYTES, WS_CHUNK_BYTES, &bars[c], policy);
                    }
                }
            unsigned dep = 0;
            if (mode == MODE_CHAIN) dep = __shfl_sync(0xFFFFFFFFu, lane == 0 ? __ldg(x.hdr + expert) : 0u, 0) & 0x80000000u;
            float *sa = (float *)(ws_dst + MAX_C * 2 * WS_CHUNK_BYTES);
            for (int c = 0; c < chunks; c++) {
                if (lane == 0) mbar_arrive_expect_tx(&bars[c], A_BOX_BYTES + 8192 + 2 * WS_CHUNK_BYTES);
                if (lane < A_ROWS)
                    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr(sa + c * A_ROWS + lane)),
                                 "l"(x.a_scale + ((size_t)expert * A_ROWS + lane) * (K_ELEMS / 128) + c + dep), "r"(lane == 0 ? 4 : 0)
                                 : "memory");
                ldgsts_arrive(&bars[c]);
            }
            if (lane == 0) {
                mbar_wait(&bars[0], 0);
                first = now_ns();
                mbar_wait(&bars[chunks - 1], 0);
                last = now_ns();
            }
        }
    } else if (mode == MODE_TMA) {
        if (threadIdx.x == 0) {
            for (int c = 0; c < chunks; c++) {
                mbar_arrive_expect_tx(&bars[c], 8192);
                bulk_load(smem + c * 8192, item + c * 4096, 4096, &bars[c]);
                bulk_load(smem + c * 8192 + 4096, item + HALF_BYTES + c * 4096, 4096, &bars[c]);
            }
            mbar_wait(&bars[0], 0);
            first = now_ns();
            mbar_wait(&bars[chunks - 1], 0);
            last = now_ns();
        }
    } else if (mode == MODE_LDGSTS) {
        const uint32_t base = smem_addr(smem);
        for (int c = 0; c < chunks; c++) {
            for (int i = (int)threadIdx.x; i < 512; i += 128) {
                const uint32_t off = (uint32_t)i * 16;
                const uint8_t *src = item + (off < 4096 ? c * 4096 + off : HALF_BYTES + c * 4096 + off - 4096);
                ldgsts16(base + c * 8192 + off, src);
            }
            ldgsts_arrive(&bars[c]);
        }
        mbar_wait(&bars[0], 0);
        first = now_ns();
        mbar_wait(&bars[chunks - 1], 0);
        last = now_ns();
    } else {
        uint4 v[LSU_C][4];
#pragma unroll
        for (int c = 0; c < LSU_C; c++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const uint32_t off = ((uint32_t)j * 128 + threadIdx.x) * 16;
                const uint8_t *src = item + (off < 4096 ? c * 4096 + off : HALF_BYTES + c * 4096 + off - 4096);
                v[c][j] = c < chunks ? __ldcs((const uint4 *)src) : make_uint4(0, 0, 0, 0);
            }
        unsigned acc = v[0][0].x ^ v[0][1].y ^ v[0][2].z ^ v[0][3].w;
        first = now_ns_after(acc); /* (chunk 0's values used: its landing) */
#pragma unroll
        for (int c = 1; c < LSU_C; c++)
#pragma unroll
            for (int j = 0; j < 4; j++) acc ^= v[c][j].x ^ v[c][j].y ^ v[c][j].z ^ v[c][j].w;
        last = now_ns_after(acc);
        if (acc == 0x9E3779B9u) *sink = acc;
    }
    /* (the CTA's latest thread: every thread's loads must have landed) */
    __shared__ unsigned long long lmax[2];
    if (threadIdx.x == 0) lmax[0] = lmax[1] = 0;
    __syncthreads();
    if ((mode != MODE_TMA && mode < MODE_STAGE && !idle) || threadIdx.x == (mode >= MODE_KERNEL ? 128 : 0)) {
        atomicMax(&lmax[0], first);
        atomicMax(&lmax[1], last);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        st[T_ISSUE] = issue;
        st[T_FIRST] = lmax[0];
        st[T_LAST] = lmax[1];
    }
}

__global__ void read_kernel(const uint4 *p, size_t n, unsigned *sink) {
    unsigned acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = __ldcs(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9E3779B9u) *sink = acc;
}

static int cmp_u64(const void *a, const void *b) {
    const unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}
static double p50(unsigned long long *v, int n) {
    qsort(v, (size_t)n, sizeof v[0], cmp_u64);
    return v[n / 2] / 1000.0;
}
static double vmax(unsigned long long *v, int n) {
    qsort(v, (size_t)n, sizeof v[0], cmp_u64);
    return v[n - 1] / 1000.0;
}

#define CK(x)                                                                                                  \
    do {                                                                                                       \
        cudaError_t e_ = (x);                                                                                  \
        if (e_ != cudaSuccess) {                                                                               \
            fprintf(stderr, "first_copy_latency: %s: %s\n", #x, cudaGetErrorString(e_));                      \
            return 1;                                                                                          \
        }                                                                                                      \
    } while (0)


int main(int argc, char **argv) {
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess || sms == 0) {
        fprintf(stderr, "first_copy_latency: no CUDA device\n");
        return 1;
    }
    const int grid = 2 * sms;
    uint8_t *w = NULL, *flush = NULL;
    int *hit_d = NULL;
    unsigned long long *stamps_d = NULL;
    unsigned *sink = NULL;
    CK(cudaMalloc((void **)&w, (size_t)EXPERTS * EXPERT_BYTES));
    CK(cudaMalloc((void **)&flush, FLUSH_BYTES));
    CK(cudaMalloc((void **)&hit_d, HIT * sizeof(int)));
    CK(cudaMalloc((void **)&stamps_d, (size_t)grid * T_COUNT * sizeof(unsigned long long)));
    CK(cudaMalloc((void **)&sink, sizeof(unsigned)));
    CK(cudaMemset(w, 0x5A, (size_t)EXPERTS * EXPERT_BYTES));
    fc_extra x;
    uint8_t *ws_d = NULL, *a_d = NULL;
    float *as_d = NULL;
    uint32_t *hdr_d = NULL;
    CK(cudaMalloc((void **)&ws_d, (size_t)EXPERTS * WS_EXPERT_BYTES));
    CK(cudaMalloc((void **)&a_d, (size_t)EXPERTS * A_ROWS * K_ELEMS));
    CK(cudaMalloc((void **)&as_d, (size_t)EXPERTS * A_ROWS * (K_ELEMS / 128) * sizeof(float)));
    CK(cudaMalloc((void **)&hdr_d, EXPERTS * sizeof(uint32_t)));
    CK(cudaMemset(ws_d, 0x7F, (size_t)EXPERTS * WS_EXPERT_BYTES));
    CK(cudaMemset(a_d, 0x38, (size_t)EXPERTS * A_ROWS * K_ELEMS));
    CK(cudaMemset(as_d, 0, (size_t)EXPERTS * A_ROWS * (K_ELEMS / 128) * sizeof(float)));
    CK(cudaMemset(hdr_d, 0, EXPERTS * sizeof(uint32_t)));
    x.ws = ws_d;
    x.a_scale = as_d;
    x.hdr = hdr_d;
    CUtensorMap a_map;
    {
        const encode_fn enc = micro_tensor_map_encoder("first_copy_latency");
        if (!enc) return 1;
        const cuuint64_t dims[3] = {K_ELEMS, A_ROWS, EXPERTS}, strides[2] = {K_ELEMS, (cuuint64_t)A_ROWS * K_ELEMS};
        const cuuint32_t box[3] = {128, A_ROWS, 1}, estr[3] = {1, 1, 1};
        if (enc(&a_map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, a_d, dims, strides, box, estr,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
            fprintf(stderr, "first_copy_latency: the activation map was refused\n");
            return 1;
        }
    }
    CK(cudaMemset(flush, 0x33, FLUSH_BYTES));
    CK(cudaFuncSetAttribute(first_copy_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES));
    unsigned long long *stamps = (unsigned long long *)malloc((size_t)grid * T_COUNT * sizeof(unsigned long long));
    unsigned long long col[3][BUSY_CTAS];
    const char *mode_name[MODES] = {"tma", "lsu", "ldgsts", "stage", "chain", "kernel", "k+pdl"},
               *state_name[3] = {"cold", "tlb", "hot"};
    const int chunk_counts[3] = {1, 4, 8}, kernel_chunk_counts[3] = {4, 8, 11};
    const int first_mode = argc > 1 ? atoi(argv[1]) : 0; /* (modes from this one on) */
    printf("# first_copy_latency: %d CTAs (%d with a 256 KB item of one of %d experts), us; per CTA: issue after the\n"
           "# first entry, first chunk landed after its issue, last chunk landed after the issue (p50 / max over CTAs),\n"
           "# kernel time by events; 4 trials each (other experts each trial), p50 of the trials' p50s\n",
           grid, BUSY_CTAS, HIT);
    int trial_seed = 1;
    for (int mode = first_mode; mode < MODES; mode++)
        for (int ci = 0; ci < 3; ci++)
            for (int state = 0; state < 3; state++) {
                double r[5][4];
                for (int trial = 0; trial < 4; trial++) {
                    int hit[HIT];
                    srand((unsigned)(trial_seed++ * 7919));
                    for (int i = 0; i < HIT; i++) { /* distinct experts, away from the previous trials' */
                        int e, dup;
                        do {
                            e = rand() % EXPERTS;
                            dup = 0;
                            for (int j = 0; j < i; j++) dup |= hit[j] == e;
                        } while (dup);
                        hit[i] = e;
                    }
                    CK(cudaMemcpy(hit_d, hit, sizeof hit, cudaMemcpyHostToDevice));
                    if (state == 0) /* touch other experts (translations of the chosen ones go cold) */
                        read_kernel<<<grid, 512>>>((const uint4 *)(w + (size_t)((hit[0] + 128) % 200) * EXPERT_BYTES),
                                                   (size_t)48 * EXPERT_BYTES / 16, sink);
                    if (state != 0) /* read the chosen experts' items once (translations warm, bytes in L2) */
                        first_copy_kernel<<<grid, 160, SMEM_BYTES>>>(a_map, w, hit_d, MODE_LSU, LSU_C, stamps_d, sink, x);
                    if (state != 2) read_kernel<<<grid, 512>>>((const uint4 *)flush, FLUSH_BYTES / 16, sink);
                    cudaEvent_t e0, e1;
                    CK(cudaEventCreate(&e0));
                    CK(cudaEventCreate(&e1));
                    CK(cudaEventRecord(e0));
                    const int C = mode >= MODE_KERNEL ? kernel_chunk_counts[ci] : chunk_counts[ci];
                    if (mode == MODE_KERNEL_PDL) { /* (right behind the flush, as the GEMM's graph) */
                        cudaLaunchConfig_t cfg = {};
                        cudaLaunchAttribute attr;
                        attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
                        attr.val.programmaticStreamSerializationAllowed = 1;
                        cfg.gridDim = dim3(grid);
                        cfg.blockDim = dim3(160);
                        cfg.dynamicSmemBytes = SMEM_BYTES;
                        cfg.attrs = &attr;
                        cfg.numAttrs = 1;
                        CK(cudaLaunchKernelEx(&cfg, first_copy_kernel, a_map, (const uint8_t *)w, (const int *)hit_d, mode, C,
                                              stamps_d, sink, x));
                    } else {
                        first_copy_kernel<<<grid, 160, SMEM_BYTES>>>(a_map, w, hit_d, mode, C, stamps_d, sink, x);
                    }
                    CK(cudaEventRecord(e1));
                    CK(cudaEventSynchronize(e1));
                    CK(cudaGetLastError());
                    float ms = 0;
                    cudaEventElapsedTime(&ms, e0, e1);
                    cudaEventDestroy(e0);
                    cudaEventDestroy(e1);
                    CK(cudaMemcpy(stamps, stamps_d, (size_t)grid * T_COUNT * sizeof(unsigned long long),
                                  cudaMemcpyDeviceToHost));
                    unsigned long long t0 = ~0ull;
                    for (int b = 0; b < grid; b++)
                        if (stamps[b * T_COUNT + T_ENTRY] < t0) t0 = stamps[b * T_COUNT + T_ENTRY];
                    for (int b = 0; b < BUSY_CTAS; b++) {
                        const unsigned long long *s = stamps + b * T_COUNT;
                        col[0][b] = s[T_ISSUE] - t0;
                        col[1][b] = s[T_FIRST] - s[T_ISSUE];
                        col[2][b] = s[T_LAST] - s[T_ISSUE];
                    }
                    r[0][trial] = p50(col[0], BUSY_CTAS);
                    r[1][trial] = p50(col[1], BUSY_CTAS);
                    r[2][trial] = vmax(col[1], BUSY_CTAS);
                    r[3][trial] = p50(col[2], BUSY_CTAS);
                    r[4][trial] = ms * 1000.0;
                }
                double med[5];
                for (int k = 0; k < 5; k++) { /* median of 4: mean of the middle two */
                    double *x = r[k];
                    for (int i = 0; i < 4; i++)
                        for (int j = i + 1; j < 4; j++)
                            if (x[j] < x[i]) {
                                const double t = x[i];
                                x[i] = x[j];
                                x[j] = t;
                            }
                    med[k] = (x[1] + x[2]) / 2;
                }
                printf("%-7s C=%-2d %-5s issue %5.2f  first landed +%5.2f (max +%5.2f)  last landed +%5.2f  kernel %6.2f\n",
                       mode_name[mode], mode >= MODE_KERNEL ? kernel_chunk_counts[ci] : chunk_counts[ci], state_name[state], med[0], med[1], med[2], med[3], med[4]);
            }
    free(stamps);
    return 0;
}
