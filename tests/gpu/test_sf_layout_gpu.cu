/*
 * test_sf_layout_gpu.cu - the SF layout toolkit's GPU forms (hfp4_sf_*_gpu) against its CPU forms:
 * byte for byte, padding included, on random data, for every primitive and the main transform
 * branches; device outputs are poisoned first and the bytes after them must stay poisoned. Also
 * the device error flag for non-power-of-two scales, and the bandwidth of the DeepSeek-V4 expert
 * scale transforms (256 x 4096 x 128 FP32) against a device-to-device copy measured in the same run
 * (target >= 70 %). Run: make gpu-test (or build/hfp4_gpu_tests --filter sf_).
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_device.h"
#include "harness.h"

/* ---- helpers --------------------------------------------------------------------------------- */

/* Skips unless a CUDA device exists (the brief's rule) and it can run hfp4's sm_90a kernels. */
#define REQUIRE_GPU()                                                                                \
    do {                                                                                             \
        int n_ = 0;                                                                                  \
        if (cudaGetDeviceCount(&n_) != cudaSuccess || n_ == 0) {                                     \
            cudaGetLastError();                                                                      \
            SKIP("no CUDA device");                                                                  \
        }                                                                                            \
        if (!gpu_current_is_sm90()) SKIP("no SM90 GPU");                                             \
    } while (0)

#define CUDA_OK(call)                                                                                \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        CHECK_MSG(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));                       \
    } while (0)

static const unsigned kPoison = 0xABu;
static const size_t kSlack = 64; /* bytes after the output that must stay poisoned */

static int64_t align4(int64_t x) { return (x + 3) / 4 * 4; }
static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static uint32_t rand_pow2_bits(hfp4_rng *r) {
    uint64_t x = hfp4_rng_next(r);
    if (x % 61 == 0) return 0x00400000u;
    return (uint32_t)(1 + (x >> 8) % 254) << 23;
}

enum { L_KMAJOR, L_MNMAJOR, L_MNTMA, L_PADDED, L_INTERLEAVED, L_COUNT };

/* A scale tensor on the host and an identical copy (same strides) on the device. */
struct dual_tensor {
    hfp4_sf_tensor host, dev;
    uint32_t *hbuf;
    void *dbuf;
};

static dual_tensor make_dual(hfp4_dtype dtype, int32_t groups, int64_t mn, int64_t sf_k, int kind, hfp4_rng *r,
                             int pow2, int misalign) {
    dual_tensor o;
    memset(&o, 0, sizeof o);
    int64_t g = groups > 0 ? groups : 1, t = align4(mn);
    hfp4_sf_tensor d;
    memset(&d, 0, sizeof d);
    d.dtype = dtype;
    d.num_groups = groups;
    d.mn = mn;
    d.sf_k = sf_k;
    switch (kind) {
    case L_KMAJOR: d.stride_k = 1, d.stride_mn = sf_k, d.stride_group = mn * sf_k; break;
    case L_MNMAJOR: d.stride_mn = 1, d.stride_k = mn, d.stride_group = mn * sf_k; break;
    case L_MNTMA: d.stride_mn = 1, d.stride_k = t, d.stride_group = t * sf_k; break;
    case L_PADDED: d.stride_k = 1, d.stride_mn = sf_k + 3, d.stride_group = mn * (sf_k + 3) + 5; break;
    default: d.stride_k = 1, d.stride_group = sf_k, d.stride_mn = g * sf_k; break;
    }
    if (groups == 0) d.stride_group = 0;
    int64_t words = (g - 1) * d.stride_group + (mn > 0 ? mn - 1 : 0) * d.stride_mn +
                    (sf_k > 0 ? sf_k - 1 : 0) * d.stride_k + 1 + 8 + misalign;
    o.hbuf = (uint32_t *)malloc((size_t)words * 4);
    for (int64_t i = 0; i < words; i++) o.hbuf[i] = pow2 ? rand_pow2_bits(r) : (uint32_t)hfp4_rng_next(r);
    CUDA_OK(cudaMalloc(&o.dbuf, (size_t)words * 4));
    CUDA_OK(cudaMemcpy(o.dbuf, o.hbuf, (size_t)words * 4, cudaMemcpyHostToDevice));
    o.host = d;
    o.dev = d;
    o.host.data = o.hbuf + misalign; /* misalign = 1: 4-byte aligned only, the scalar paths */
    o.dev.data = (uint32_t *)o.dbuf + misalign;
    return o;
}

