/*
 * bench_experts.cu - m-grouped expert GEMMs of `hfp4 bench`, each launched on its own stream
 * launch (bench_time_launches): for each token count T, T tokens are routed to top-k of E experts
 * uniformly at random, and the GEMM over the routed rows is timed in the masked layout (T <= 256,
 * the decode form, with the expected_m hint), in the contiguous layout (128-row segments) and, from
 * T = 4096, in its prefix-sum form (layout "psum": the same rows, one end row per expert). Decode T
 * (<= 256) also times the contiguous layout with d_padding ANY (layout "contiguous_padany": D's
 * padding rows left unwritten, for callers that drop them; DeepGEMM's ensure_zero_padding=False).
 *
 * With 1 x 128 activation scales it also times the same rows with FP8 weights ([E, N, K] e4m3
 * under 128 x 128 block scales, random: the FP8 x FP8 kernel's grouped forms; op "fp8_fp8"): at
 * T <= 256 masked (DeepGEMM's m_grouped_fp8_gemm_nt_masked) and contiguous with D's padding left
 * alone (what hfp4.experts runs for FP8 checkpoints), contiguous from T = 4096 (DeepGEMM's
 * m_grouped_fp8_gemm_nt_contiguous), where the library runs them (otherwise a note says why not).
 *
 * Each row carries two reference points: "baseline", cuBLASLt FP8 row-wise on one dense GEMM of all
 * routed rows (an upper bound no grouped kernel beats at large T), and "floor_us", the bytes that
 * must move divided by the copy rate measured in the same run (the bound that matters in decode).
 */
#include <stdlib.h>
#include <string.h>

#include "baselines.h"
#include "bench_common.h"

/* Times one layout of one routed case and prints its row; 0, or -1 when the case failed. */
static int expert_case(bench_ctx *c, const bench_expert_case *ec, const bench_weights *w, const bench_routing *r,
                       hfp4_grouping g, int gran, const char *base_name, double base_us,
                       hfp4_d_padding d_padding) {
    const char *layout = g == HFP4_GROUPING_MASKED             ? "masked"
                         : g == HFP4_GROUPING_CONTIGUOUS_PSUM  ? "psum"
                         : d_padding == HFP4_D_PADDING_ANY     ? "contiguous_padany"
                                                               : "contiguous";
    char label[128];
    snprintf(label, sizeof label, "%s %s T=%lld gran_k %d", ec->name, layout, (long long)r->tokens, gran);
    bench_acts x;
    if (bench_acts_alloc(&x, g, r, ec->n, ec->k, gran) != 0) {
        fprintf(stderr, "bench: %s: could not set up the activations\n", label);
        return -1;
    }
    hfp4_gemm_problem p;
    bench_expert_problem(&p, &x, r, &w->b);
    p.d_padding = d_padding;
    double us = 0;
    const int rc = bench_time_gemm(c, &p, label, &us);
    if (rc == 0) {
        const double flops = 2.0 * r->rows * ec->n * ec->k, bytes = bench_expert_bytes(r->hit, r->rows, ec->n, ec->k, gran);
        bench_row row;
        bench_row_experts(&row, layout, ec->name, r, ec->n, ec->k, ec->experts, us, flops, bytes, base_name, base_us,
                          bench_fp8_expert_bytes(r->hit, r->rows, ec->n, ec->k));
        row.gran = gran;
        row.floor_us = bench_floor_us(c, bytes);
        if (g == HFP4_GROUPING_CONTIGUOUS && d_padding == HFP4_D_PADDING_ZERO)
            row.tbps_with_padding = (bytes + bench_padding_bytes(r, ec->n)) / us * 1e-6;
        bench_print_row(c, &row);
    }
    bench_acts_free(&x);
    return rc;
}

/* A section's random FP8 expert weights [E, N, K] and their FP32 128 x 128 block scales: made at the
 * first FP8 case that runs, kept for the section's token counts, freed at its end */
typedef struct fp8_experts {
    void *w, *sf;
} fp8_experts;

