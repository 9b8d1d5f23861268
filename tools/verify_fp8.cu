/*
 * verify_fp8.cu - `hfp4 verify`'s checks of the GEMMs for FP8 weights (128 x 128 block scales): V4's
 * dense FP8 layers at decode (the few-row kernel) and prefill (the tile kernel), and FP8 expert
 * checkpoints in DeepGEMM's m-grouped contiguous layout at decode and prefill. Each on fresh random
 * operands quantized by the library's own casts, D poisoned first, every element against the CPU
 * reference (hfp4_ref_gemm) within the bound the GPU tests use (tests/gpu/fp8_weights_bound.h),
 * padding rows of the grouped layout exactly +0. (The tests cover the layouts and forms at length; these are the
 * shapes a V4 user meets, checked on the machine at hand.)
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/gpu/fp8_weights_bound.h"
#include "hfp4.h"
#include "tool_common.h"

typedef struct vf_case {
    const char *label;
    int64_t m, n, k;  /* dense: m rows; grouped: rows_each real rows for each of groups experts */
    int32_t groups;   /* 0: dense */
    int32_t rows_each;
    int ue8m0_weights; /* weight block scales UE8M0 (else FP32) */
} vf_case;

/* a normal deviate from a 64-bit LCG (Box-Muller; deterministic per seed) */
static double vf_normal(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    const double u1 = ((*s >> 11) + 1.0) / 9007199254740994.0;
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    const double u2 = (*s >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#define VF_TRY(call)                                                                                                  \
    do {                                                                                                              \
        if ((call) != HFP4_OK) {                                                                                      \
            printf("    %s: %s\n", #call, hfp4_last_error());                                                         \
            goto done;                                                                                                \
        }                                                                                                             \
    } while (0)
#define VF_CUDA(call)                                                                                                 \
    do {                                                                                                              \
        cudaError_t e_ = (call);                                                                                      \
        if (e_ != cudaSuccess) {                                                                                      \
            printf("    %s: %s\n", #call, cudaGetErrorString(e_));                                                    \
            goto done;                                                                                                \
        }                                                                                                             \
    } while (0)

/* Runs one case; 1 when it passed */
static int vf_run(const vf_case *c, uint64_t seed) {
    const int grouped = c->groups > 0;
    const int32_t G = grouped ? c->groups : 1;
    const int64_t n = c->n, k = c->k, kg = k / 128, nb = (n + 127) / 128;
    const int64_t seg = grouped ? (c->rows_each + 127) / 128 * 128 : 0, m = grouped ? G * seg : c->m;
    int ok = 0, printed = 0;
    float *x = NULL, *w = NULL, *sa = NULL, *ref = NULL, *l1 = NULL;
    uint8_t *qa = NULL, *qb = NULL;
    void *sb = NULL;
    int32_t *layout = NULL;
    uint16_t *out = NULL;
    void *da = NULL, *db = NULL, *dsa = NULL, *dsb = NULL, *dd = NULL, *dl = NULL;
    const int sb_esz = c->ue8m0_weights ? 1 : 4;
    x = (float *)calloc((size_t)(m * k), sizeof(float));
    w = (float *)malloc(sizeof(float) * G * n * k);
    qa = (uint8_t *)malloc(m * k);
    qb = (uint8_t *)malloc(G * n * k);
    sa = (float *)malloc(sizeof(float) * m * kg);
    sb = malloc(sb_esz * G * nb * kg);
    layout = grouped ? (int32_t *)malloc(sizeof(int32_t) * m) : NULL;
    ref = (float *)calloc((size_t)(m * n), sizeof(float));
    l1 = (float *)calloc((size_t)(m * n), sizeof(float));
    out = (uint16_t *)malloc(2 * m * n);
    if (!x || !w || !qa || !qb || !sa || !sb || (grouped && !layout) || !ref || !l1 || !out) {
        printf("    out of host memory\n");
        goto done;
    }
    {
        /* A: the real rows random (a grouped layout's padding rows stay zero), per-token FP8, 1 x 128 FP32 scales */
        for (int64_t r = 0; r < m; r++) {
            const int real = !grouped || r % seg < c->rows_each;
            if (grouped) layout[r] = real ? (int32_t)(r / seg) : -1;
            if (real)
                for (int64_t j = 0; j < k; j++) x[r * k + j] = (float)(vf_normal(&seed) * (1.0 + r % 7));
        }
        for (int64_t i = 0; i < G * n * k; i++) w[i] = (float)(vf_normal(&seed) * 0.05 * (1.0 + (i / k) % 5));
        hfp4_scales sfa;
        memset(&sfa, 0, sizeof sfa);
        sfa.data = sa;
        sfa.dtype = HFP4_DTYPE_FP32;
        sfa.gran_mn = 1;
        sfa.gran_k = 128;
        sfa.stride_mn = kg;
        sfa.stride_k = 1;
        VF_TRY(hfp4_quantize_fp8_per_token(x, HFP4_DTYPE_FP32, m, k, k, 0, qa, k, &sfa));
        hfp4_scales sfb;
        memset(&sfb, 0, sizeof sfb);
        sfb.dtype = c->ue8m0_weights ? HFP4_DTYPE_UE8M0 : HFP4_DTYPE_FP32;
        sfb.gran_mn = 128;
        sfb.gran_k = 128;
        sfb.stride_mn = kg;
        sfb.stride_k = 1;
        for (int32_t e = 0; e < G; e++) {
            sfb.data = (uint8_t *)sb + (size_t)e * nb * kg * sb_esz;
            VF_TRY(hfp4_quantize_fp8_per_block(w + (size_t)e * n * k, HFP4_DTYPE_FP32, n, k, k, c->ue8m0_weights,
                                               qb + (size_t)e * n * k, k, &sfb));
        }
        sfb.data = sb;
        sfb.stride_group = grouped ? nb * kg : 0;
        hfp4_gemm_problem p;
        memset(&p, 0, sizeof p);
        p.grouping = grouped ? HFP4_GROUPING_CONTIGUOUS : HFP4_GROUPING_NONE;
        p.m = m;
        p.n = n;
        p.k = k;
        p.num_groups = G;
        p.layout = layout;
        p.d_padding = HFP4_D_PADDING_ZERO;
        p.a.dtype = HFP4_DTYPE_FP8_E4M3;
        p.a.rows = m;
        p.a.cols = k;
        p.a.ld = k;
        p.a.scales = sfa;
        p.b.dtype = HFP4_DTYPE_FP8_E4M3;
        p.b.rows = n;
        p.b.cols = k;
        p.b.ld = k;
        p.b.stride_group = grouped ? n * k : 0;
        p.b.scales = sfb;
        p.d.dtype = HFP4_DTYPE_FP32;
        p.d.ld = n;
        /* the reference, and the bound's sum |a b| */
        p.a.data = qa;
        p.b.data = qb;
        p.d.data = ref;
        VF_TRY(hfp4_ref_gemm(&p, 0));
        VF_TRY(fw_abs_products(&p, m * k, G * n * k, l1));
        /* the device run: BF16 D, poisoned (0xFF: NaN) */
        VF_CUDA(cudaMalloc(&da, m * k));
        VF_CUDA(cudaMalloc(&db, G * n * k));
        VF_CUDA(cudaMalloc(&dsa, sizeof(float) * m * kg));
        VF_CUDA(cudaMalloc(&dsb, sb_esz * G * nb * kg));
        VF_CUDA(cudaMalloc(&dd, 2 * m * n));
        VF_CUDA(cudaMemcpy(da, qa, m * k, cudaMemcpyHostToDevice));
        VF_CUDA(cudaMemcpy(db, qb, G * n * k, cudaMemcpyHostToDevice));
        VF_CUDA(cudaMemcpy(dsa, sa, sizeof(float) * m * kg, cudaMemcpyHostToDevice));
        VF_CUDA(cudaMemcpy(dsb, sb, sb_esz * G * nb * kg, cudaMemcpyHostToDevice));
        VF_CUDA(cudaMemset(dd, 0xFF, 2 * m * n));
        if (grouped) {
            VF_CUDA(cudaMalloc(&dl, sizeof(int32_t) * m));
            VF_CUDA(cudaMemcpy(dl, layout, sizeof(int32_t) * m, cudaMemcpyHostToDevice));
        }
        p.layout = (const int32_t *)dl;
        p.a.data = da;
        p.a.scales.data = dsa;
        p.b.data = db;
        p.b.scales.data = dsb;
        p.d.data = dd;
        p.d.dtype = HFP4_DTYPE_BF16;
        VF_TRY(hfp4_gemm(&p, NULL));
        VF_CUDA(cudaDeviceSynchronize());
        VF_CUDA(cudaMemcpy(out, dd, 2 * m * n, cudaMemcpyDeviceToHost));
        /* every element */
        double ss = 0.0, es = 0.0;
        for (int64_t i = 0; i < m * n; i++) ss += (double)ref[i] * ref[i];
        const double rms = sqrt(ss / (double)(m * n));
        int64_t bad = 0;
        for (int64_t i = 0; i < m * n; i++) {
            const double got = hfp4_bf16_decode(out[i]);
            if (grouped && layout[i / n] < 0) { /* a padding row: +0 exactly */
                bad += !(got == 0.0 && !signbit(got));
                continue;
            }
            const double err = fabs(got - ref[i]);
            es += err * err;
            bad += !fw_within_bound(got, ref[i], l1[i], rms, 2);
        }
        const double rel = ss > 0 ? sqrt(es / ss) : 0.0;
        ok = bad == 0 && rel <= 2e-3;
        printed = 1;
        printf("  %-48s rel. error %.2e, bad elements %lld -> %s\n", c->label, rel, (long long)bad, ok ? "ok" : "FAIL");
    }
done:
    if (!printed) printf("  %-48s -> FAIL\n", c->label);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dsa);
    cudaFree(dsb);
    cudaFree(dd);
    cudaFree(dl);
    free(x);
    free(w);
    free(qa);
    free(qb);
    free(sa);
    free(sb);
    free(layout);
    free(ref);
    free(l1);
    free(out);
    return ok;
}

extern "C" int hfp4_verify_fp8_weights(void) {
    static const vf_case cases[] = {
        {"V4 dense FP8 layer, decode (1 x 7168 x 2048)", 1, 7168, 2048, 0, 0, 1},
        {"V4 dense FP8 layer, 8 tokens (8 x 4096 x 4096)", 8, 4096, 4096, 0, 0, 0},
        {"V4 dense FP8 layer, prefill (256 x 7168 x 2048)", 256, 7168, 2048, 0, 0, 1},
        {"FP8 experts, decode (contiguous, 8 x 3 rows)", 0, 4096, 2048, 8, 3, 1},
        {"FP8 experts, prefill (contiguous, 8 x 200 rows)", 0, 2048, 2048, 8, 200, 0},
    };
    int failures = 0;
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) failures += !vf_run(&cases[i], 7000 + i);
    return failures;
}