static void free_dual(dual_tensor *o) {
    free(o->hbuf);
    cudaFree(o->dbuf);
}

/* A device output of `bytes`, poisoned along with kSlack bytes after it (offset 4 bytes when
 * misalign, so the 4-byte store path runs). */
struct dev_out {
    void *base;
    void *ptr;
    size_t bytes;
};

static dev_out make_out(size_t bytes, int misalign) {
    dev_out o;
    o.bytes = bytes;
    CUDA_OK(cudaMalloc(&o.base, bytes + kSlack + 16));
    CUDA_OK(cudaMemset(o.base, (int)kPoison, bytes + kSlack + 16));
    o.ptr = (char *)o.base + (misalign ? 4 : 0);
    return o;
}

/* Compares the device output with the CPU's, then checks the slack is still poisoned. */
static int same_as_cpu(const dev_out &o, const void *cpu, const char *what) {
    CUDA_OK(cudaDeviceSynchronize());
    unsigned char *h = (unsigned char *)malloc(o.bytes + kSlack);
    CUDA_OK(cudaMemcpy(h, o.ptr, o.bytes + kSlack, cudaMemcpyDeviceToHost));
    int ok = 1;
    for (size_t i = 0; i < o.bytes && ok; i++)
        if (h[i] != ((const unsigned char *)cpu)[i]) {
            CHECK_MSG(0, "%s: byte %zu (word %zu) GPU 0x%02x CPU 0x%02x", what, i, i / 4, h[i],
                      ((const unsigned char *)cpu)[i]);
            ok = 0;
        }
    for (size_t i = o.bytes; i < o.bytes + kSlack && ok; i++)
        if (h[i] != kPoison) {
            CHECK_MSG(0, "%s: GPU wrote byte %zu past the output's %zu bytes", what, i, o.bytes);
            ok = 0;
        }
    free(h);
    return ok;
}

static int same_desc(const hfp4_sf_tensor *a, const hfp4_sf_tensor *b) {
    return a->dtype == b->dtype && a->num_groups == b->num_groups && a->mn == b->mn && a->sf_k == b->sf_k &&
           a->stride_group == b->stride_group && a->stride_mn == b->stride_mn && a->stride_k == b->stride_k;
}

static const int64_t mn_list[] = {1, 3, 4, 5, 8, 13, 31, 63, 64, 65, 100, 127, 128, 129, 200, 255, 256, 257, 1000};
#define N_MN (int)(sizeof mn_list / sizeof mn_list[0])

/* ---- primitives ------------------------------------------------------------------------------ */

TEST(sf_gpu_mn_major_matches_cpu) {
    REQUIRE_GPU();
    hfp4_rng r = hfp4_rng_make(11);
    static const int64_t ks[] = {1, 3, 4, 7, 32, 33, 56};
    int cases = 0;
    for (int mi = 0; mi < N_MN; mi++)
        for (int ki = 0; ki < 7; ki++)
            for (int32_t g = 0; g <= 3; g += 3)
                for (int kind = 0; kind < L_COUNT; kind++) {
                    if (hfp4_test_failed()) return;
                    int mis = (mi + ki + kind) % 5 == 0;
                    dual_tensor t = make_dual(kind % 2 ? HFP4_DTYPE_FP32 : HFP4_DTYPE_INT32, g, mn_list[mi], ks[ki],
                                              kind, &r, 0, mis);
                    hfp4_sf_tensor cd, gd;
                    size_t bytes;
                    CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_tensor_query(&t.host, &cd, &bytes), HFP4_OK);
                    void *cpu = malloc(bytes + 4);
                    CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_tensor(&t.host, NULL, cpu, bytes, &cd), HFP4_OK);
                    dev_out o = make_out(bytes, (mi + kind) % 3 == 0);
                    CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_tensor_gpu(&t.dev, NULL, o.ptr, bytes, &gd, NULL),
                                 HFP4_OK);
                    if (bytes == 0) {
                        CHECK(gd.data == t.dev.data); /* pass-through */
                    } else {
                        CHECK(gd.data == o.ptr && same_desc(&gd, &cd));
                        same_as_cpu(o, cpu, "mn-major");
                    }
                    cudaFree(o.base);
                    free(cpu);
                    free_dual(&t);
                    cases++;
                }
    printf("    %d cases\n", cases);
}

