/*
 * bf16_ceiling.cu - could BF16 tensor cores serve 1x32 activation scales faster than FP8 ones?
 *
 * With 1x32 activation scales the FP8 kernels promote after every k32 step (4 x 64 FFMA per 128 K
 * and thread at 128 tokens, on top of the conversion): ~365 TFLOP/s at prefill, where 1x128 scales
 * reach ~665 (bench/RESULTS.md v14). Transformers' scales are UE8M0 (powers of two), so a scaled
 * FP8 activation is exact in BF16, and so is an FP4 weight times its UE8M0 scale: a BF16 wgmma
 * then needs no promotion at all (its FP32 accumulator runs over all of K), at half the FP8
 * tensor rate. This microbenchmark times that consumer structure without memory traffic:
 *   0  8 RS wgmmas m64n128k16 (bf16) per 128-K "chunk", waited at the end only (the BF16 RS ceiling)
 *   1  + the next chunk's FP4 -> BF16 conversion (per-32 UE8M0 scale folded through byte tables)
 *      under the wgmmas, waited every chunk (the FP8 kernel's look-ahead)
 *   2  like 1 with two wgmma groups in flight (wait_group 1)
 *   3  like 1 with three consumer warpgroups (no FP32 running sum frees the registers)
 *   4  like 2 with three consumer warpgroups
 * One CTA per SM, one B tile in shared memory, fragments from constant words. Prints TFLOP/s.
 *
 * Build (here):  make BUILD=build-dev build-dev/bf16_ceiling
 * Run (device):  build-dev/bf16_ceiling            (a few seconds)
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "micro_timing.cuh"
#include "sm90/fp8_fp4_gemm.cuh" /* the PTX wrappers */

#define BT 128
#define CHUNKS 1024

/* the B tile: BT tokens x 128 K of bf16 as two 64-K atoms of 128-byte swizzled rows (16 KB each) */
#define SMEM_BYTES (1024 + 2 * BT * 128)

static __device__ __forceinline__ void wgmma_m64n128k16_bf16_rs(float *d, const uint32_t *a, sm90_desc desc_b,
                                                                int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 desc;\nsetp.ne.b32 p, %70, 0;\nmov.b64 desc, {%68, %69};\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,"
        "%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,"
        "%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
        "{%64,%65,%66,%67}, desc, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(desc_b.lo), "r"(desc_b.hi), "r"(scale_d));
}

/* The byte tables of the 8 e2m1 magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6} x 2^(s - 127) as BF16, for a
 * UE8M0 scale byte s >= 2: (h0, h1) the high bytes (exponent >> 1; the sign comes from the word),
 * (l0, l1) the low bytes (exponent's last bit, mantissa). With s = 2h + p, entry c's exponent is
 * s - 1, s, s, s + 1, s + 1, s + 2, s + 2 for c = 1..7, so the high bytes are h plus a constant of
 * the parity and the low bytes a constant of the parity. */
static __device__ __forceinline__ void bf16_tables(uint32_t s, uint32_t &h0, uint32_t &h1, uint32_t &l0, uint32_t &l1) {
    const uint32_t h = s >> 1, odd = s & 1u;
    h0 = h * 0x01010100u + (odd ? 0u : 0xFFFFFF00u);
    h1 = h * 0x01010101u + (odd ? 0x01010101u : 0x01010000u);
    l0 = odd ? 0xC0800000u : 0x40008000u;
    l1 = odd ? 0xC0804000u : 0x4000C080u;
}

/* One pre-signed word of the SM90 layout (sm90_layout.h: 4 values of row g in nibbles 0..3 with
 * signs at bits 8j + 7, 4 of row g + 8 in nibbles 4..7 with signs at bits 8j + 3, K offsets
 * kk + 0..3) as BF16 pairs: g01 (row g, kk + 0, 1), g23, r01 (row g + 8), r23. */
static __device__ __forceinline__ void fp4x8_to_bf16(uint32_t q, const uint32_t (&tg)[4], const uint32_t (&tr)[4],
                                                     uint32_t &g01, uint32_t &g23, uint32_t &r01, uint32_t &r23) {
    const uint32_t mag = q & 0x77777777u, mag8 = mag >> 16;
    const uint32_t hg = prmt(tg[0], tg[1], mag) | (q & 0x80808080u), lg = prmt(tg[2], tg[3], mag);
    const uint32_t hr = prmt(tr[0], tr[1], mag8) | ((q << 4) & 0x80808080u), lr = prmt(tr[2], tr[3], mag8);
    g01 = prmt(lg, hg, 0x5140u);
    g23 = prmt(lg, hg, 0x7362u);
    r01 = prmt(lr, hr, 0x5140u);
    r23 = prmt(lr, hr, 0x7362u);
}