static void fp8_experts_free(fp8_experts *fw) {
    if (fw->w) (void)BENCH_CUDA(cudaFree(fw->w));
    if (fw->sf) (void)BENCH_CUDA(cudaFree(fw->sf));
    fw->w = fw->sf = NULL;
}

/* fw made for ec's experts if it is not yet: 0, or -1 (then nothing held) */
static int fp8_experts_make(fp8_experts *fw, const bench_expert_case *ec) {
    if (fw->w) return 0;
    const int64_t n = ec->n, k = ec->k, kg = (k + 127) / 128, nb = (n + 127) / 128, G = ec->experts;
    if (BENCH_CUDA(cudaMalloc(&fw->w, (size_t)G * n * k)) && BENCH_CUDA(cudaMalloc(&fw->sf, (size_t)G * nb * kg * 4)) &&
        bench_fill_random(fw->w, (size_t)G * n * k, 1) == 0 && bench_fill_a_scales(fw->sf, (size_t)G * nb * kg) == 0)
        return 0;
    fp8_experts_free(fw);
    return -1;
}

/* The routed rows with FP8 weights in layout g, masked or contiguous (the FP8 x FP8 kernel's grouped
 * forms): 0, or -1 when the case failed; skipped with a note where the library does not run it */
static int expert_fp8_weights_case(bench_ctx *c, const bench_expert_case *ec, const bench_routing *r, hfp4_grouping g,
                                   hfp4_d_padding d_padding, fp8_experts *fw, const char *base_name, double base_us) {
    const int64_t n = ec->n, k = ec->k, kg = (k + 127) / 128, nb = (n + 127) / 128;
    const char *layout = g == HFP4_GROUPING_MASKED           ? "masked"
                         : d_padding == HFP4_D_PADDING_ANY ? "contiguous_padany"
                                                           : "contiguous";
    char label[128];
    snprintf(label, sizeof label, "%s fp8 weights %s T=%lld", ec->name, layout, (long long)r->tokens);
    bench_acts x;
    if (bench_acts_alloc(&x, g, r, n, k, 128) != 0) {
        fprintf(stderr, "bench: %s: could not set up the activations\n", label);
        return -1;
    }
    hfp4_matrix b;
    memset(&b, 0, sizeof b);
    b.dtype = HFP4_DTYPE_FP8_E4M3;
    b.rows = n;
    b.cols = k;
    b.ld = k;
    b.stride_group = n * k;
    b.scales.dtype = HFP4_DTYPE_FP32;
    b.scales.gran_mn = 128;
    b.scales.gran_k = 128;
    b.scales.stride_mn = kg;
    b.scales.stride_k = 1;
    b.scales.stride_group = nb * kg;
    b.data = b.scales.data = (void *)(uintptr_t)256; /* (a stand-in until the buffers exist) */
    hfp4_gemm_problem p;
    bench_expert_problem(&p, &x, r, &b);
    p.d_padding = d_padding;
    int rc = 0;
    if (hfp4_gemm_supported(&p) != HFP4_OK) {
        if (!c->json) printf("%-10s (%s: skipped: %s)\n", "fp8_fp8", label, hfp4_last_error());
        hfp4_clear_error();
        bench_acts_free(&x);
        return 0;
    }
    if (fp8_experts_make(fw, ec) != 0) {
        rc = -1;
    } else {
        p.b.data = fw->w;
        p.b.scales.data = fw->sf;
        double us = 0;
        rc = bench_time_gemm(c, &p, label, &us);
        if (rc == 0) {
            const double flops = 2.0 * r->rows * n * k, bytes = bench_fp8_expert_bytes(r->hit, r->rows, n, k);
            bench_row row;
            bench_row_experts(&row, layout, ec->name, r, n, k, ec->experts, us, flops, bytes, base_name, base_us, bytes);
            row.op = "fp8_fp8";
            row.gran = 128;
            row.floor_us = bench_floor_us(c, bytes);
            bench_print_row(c, &row);
        }
    }
    bench_acts_free(&x);
    return rc;
}