static void pack_case(dual_tensor *t, int64_t mn, int32_t gran_mn, const int32_t *h_ends, int32_t n_ends,
                      int32_t alignment, int misalign_out, const char *what) {
    hfp4_sf_psum hps = {h_ends, n_ends, alignment}, dps = hps;
    int32_t *d_ends = NULL;
    if (h_ends) {
        CUDA_OK(cudaMalloc(&d_ends, (size_t)n_ends * 4));
        CUDA_OK(cudaMemcpy(d_ends, h_ends, (size_t)n_ends * 4, cudaMemcpyHostToDevice));
        dps.ends = d_ends;
    }
    hfp4_sf_tensor cd, gd;
    size_t bytes;
    CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query(&t->host, mn, gran_mn, h_ends ? &hps : NULL,
                                                                            &cd, &bytes),
                 HFP4_OK);
    void *cpu = malloc(bytes + 4);
    CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&t->host, mn, gran_mn, h_ends ? &hps : NULL, NULL,
                                                                      cpu, bytes, &cd),
                 HFP4_OK);
    dev_out o = make_out(bytes, misalign_out);
    int32_t *flag;
    CUDA_OK(cudaMalloc(&flag, 4));
    CUDA_OK(cudaMemset(flag, 0, 4));
    hfp4_sf_options opts = {0, 0, flag};
    CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_gpu(&t->dev, mn, gran_mn, h_ends ? &dps : NULL,
                                                                          &opts, o.ptr, bytes, &gd, NULL),
                 HFP4_OK);
    CHECK(gd.data == o.ptr && same_desc(&gd, &cd));
    same_as_cpu(o, cpu, what);
    int32_t hflag = -1;
    CUDA_OK(cudaMemcpy(&hflag, flag, 4, cudaMemcpyDeviceToHost));
    CHECK_MSG(hflag == 0, "%s: error flag set on power-of-two input", what);
    cudaFree(flag);
    cudaFree(o.base);
    cudaFree(d_ends);
    free(cpu);
}

TEST(sf_gpu_pack_matches_cpu) {
    REQUIRE_GPU();
    hfp4_rng r = hfp4_rng_make(12);
    static const int64_t ks[] = {1, 2, 4, 5, 8, 9, 33, 57, 128};
    int cases = 0;
    for (int mi = 0; mi < N_MN; mi++)
        for (int ki = 0; ki < 9; ki++)
            for (int32_t g = 0; g <= 2; g += 2)
                for (int kind = 0; kind < L_COUNT; kind++) {
                    if (hfp4_test_failed()) return;
                    int mis = (mi + ki + kind) % 4 == 0;
                    dual_tensor t = make_dual(HFP4_DTYPE_FP32, g, mn_list[mi], ks[ki], kind, &r, 1, mis);
                    pack_case(&t, mn_list[mi], 1, NULL, 0, 0, (mi + ki) % 3 == 0, "pack");
                    free_dual(&t);
                    cases++;
                }
    /* row broadcast (gran_mn > 1), as the SM100 branch does for 128x128 block scales */
    static const int32_t grans[] = {2, 3, 128};
    for (int gi = 0; gi < 3; gi++)
        for (int mi = 0; mi < N_MN; mi++) {
            if (hfp4_test_failed()) return;
            dual_tensor t = make_dual(HFP4_DTYPE_FP32, mi % 3, cdiv(mn_list[mi], grans[gi]), 1 + mi % 9, mi % L_COUNT,
                                      &r, 1, 0);
            pack_case(&t, mn_list[mi], grans[gi], NULL, 0, 0, 0, "pack broadcast");
            free_dual(&t);
            cases++;
        }
    printf("    %d cases\n", cases);
}