/* A 128-K chunk's 8 k16 fragments from the thread's two 16-byte words (q0: K 0..63, q1: 64..127)
 * and its rows' 4 scale bytes each (sg: row g, sr: row g + 8, byte j = 32-group j). The word of
 * k32 step st at K offset 4t (lo) serves k16 step 2 st and the one at 16 + 4t (hi) step 2 st + 1,
 * with the activations' K permuted to match within each 32-group (a permutation of K on both
 * operands leaves the sum unchanged): BF16 position 2t, 2t + 1 <- K 4t, 4t + 1; 2t + 8, 2t + 9 <-
 * 4t + 2, 4t + 3 (and 16 + the same). */
static __device__ __forceinline__ void convert_chunk_bf16(uint32_t (&a)[8][4], uint4 q0, uint4 q1, uint32_t sg,
                                                          uint32_t sr) {
    const uint32_t wlo[4] = {q0.x, q0.z, q1.x, q1.z};
    const uint32_t whi[4] = {q0.y, q0.w, q1.y, q1.w};
#pragma unroll
    for (int st = 0; st < 4; st++) {
        uint32_t tg[4], tr[4];
        bf16_tables((sg >> (8 * st)) & 255u, tg[0], tg[1], tg[2], tg[3]);
        bf16_tables((sr >> (8 * st)) & 255u, tr[0], tr[1], tr[2], tr[3]);
        fp4x8_to_bf16(wlo[st], tg, tr, a[2 * st][0], a[2 * st][2], a[2 * st][1], a[2 * st][3]);
        fp4x8_to_bf16(whi[st], tg, tr, a[2 * st + 1][0], a[2 * st + 1][2], a[2 * st + 1][1], a[2 * st + 1][3]);
    }
}

/* k16 step k of a chunk: 32 bytes along the 128-byte swizzled rows, the second 64-K atom 16 KB on */
static __device__ __forceinline__ sm90_desc desc_k16(sm90_desc d, int k) {
    d.lo += (uint32_t)((k / 4) * (BT * 128 >> 4) + (k % 4) * 2);
    return d;
}

static __device__ __forceinline__ void issue_chunk(float *acc, uint32_t (&a)[8][4], sm90_desc desc, bool first) {
#pragma unroll
    for (int k = 0; k < 8; k++)
#pragma unroll
        for (int r = 0; r < 4; r++) reg_fence(a[k][r]);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < 8; k++) wgmma_m64n128k16_bf16_rs(acc, a[k], desc_k16(desc, k), !(first && k == 0));
    wgmma_commit();
}
static __device__ __forceinline__ void fence_frags(uint32_t (&a)[8][4]) {
#pragma unroll
    for (int k = 0; k < 8; k++)
#pragma unroll
        for (int r = 0; r < 4; r++) reg_fence(a[k][r]);
}

/* each chunk's words and scale parities differ, so no conversion can be hoisted out of the loop */
static __device__ __forceinline__ uint4 vary(uint4 q, int kc) {
    const uint32_t x = (uint32_t)kc * 0x11111111u & 0x11111111u;
    return make_uint4(q.x ^ x, q.y ^ x, q.z ^ x, q.w ^ x);
}

template <int V, int WGS>
__global__ void __launch_bounds__(128 * WGS, 1) bf16_kernel(const uint4 *wsrc, float *out) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t *b_tile = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
    for (int i = threadIdx.x; i < 2 * BT * 128 / 4; i += blockDim.x)
        ((uint32_t *)b_tile)[i] = 0x3F803F80u ^ (i * 0x00010001u & 0x007F007Fu); /* bf16 in [1, 2) */
    __syncthreads();
    const sm90_desc desc = smem_desc_k128_swizzle128(b_tile);
    const uint4 q0 = wsrc[threadIdx.x % 128], q1 = wsrc[128 + threadIdx.x % 128];
    const uint32_t sg = 0x7E7F7F80u, sr = 0x7F807E7Fu;
    float acc[BT / 2];