void bench_experts(bench_ctx *c, const bench_expert_case *ec) {
    bench_weights w;
    int have_w = 0;
    memset(&w, 0, sizeof w);
    fp8_experts fw = {NULL, NULL};
    for (int ti = 0; ti < ec->ntok; ti++) {
        const int64_t T = ec->tokens[ti];
        if (!bench_budget_ok(c, "%s T=%lld", ec->name, (long long)T)) continue;
        if (!have_w) { /* made on the first case that runs, so a spent budget allocates nothing */
            if (bench_make_weights(ec->experts, ec->n, ec->k, &w) != 0) {
                fprintf(stderr, "bench: %s: could not allocate/repack the weights; its cases are skipped\n", ec->name);
                c->failed++;
                return;
            }
            have_w = 1;
        }
        bench_routing r;
        if (bench_route(T, ec->experts, ec->topk, &r) != 0) {
            c->failed++;
            continue;
        }
        /* baseline: cuBLASLt FP8 row-wise on one dense GEMM of all routed rows (an upper bound) */
        double base_us = 0;
        char err[256] = "";
        const char *base_name = "cublaslt_fp8_rowwise";
        if (baseline_cublaslt_fp8_rowwise(r.rows, ec->n, ec->k, c->iters, &base_us, err, sizeof err) != 0) {
            base_name = "unavailable";
            base_us = 0;
            if (!c->json) fprintf(stderr, "  baseline: %s\n", err);
        }
        const hfp4_d_padding zero = HFP4_D_PADDING_ZERO;
        if (T <= 256 && expert_case(c, ec, &w, &r, HFP4_GROUPING_MASKED, c->gran, base_name, base_us, zero) != 0)
            c->failed++;
        if (expert_case(c, ec, &w, &r, HFP4_GROUPING_CONTIGUOUS, c->gran, base_name, base_us, zero) != 0) c->failed++;
        if (T <= 256 && expert_case(c, ec, &w, &r, HFP4_GROUPING_CONTIGUOUS, c->gran, base_name, base_us,
                                    HFP4_D_PADDING_ANY) != 0)
            c->failed++;
        /* the prefix-sum form of the same rows (DeepGEMM's use_psum_layout), where prefill uses it */
        if (T >= 4096 && expert_case(c, ec, &w, &r, HFP4_GROUPING_CONTIGUOUS_PSUM, c->gran, base_name, base_us, zero) != 0)
            c->failed++;
        /* FP8 weights on the same rows: masked and contiguous (padding left alone) at decode, contiguous
         * at prefill */
        if (c->gran == 128 && T <= 256) {
            if (expert_fp8_weights_case(c, ec, &r, HFP4_GROUPING_MASKED, zero, &fw, base_name, base_us) != 0) c->failed++;
            if (expert_fp8_weights_case(c, ec, &r, HFP4_GROUPING_CONTIGUOUS, HFP4_D_PADDING_ANY, &fw, base_name,
                                        base_us) != 0)
                c->failed++;
        }
        if (c->gran == 128 && T >= 4096 &&
            expert_fp8_weights_case(c, ec, &r, HFP4_GROUPING_CONTIGUOUS, zero, &fw, base_name, base_us) != 0)
            c->failed++;
        /* the other activation-scale granularity on the same routing and weights (1x32 is what
         * transformers passes; 1x128 is DeepGEMM's SM90 recipe) */
        int alt = 0;
        for (int a = 0; a < ec->n_alt_gran; a++) alt |= ec->alt_gran_tokens[a] == T;
        if (alt && expert_case(c, ec, &w, &r, T <= 256 ? HFP4_GROUPING_MASKED : HFP4_GROUPING_CONTIGUOUS,
                               c->gran == 128 ? 32 : 128, base_name, base_us, zero) != 0)
            c->failed++;
        bench_routing_free(&r);
    }
    if (have_w) bench_free_weights(&w);
    fp8_experts_free(&fw);
}