TEST(sf_gpu_pack_psum_matches_cpu) {
    REQUIRE_GPU();
    hfp4_rng r = hfp4_rng_make(13);
    for (int trial = 0; trial < 200; trial++) {
        if (hfp4_test_failed()) return;
        int32_t ngroups = 1 + (int32_t)(hfp4_rng_next(&r) % 40);
        int32_t alignment = trial % 4 == 0 ? 0 : (int32_t)(4 << (hfp4_rng_next(&r) % 6));
        int32_t a = alignment ? alignment : 128;
        int32_t *ends = (int32_t *)malloc((size_t)ngroups * 4);
        int64_t cur = 0;
        for (int32_t g = 0; g < ngroups; g++) {
            int64_t start = g == 0 ? 0 : cdiv(cur, a) * a;
            int64_t len = (int64_t)(hfp4_rng_next(&r) % 300);
            if (g > 0 && hfp4_rng_next(&r) % 5 == 0) start = cur, len = 0;
            cur = start + len;
            ends[g] = (int32_t)cur;
        }
        int64_t mn = cur + (int64_t)(hfp4_rng_next(&r) % 200) + 1;
        int64_t sf_k = 1 + (int64_t)(hfp4_rng_next(&r) % 60);
        dual_tensor t = make_dual(HFP4_DTYPE_FP32, trial % 2, mn, sf_k, trial % L_COUNT, &r, 1, trial % 7 == 0);
        pack_case(&t, mn, 1, ends, ngroups, alignment, trial % 5 == 0, "pack psum");
        free_dual(&t);
        free(ends);
    }
}

TEST(sf_gpu_pack_non_power_of_two_sets_flag) {
    REQUIRE_GPU();
    /* variant 0: arbitrary finite positive floats with finite positive specials (subnormals,
     * 2^-127, FLT_MAX): HFP4_SF_ROUND_UP rounds them up, byte for byte as the CPU form, and the
     * flag is set only without it. variant 1: zero, negative, NaN and Inf added: no UE8M0 scale
     * means them, so the CPU form rejects them with the flag or without, and the kernel sets the
     * flag in both cases (with the flag these used to pass as 2^-126 / 2^127) */
    for (int variant = 0; variant <= 1; variant++) {
        hfp4_rng r = hfp4_rng_make(14);
        dual_tensor t = make_dual(HFP4_DTYPE_FP32, 3, 301, 37, L_KMAJOR, &r, 0, 0);
        static const uint32_t positive[] = {0x00200000u, 0x00400000u, 0x7F7FFFFFu, 0x3F800001u};
        static const uint32_t invalid[] = {0x00000000u, 0x80000000u, 0xBF800000u, 0x7FC00000u, 0x7F800000u};
        int64_t words = 3 * 301 * 37;
        for (int64_t i = 0; i < words; i++) {
            uint32_t v = t.hbuf[i] & 0x7FFFFFFFu;
            if ((v >> 23) == 255 || (v >> 23) == 0) v = 0x3E99999Au; /* keep most values ordinary */
            const int64_t j = i % 97;
            t.hbuf[i] = j < 4 ? positive[j] : variant == 1 && j < 9 ? invalid[j - 4] : v;
        }
        CUDA_OK(cudaMemcpy(t.dbuf, t.hbuf, (size_t)words * 4, cudaMemcpyHostToDevice));
        hfp4_sf_tensor cd, gd;
        size_t bytes;
        CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query(&t.host, 301, 1, NULL, &cd, &bytes),
                     HFP4_OK);
        void *cpu = malloc(bytes);
        hfp4_sf_options up = {HFP4_SF_ROUND_UP, 0, NULL};
        if (variant == 0) {
            CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&t.host, 301, 1, NULL, NULL, cpu, bytes, &cd),
                         HFP4_ERR_INVALID_ARGUMENT, "not a power of two");
            CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&t.host, 301, 1, NULL, &up, cpu, bytes, &cd),
                         HFP4_OK);
        } else {
            CHECK_REJECT(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor(&t.host, 301, 1, NULL, &up, cpu, bytes, &cd),
                         HFP4_ERR_INVALID_ARGUMENT, "is not a finite positive value");
        }
        int32_t *flag;
        CUDA_OK(cudaMalloc(&flag, 4));
        for (int round_up = 0; round_up <= 1; round_up++) {
            CUDA_OK(cudaMemset(flag, 0, 4));
            hfp4_sf_options opts = {round_up ? HFP4_SF_ROUND_UP : 0u, 0, flag};
            dev_out o = make_out(bytes, 0);
            CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_gpu(&t.dev, 301, 1, NULL, &opts, o.ptr,
                                                                                  bytes, &gd, NULL),
                         HFP4_OK);
            if (variant == 0) same_as_cpu(o, cpu, round_up ? "pack round-up" : "pack without round-up");
            int32_t hflag = -1;
            CUDA_OK(cudaMemcpy(&hflag, flag, 4, cudaMemcpyDeviceToHost));
            const int want = variant == 1 || !round_up;
            CHECK_MSG(hflag == want, "variant %d: error flag = %d with round_up = %d", variant, (int)hflag, round_up);
            cudaFree(o.base);
        }
        cudaFree(flag);
        free(cpu);
        free_dual(&t);
    }
}

