/*
 * bench_experts.cu - m-grouped expert GEMMs of `hfp4 bench`, each launched on its own stream
 * launch (bench_time_launches): for each token count T, T tokens are routed to top-k of E experts
 * uniformly at random, and the GEMM over the routed rows is timed in the masked layout (T <= 256,
 * the decode form, with the expected_m hint), in the contiguous layout (128-row segments) and, from
 * T = 4096, in its prefix-sum form (layout "psum": the same rows, one end row per expert). Decode T
 * (<= 256) also times the contiguous layout with d_padding ANY (layout "contiguous_padany": D's
 * padding rows left unwritten, for callers that drop them; DeepGEMM's ensure_zero_padding=False).
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

void bench_experts(bench_ctx *c, const bench_expert_case *ec) {
    bench_weights w;
    int have_w = 0;
    memset(&w, 0, sizeof w);
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
}