#pragma unroll
    for (int i = 0; i < BT / 2; i++) acc[i] = 0.0f;
    uint32_t a[8][4], b[8][4];
    convert_chunk_bf16(a, q0, q1, sg, sr);
    if (V == 0) {
        for (int kc = 0; kc < CHUNKS; kc++) issue_chunk(acc, a, desc, false);
    } else if (V == 1) { /* convert the next chunk under the wgmmas, wait every chunk */
        for (int kc = 0; kc < CHUNKS; kc += 2) {
            issue_chunk(acc, a, desc, false);
            convert_chunk_bf16(b, vary(q0, kc), vary(q1, kc), sg ^ (kc & 0x01010101u), sr ^ (kc & 0x01010101u));
            wgmma_wait<0>();
            fence_frags(a);
            issue_chunk(acc, b, desc, false);
            convert_chunk_bf16(a, vary(q0, kc + 1), vary(q1, kc + 1), sg ^ ((kc + 1) & 0x01010101u), sr ^ ((kc + 1) & 0x01010101u));
            wgmma_wait<0>();
            fence_frags(b);
        }
    } else { /* two groups in flight: chunk k + 1 is issued before chunk k is waited for */
        convert_chunk_bf16(b, vary(q0, 1), vary(q1, 1), sg ^ 1u, sr ^ 1u);
        issue_chunk(acc, a, desc, false);
        for (int kc = 0; kc < CHUNKS; kc += 2) {
            issue_chunk(acc, b, desc, false);
            wgmma_wait<1>(); /* chunk on a done */
            fence_frags(a);
            convert_chunk_bf16(a, vary(q0, kc), vary(q1, kc), sg ^ (kc & 0x01010101u), sr ^ (kc & 0x01010101u));
            issue_chunk(acc, a, desc, false);
            wgmma_wait<1>(); /* chunk on b done */
            fence_frags(b);
            convert_chunk_bf16(b, vary(q0, kc + 1), vary(q1, kc + 1), sg ^ ((kc + 1) & 0x01010101u), sr ^ ((kc + 1) & 0x01010101u));
        }
    }
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < BT / 2; i++) reg_fence(acc[i]);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < BT / 2; i++) sum += acc[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum; /* keeps everything live */
}

typedef struct bf16_args {
    int sms;
    const uint4 *w;
    float *out;
} bf16_args;

template <int V, int WGS>
static void launch_bf16(void *arg) {
    const bf16_args *x = (const bf16_args *)arg;
    bf16_kernel<V, WGS><<<x->sms, 128 * WGS, SMEM_BYTES>>>(x->w, x->out);
}

template <int V, int WGS>
static double run(int sms, const uint4 *w, float *out) {
    cudaFuncSetAttribute(bf16_kernel<V, WGS>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    bf16_args args = {sms, w, out};
    cudaError_t err; /* main checks the device afterwards */
    const float ms = micro_time_ms(launch_bf16<V, WGS>, &args, &err);
    const double flop = (double)sms * WGS * 64.0 * BT * 128.0 * 2.0 * (V == 2 ? CHUNKS + 1 : CHUNKS) * MICRO_REPS;
    return flop / (ms * 1e-3) / 1e12;
}

int main(void) {
    const int sms = micro_sm_count("bf16_ceiling");
    if (sms == 0) return 1;
    uint4 *w;
    float *out;
    cudaMalloc(&w, 256 * sizeof(uint4));
    cudaMemset(w, 0x35, 256 * sizeof(uint4));
    cudaMalloc(&out, (size_t)sms * 384 * sizeof(float));
    static const char *names[] = {"bf16 wgmma only (RS ceiling), 2 WGs", "+ conversion under wgmmas, 2 WGs",
                                  "+ two groups in flight, 2 WGs", "+ conversion under wgmmas, 3 WGs",
                                  "+ two groups in flight, 3 WGs", "bf16 wgmma only, 3 WGs"};
    double tf[6];
    tf[0] = run<0, 2>(sms, w, out);
    tf[1] = run<1, 2>(sms, w, out);
    tf[2] = run<2, 2>(sms, w, out);
    tf[3] = run<1, 3>(sms, w, out);
    tf[4] = run<2, 3>(sms, w, out);
    tf[5] = run<0, 3>(sms, w, out);
    const cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) {
        fprintf(stderr, "bf16_ceiling: %s\n", cudaGetErrorString(err));
        return 1;
    }
    printf("# m64n%dk16 bf16 RS wgmma, one CTA per SM, %d CTAs, %d chunks of 128 K\n", BT, sms, CHUNKS);
    for (int v = 0; v < 6; v++) printf("%d  %-40s %7.1f TFLOP/s\n", v, names[v], tf[v]);
    cudaFree(w);
    cudaFree(out);
    return 0;
}