TEST(sf_gpu_k_grouped_matches_cpu) {
    REQUIRE_GPU();
    hfp4_rng r = hfp4_rng_make(15);
    for (int trial = 0; trial < 240; trial++) {
        if (hfp4_test_failed()) return;
        int32_t groups = 1 + (int32_t)(hfp4_rng_next(&r) % (trial % 8 == 0 ? 130 : 9));
        int32_t gran_k = trial % 2 ? 32 : 128;
        int use_psum = trial % 3 == 2, with_ks = !use_psum || trial % 2;
        static const int32_t alignments[] = {32, 128, 160, 224};
        int32_t k_alignment = use_psum ? alignments[(trial / 3) % 4] : gran_k;
        int32_t *ks = (int32_t *)malloc((size_t)groups * 4), *layout = (int32_t *)malloc((size_t)groups * 4);
        int64_t sf_k = 0, end = 0;
        for (int32_t g = 0; g < groups; g++) {
            int64_t k = (int64_t)(hfp4_rng_next(&r) % 9) * gran_k + (int64_t)(hfp4_rng_next(&r) % 3) * 17;
            if (hfp4_rng_next(&r) % 6 == 0) k = 0;
            ks[g] = (int32_t)k;
            sf_k += cdiv(k, gran_k);
            if (use_psum) {
                int64_t start = g == 0 ? 0 : cdiv(end, k_alignment) * k_alignment;
                if (k == 0) start = end;
                end = start + k;
                layout[g] = (int32_t)end;
            } else {
                layout[g] = (int32_t)k;
            }
        }
        int64_t mn = 4 * (1 + (int64_t)(hfp4_rng_next(&r) % (trial % 5 == 0 ? 1200 : 40)));
        dual_tensor t = make_dual(HFP4_DTYPE_FP32, 0, mn, sf_k + (use_psum ? trial % 3 : 0),
                                  trial % 4 == 0 ? L_KMAJOR : L_MNMAJOR, &r, 1, trial % 6 == 0);
        int32_t *d_layout;
        CUDA_OK(cudaMalloc(&d_layout, (size_t)groups * 4));
        CUDA_OK(cudaMemcpy(d_layout, layout, (size_t)groups * 4, cudaMemcpyHostToDevice));
        hfp4_sf_k_groups hkg = {layout, groups, with_ks ? ks : NULL, gran_k, k_alignment, use_psum}, dkg = hkg;
        dkg.layout = d_layout;
        hfp4_sf_tensor cd, gd;
        size_t bytes;
        CHECK_STATUS(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_query(&t.host, &hkg, &cd, &bytes),
                     HFP4_OK);
        void *cpu = malloc(bytes + 4);
        CHECK_STATUS(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(&t.host, &hkg, NULL, cpu, bytes, &cd),
                     HFP4_OK);
        dev_out o = make_out(bytes, trial % 7 == 0);
        CHECK_STATUS(hfp4_sf_get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor_gpu(&t.dev, &dkg, NULL, o.ptr, bytes,
                                                                                        &gd, NULL),
                     HFP4_OK);
        if (bytes > 0) {
            CHECK(same_desc(&gd, &cd));
            same_as_cpu(o, cpu, "k-grouped");
        }
        cudaFree(o.base);
        cudaFree(d_layout);
        free(cpu);
        free(ks);
        free(layout);
        free_dual(&t);
    }
}

TEST(sf_gpu_utccp_matches_cpu) {
    REQUIRE_GPU();
    hfp4_rng r = hfp4_rng_make(16);
    for (int32_t g = 0; g <= 3; g += 3)
        for (int64_t mn = 128; mn <= 640; mn += 256)
            for (int64_t p = 1; p <= 33; p += 8)
                for (int kind = 0; kind < L_COUNT; kind++) {
                    dual_tensor t = make_dual(HFP4_DTYPE_INT32, g, mn, p, kind, &r, 0, kind == L_PADDED);
                    hfp4_sf_tensor cd, gd;
                    size_t bytes;
                    CHECK_STATUS(hfp4_sf_transpose_for_utccp_query(&t.host, &cd, &bytes), HFP4_OK);
                    void *cpu = malloc(bytes);
                    CHECK_STATUS(hfp4_sf_transpose_for_utccp(&t.host, NULL, cpu, bytes, &cd), HFP4_OK);
                    dev_out o = make_out(bytes, kind == L_MNMAJOR);
                    CHECK_STATUS(hfp4_sf_transpose_for_utccp_gpu(&t.dev, NULL, o.ptr, bytes, &gd, NULL), HFP4_OK);
                    CHECK(same_desc(&gd, &cd));
                    same_as_cpu(o, cpu, "utccp");
                    cudaFree(o.base);
                    free(cpu);
                    free_dual(&t);
                }
}

/* ---- transforms ------------------------------------------------------------------------------ */

TEST(sf_gpu_transform_branches_match_cpu) {
    REQUIRE_GPU();
    hfp4_rng r = hfp4_rng_make(17);
    struct tcase {
        int32_t arch, fp32, gran_mn, gran_k, disable, groups;
        int64_t mn, k;
    } cases[] = {
        {90, 1, 1, 128, 1, 0, 4096, 7168},  /* SM90 FP8 per-token A */
        {90, 1, 1, 32, 1, 4, 4097, 7296},   /* SM90 FP4 B, (1, 32) */
        {90, 1, 1, 32, 0, 0, 255, 2112},
        {90, 0, 1, 32, 0, 2, 130, 4096},    /* SM90 pre-packed int32 */
        {90, 0, 1, 128, 0, 0, 33, 7168},
        {100, 1, 1, 32, 0, 8, 1000, 4096},  /* SM100 FP4 B -> packed */
        {100, 1, 128, 128, 0, 2, 513, 7168}, /* block scales broadcast and packed */
        {100, 1, 1, 128, 1, 0, 96, 1024},   /* disable: FP32 MN-major */
        {120, 1, 1, 32, 0, 4, 128, 256},    /* DeepGEMM PR #403 */
        {121, 1, 1, 128, 0, 0, 4097, 7168},
        {120, 1, 128, 32, 0, 0, 300, 1024},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const tcase &c = cases[i];
        int64_t rows = cdiv(c.mn, c.gran_mn), sf_k = cdiv(c.k, c.gran_k * (c.fp32 ? 1 : 4));
        dual_tensor t = make_dual(c.fp32 ? HFP4_DTYPE_FP32 : HFP4_DTYPE_INT32, c.groups, rows, sf_k,
                                  i % 2 ? L_KMAJOR : L_MNMAJOR, &r, c.fp32, 0);
        hfp4_sf_transform_request req;
        memset(&req, 0, sizeof req);
        req.sf = &t.host;
        req.mn = c.mn;
        req.k = c.k;
        req.recipe = hfp4_sf_recipe2(c.gran_mn, c.gran_k);
        req.num_groups = c.groups;
        req.disable_ue8m0_cast = c.disable;
        req.arch = c.arch;
        hfp4_sf_tensor cd, gd;
        size_t bytes;
        CHECK_STATUS(hfp4_sf_transform_into_required_layout_query(&req, &cd, &bytes), HFP4_OK);
        void *cpu = malloc(bytes + 4);
        CHECK_STATUS(hfp4_sf_transform_into_required_layout(&req, NULL, cpu, bytes, &cd), HFP4_OK);
        dev_out o = make_out(bytes, 0);
        req.sf = &t.dev;
        CHECK_STATUS(hfp4_sf_transform_into_required_layout_gpu(&req, NULL, o.ptr, bytes, &gd, NULL), HFP4_OK);
        CHECK(same_desc(&gd, &cd));
        char what[64];
        snprintf(what, sizeof what, "transform case %u", i);
        if (bytes > 0) same_as_cpu(o, cpu, what);
        cudaFree(o.base);
        free(cpu);
        free_dual(&t);
    }
    /* the pair form with DeepGEMM's SM100 FP8 x FP4 recipes; and its UNSUPPORTED answer matches */
    dual_tensor a = make_dual(HFP4_DTYPE_FP32, 0, 300, 56, L_KMAJOR, &r, 1, 0);
    dual_tensor b = make_dual(HFP4_DTYPE_FP32, 4, 512, 224, L_KMAJOR, &r, 1, 0);
    hfp4_sf_pair_request pr;
    memset(&pr, 0, sizeof pr);
    pr.sfa = &a.host;
    pr.sfb = &b.host;
    pr.m = 300;
    pr.n = 512;
    pr.k = 7168;
    pr.recipe_a = hfp4_sf_recipe2(1, 128);
    pr.recipe_b = hfp4_sf_recipe2(1, 32);
    pr.num_groups_b = 4;
    pr.b_dtype = HFP4_DTYPE_FP4_E2M1;
    pr.arch = 100;
    hfp4_sf_pair_result cres, gres;
    CHECK_STATUS(hfp4_sf_transform_pair_into_required_layout_query(&pr, &cres), HFP4_OK);
    void *ca = malloc(cres.sfa_bytes), *cb = malloc(cres.sfb_bytes);
    CHECK_STATUS(hfp4_sf_transform_pair_into_required_layout(&pr, NULL, ca, cres.sfa_bytes, cb, cres.sfb_bytes, &cres),
                 HFP4_OK);
    dev_out oa = make_out(cres.sfa_bytes, 0), ob = make_out(cres.sfb_bytes, 0);
    pr.sfa = &a.dev;
    pr.sfb = &b.dev;
    CHECK_STATUS(hfp4_sf_transform_pair_into_required_layout_gpu(&pr, NULL, oa.ptr, cres.sfa_bytes, ob.ptr,
                                                                 cres.sfb_bytes, &gres, NULL),
                 HFP4_OK);
    CHECK(gres.gran_k_a == 128 && gres.gran_k_b == 32 && same_desc(&gres.sfa, &cres.sfa) &&
          same_desc(&gres.sfb, &cres.sfb));
    same_as_cpu(oa, ca, "pair sfa");
    same_as_cpu(ob, cb, "pair sfb");
    pr.recipe_b = hfp4_sf_recipe2(1, 64);
    b.dev.sf_k = 112;
    CHECK_REJECT(hfp4_sf_transform_pair_into_required_layout_gpu(&pr, NULL, oa.ptr, cres.sfa_bytes, ob.ptr,
                                                                 cres.sfb_bytes, &gres, NULL),
                 HFP4_ERR_UNSUPPORTED, "(sfb): no SF layout for fp32 scales with gran_mn = 1, gran_k = 64 on sm_100");
    cudaFree(oa.base);
    cudaFree(ob.base);
    free(ca);
    free(cb);
    free_dual(&a);
    free_dual(&b);
}

/* ---- bandwidth ------------------------------------------------------------------------------- */

static float time_ms(cudaEvent_t e0, cudaEvent_t e1) {
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    return ms;
}

/* DeepSeek-V4 expert scales: 256 experts x 4096 rows x 128 FP32 K-groups (K = 4096, gran 32),
 * K-major as the quantizer writes them: the SM100/SM120 packing and the SM90 FP32 relayout. */
TEST(sf_gpu_bandwidth_deepseek_v4_expert_scales) {
    REQUIRE_GPU();
    const int32_t groups = 256;
    const int64_t mn = 4096, sf_k = 128, words = groups * mn * sf_k;
    hfp4_rng r = hfp4_rng_make(18);
    uint32_t *h = (uint32_t *)malloc((size_t)words * 4);
    for (int64_t i = 0; i < words; i++) h[i] = rand_pow2_bits(&r);
    void *d_in, *d_copy;
    CUDA_OK(cudaMalloc(&d_in, (size_t)words * 4));
    CUDA_OK(cudaMalloc(&d_copy, (size_t)words * 4));
    CUDA_OK(cudaMemcpy(d_in, h, (size_t)words * 4, cudaMemcpyHostToDevice));
    hfp4_sf_tensor host = {h, HFP4_DTYPE_FP32, groups, mn, sf_k, mn * sf_k, sf_k, 1}, dev = host;
    dev.data = d_in;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    const int iters = 20;

    /* copy bandwidth: read + write of the input's bytes */
    CUDA_OK(cudaMemcpyAsync(d_copy, d_in, (size_t)words * 4, cudaMemcpyDeviceToDevice, 0));
    cudaEventRecord(e0, 0);
    for (int i = 0; i < iters; i++) cudaMemcpyAsync(d_copy, d_in, (size_t)words * 4, cudaMemcpyDeviceToDevice, 0);
    cudaEventRecord(e1, 0);
    CUDA_OK(cudaEventSynchronize(e1));
    double copy_gbs = 2.0 * words * 4 * iters / (time_ms(e0, e1) * 1e-3) / 1e9;
    printf("    device-to-device copy: %.0f GB/s (read + write)\n", copy_gbs);

    for (int arch_i = 0; arch_i < 2; arch_i++) {
        hfp4_sf_transform_request req;
        memset(&req, 0, sizeof req);
        req.sf = &host;
        req.mn = mn;
        req.k = sf_k * 32;
        req.recipe = hfp4_sf_recipe2(1, 32);
        req.num_groups = groups;
        req.arch = arch_i ? 90 : 100;
        hfp4_sf_tensor cd, gd;
        size_t bytes;
        CHECK_STATUS(hfp4_sf_transform_into_required_layout_query(&req, &cd, &bytes), HFP4_OK);
        void *cpu = malloc(bytes);
        CHECK_STATUS(hfp4_sf_transform_into_required_layout(&req, NULL, cpu, bytes, &cd), HFP4_OK);
        dev_out o = make_out(bytes, 0);
        req.sf = &dev;
        CHECK_STATUS(hfp4_sf_transform_into_required_layout_gpu(&req, NULL, o.ptr, bytes, &gd, NULL), HFP4_OK);
        same_as_cpu(o, cpu, arch_i ? "sm_90 relayout (256x4096x128)" : "sm_100 pack (256x4096x128)");
        cudaEventRecord(e0, 0);
        for (int i = 0; i < iters; i++) hfp4_sf_transform_into_required_layout_gpu(&req, NULL, o.ptr, bytes, &gd, NULL);
        cudaEventRecord(e1, 0);
        CUDA_OK(cudaEventSynchronize(e1));
        double ms = time_ms(e0, e1) / iters;
        double gbs = ((double)words * 4 + (double)bytes) / (ms * 1e-3) / 1e9;
        printf("    %s: %.3f ms, %.0f GB/s = %.0f %% of copy\n",
               arch_i ? "sm_90 transpose_fp32 (FP32 MN-major)" : "sm_100 transpose_and_pack_fp32_into_ue8m0",
               ms, gbs, 100.0 * gbs / copy_gbs);
        CHECK_MSG(gbs >= 0.70 * copy_gbs, "%.0f GB/s is below 70 %% of the copy's %.0f GB/s", gbs, copy_gbs);
        cudaFree(o.base);
        free(cpu);
    }
    /* for information: the same bytes read as MN-major scales (DeepGEMM's pre-transposed input) */
    {
        hfp4_sf_tensor mnm = {d_in, HFP4_DTYPE_FP32, groups, mn, sf_k, mn * sf_k, 1, mn};
        hfp4_sf_tensor gd;
        size_t bytes;
        CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_query(&mnm, mn, 1, NULL, &gd, &bytes), HFP4_OK);
        dev_out o = make_out(bytes, 0);
        CHECK_STATUS(hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_gpu(&mnm, mn, 1, NULL, NULL, o.ptr, bytes, &gd,
                                                                              NULL),
                     HFP4_OK);
        cudaEventRecord(e0, 0);
        for (int i = 0; i < iters; i++)
            hfp4_sf_get_mn_major_tma_aligned_packed_ue8m0_tensor_gpu(&mnm, mn, 1, NULL, NULL, o.ptr, bytes, &gd, NULL);
        cudaEventRecord(e1, 0);
        CUDA_OK(cudaEventSynchronize(e1));
        double ms = time_ms(e0, e1) / iters;
        double gbs = ((double)words * 4 + (double)bytes) / (ms * 1e-3) / 1e9;
        printf("    pack of MN-major input: %.3f ms, %.0f GB/s = %.0f %% of copy\n", ms, gbs, 100.0 * gbs / copy_gbs);
        cudaFree(o.base);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(d_in);
    cudaFree(d_copy);
    free(h);
}
