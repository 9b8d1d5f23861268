/*
 * bench_graph.cu - one MoE layer's two expert GEMMs (w13, then w2 on the same routing) as CUDA-graph
 * replays, the way a decode step runs them, so that launch overhead and tails show.
 *
 * For each decode T (<= 256) and each layout (masked, contiguous, and contiguous with d_padding ANY:
 * D's padding rows left unwritten) it prints three rows, layout "masked_graph" / "contiguous_graph" /
 * "contiguous_padany_graph": PREFIX-w13 and PREFIX-w2 (a graph of that GEMM alone) and
 * PREFIX-layer (one graph of w13 then w2; its n and k are w13's, its FLOPs, bytes, floor and
 * baseline are the sums over both GEMMs), then the rows KINDS below lists (the early start, the
 * SwiGLU glue between the GEMMs, two layers). Each row also carries "stream_us" (the same GEMM(s)
 * launched on a stream and timed as the standalone rows are, summed for the layer), "launch_us"
 * (the replay time of a graph of as many empty kernels) and "flush" (how L2 was emptied).
 *
 * The two GEMMs do not feed each other (no SwiGLU or re-quantization between them) except in the
 * layer_glue rows: the layer row is the GEMMs' share of a layer. L2 between replays: two copies of the weights are made when
 * device memory allows, and replays alternate between them ("alternate_weights") when the weights
 * one replay reads are at least twice the L2 size, so a replay finds none of its weights in L2;
 * otherwise (T = 1 reads only a few experts) L2 is emptied before each replay, outside the timed
 * interval, by reading a 256 MB buffer ("read") or, with --l2-flush write, by a memset ("memset").
 * Activations and outputs are shared by both copies.
 * Where the flush separates the replays and there are two sets, each row is followed by a
 * "warm_start" line: the same graph timed after the flush and an untimed replay of it over the other
 * weight set. NOTE: why: the flush also empties L2 of the kernel's code, masked_m, the activations
 * and the descriptors, which in a decode step the previous layer's GEMM (the same kernel over other
 * weights) and the router and quantizer just before leave in L2; at T = 1 that start-up is a large
 * part of the row. The row itself stays the stricter measure.
 * After the masked layout's three rows, a "stream_floor" line each (bench_stream_floor.cu): the same
 * graph with kernels that only read the hit experts' weights and scales, the floor of these rows.
 */
#include <stdlib.h>
#include <string.h>

#include "baselines.h"
#include "bench_common.h"

typedef struct graph_kind {
    char name[48];
    int64_t n, k;
    double flops, bytes, fp8_bytes, weight_bytes;
    double pad_bytes; /* D's padding rows (contiguous layout: bench_padding_bytes) */
    double base_us; /* 0: unavailable */
    double stream_us;
    cudaGraphExec_t exec[2];
    size_t kernels;
} graph_kind;

static void set_kind(graph_kind *g, const char *prefix, const char *suffix, const bench_routing *r, int64_t n, int64_t k,
                     int gran, double base_us) {
    snprintf(g->name, sizeof g->name, "%s-%s", prefix, suffix);
    g->n = n;
    g->k = k;
    g->flops = 2.0 * r->rows * n * k;
    g->bytes = bench_expert_bytes(r->hit, r->rows, n, k, gran);
    g->fp8_bytes = bench_fp8_expert_bytes(r->hit, r->rows, n, k);
    g->weight_bytes = r->hit * n * (k / 2.0 + k / 32.0);
    g->pad_bytes = bench_padding_bytes(r, n);
    g->base_us = base_us;
}

/* A warm start's line: the row's GEMMs replayed after the flush and an untimed replay of the same
 * graph over the other weight set, so that the timed replay finds its weights in DRAM and its code,
 * masked_m, activations and descriptors where a decode step's previous layer leaves them. */
static void print_warm_start(const bench_ctx *c, const char *layout, const char *name, int64_t tokens, double us,
                             double bytes, double cold_us) {
    if (c->json)
        printf("{\"op\": \"warm_start\", \"layout\": \"%s\", \"name\": \"%s\", \"tokens\": %lld, \"us\": %.2f, "
               "\"tbps\": %.3f, \"cold_us\": %.2f}\n",
               layout, name, (long long)tokens, us, bytes / us * 1e-6, cold_us);
    else
        printf("%-12s %-8s %s T=%lld: weights cold, the rest as the other weight set's replay left it: %6.2f us = "
               "%.3f TB/s (L2 emptied: %.2f us)\n",
               "warm_start", layout, name, (long long)tokens, us, bytes / us * 1e-6, cold_us);
    fflush(stdout);
}

/* The graph rows of a layout (kind index: what its graph launches):
 *   w13, w2, layer    each GEMM alone, then w13 and w2 in one graph;
 *   layer_overlap     the same with both under HFP4_GEMM_OVERLAP_PREVIOUS (w2's start-up and first
 *                     weights under w13's tail; w13's flag is true of the flush before it, and puts
 *                     both on the same kernel, whose code then serves an SM's CTAs of both);
 *   layer_glue(_overlap)  w13, the SwiGLU glue (hfp4_moe_swiglu_quantize_rows_gpu: w13's D becomes
 *                     w2's A, as in a model's layer), w2; plain, or with both GEMMs flagged (the
 *                     glue is a plain launch, so w2's flag has nothing to overlap: the row shows
 *                     it; the glue under PDL lost 2-6 %, bench/RESULTS.md v34); only where w13's N
 *                     is 2 x w2's K and w2's activation scales are FP32 K-major (the glue's output);
 *   layers2(_overlap) two layers, the second on the other weight set (a decode step's graph holds
 *                     many), plain or every GEMM flagged; only with two weight sets;
 *   layers8_overlap   eight layers, the weight sets taking turns, every GEMM flagged: what a layer
 *                     costs inside a decode step's graph, where the graph's launch is paid once and
 *                     each GEMM starts under the one before; one graph replayed back to back, so
 *                     the sets alternate across replays too (the set a layer reads was last read
 *                     two layers before, with the other set's ~78 MB at V4-Flash T = 1 streamed
 *                     between: more than L2 holds).
 * The layer rows count both GEMMs' bytes and FLOPs (not the glue's), the two-layer rows both layers'. */
enum { K_W13, K_W2, K_LAYER, K_LAYER_OVL, K_GLUE, K_GLUE_OVL, K_LAYERS2, K_LAYERS2_OVL, K_LAYERS8_OVL, KINDS };
static const char *const kind_suffix[KINDS] = {"w13",     "w2",         "layer",           "layer_overlap",
                                               "layer_glue", "layer_glue_overlap", "layers2", "layers2_overlap",
                                               "layers8_overlap"};
/* layers a kind's graph holds */
static int kind_layers(int i) { return i == K_LAYERS8_OVL ? 8 : i >= K_LAYERS2 ? 2 : 1; }

/* One launch of a graph: a GEMM (bench_launch_gemm) or the glue */
typedef struct graph_step {
    bench_launch_fn fn;
    void *arg;
} graph_step;
static int launch_step(void *arg, cudaStream_t s) {
    const graph_step *st = (const graph_step *)arg;
    return st->fn(st->arg, s);
}

/* The SwiGLU glue between a layer's GEMMs: w13's D (2n columns: gate, up stacked) -> w2's A and scales */
typedef struct glue_launch {
    const void *y;
    int64_t n, routed, layout_rows;
    const int32_t *pos;
    int gran;
    uint8_t *a;
    float *sf;
} glue_launch;
static int launch_glue(void *arg, cudaStream_t s) {
    const glue_launch *g = (const glue_launch *)arg;
    if (hfp4_moe_swiglu_quantize_rows_gpu(g->y, 2 * g->n, g->n, HFP4_GATE_UP_STACKED, 10.0f, g->pos, g->routed, g->gran,
                                          g->a, g->n, g->sf, g->layout_rows, (hfp4_stream)s) == HFP4_OK)
        return 0;
    fprintf(stderr, "bench: the SwiGLU glue: %s\n", hfp4_last_error());
    return -1;
}

/* Each routed row's place in the layout (bench_acts_alloc's): masked, expert e's rows from e x m;
 * contiguous, from its 128-aligned segment's start. Device memory of r->rows entries, or NULL. */
static int32_t *routed_row_places(const bench_routing *r, const bench_acts *x) {
    int32_t *h = (int32_t *)malloc(sizeof(int32_t) * (size_t)r->rows), *d = NULL;
    if (!h) return NULL;
    int64_t i = 0, row = 0;
    for (int e = 0; e < r->experts; e++) {
        const int64_t base = x->grouping == HFP4_GROUPING_MASKED ? (int64_t)e * x->m : row;
        for (int64_t j = 0; j < r->counts[e] && i < r->rows; j++) h[i++] = (int32_t)(base + j);
        row += (r->counts[e] + 127) / 128 * 128;
    }
    if (i == r->rows && BENCH_CUDA(cudaMalloc(&d, sizeof(int32_t) * (size_t)r->rows)) &&
        !BENCH_CUDA(cudaMemcpy(d, h, sizeof(int32_t) * (size_t)r->rows, cudaMemcpyHostToDevice))) {
        (void)BENCH_CUDA(cudaFree(d));
        d = NULL;
    }
    free(h);
    return i == r->rows ? d : NULL;
}

static int layer_case(bench_ctx *c, const bench_moe_model *m, const bench_weights *w13, const bench_weights *w2,
                      int nsets, const bench_routing *r, hfp4_grouping g, double base13, double base2,
                      hfp4_d_padding d_padding) {
    const char *layout = g == HFP4_GROUPING_MASKED           ? "masked_graph"
                         : d_padding == HFP4_D_PADDING_ANY   ? "contiguous_padany_graph"
                                                             : "contiguous_graph";
    bench_acts x13, x2;
    hfp4_gemm_problem p13[2], p2[2];
    bench_gemm_launch l13[2], l2[2], o13[2], o2[2]; /* o: with HFP4_GEMM_OVERLAP_PREVIOUS */
    glue_launch glue;
    int32_t *pos = NULL;
    graph_kind kind[KINDS];
    double kind_us[KINDS] = {0};      /* the graph rows' times */
    double kind_warm_us[KINDS] = {0}; /* and their warm starts' (0: not timed) */
    int have[KINDS];                  /* the kinds this case times */
    char lab13[128], lab2[128];
    int rc = -1;
    memset(&x13, 0, sizeof x13);
    memset(&x2, 0, sizeof x2);
    memset(kind, 0, sizeof kind);
    set_kind(&kind[K_W13], m->prefix, "w13", r, m->n13, m->k13, c->gran, base13);
    set_kind(&kind[K_W2], m->prefix, "w2", r, m->n2, m->k2, c->gran, base2);
    set_kind(&kind[K_LAYER], m->prefix, "layer", r, m->n13, m->k13, c->gran, base13 > 0 && base2 > 0 ? base13 + base2 : 0);
    kind[K_LAYER].flops += kind[K_W2].flops;
    kind[K_LAYER].bytes += kind[K_W2].bytes;
    kind[K_LAYER].fp8_bytes += kind[K_W2].fp8_bytes;
    kind[K_LAYER].weight_bytes += kind[K_W2].weight_bytes;
    kind[K_LAYER].pad_bytes += kind[K_W2].pad_bytes;
    for (int i = K_LAYER_OVL; i < KINDS; i++) {
        const double layers = kind_layers(i);
        kind[i] = kind[K_LAYER];
        snprintf(kind[i].name, sizeof kind[i].name, "%s-%s", m->prefix, kind_suffix[i]);
        kind[i].flops *= layers;
        kind[i].bytes *= layers;
        kind[i].fp8_bytes *= layers;
        kind[i].weight_bytes *= layers;
        kind[i].pad_bytes *= layers;
        kind[i].base_us *= layers;
    }
    snprintf(lab13, sizeof lab13, "%s %s T=%lld", kind[K_W13].name, layout, (long long)r->tokens);
    snprintf(lab2, sizeof lab2, "%s %s T=%lld", kind[K_W2].name, layout, (long long)r->tokens);

    if (bench_acts_alloc(&x13, g, r, m->n13, m->k13, c->gran) != 0 || bench_acts_alloc(&x2, g, r, m->n2, m->k2, c->gran) != 0) {
        fprintf(stderr, "bench: %s: could not set up the activations\n", lab13);
        goto done;
    }
    for (int s = 0; s < nsets; s++) {
        bench_expert_problem(&p13[s], &x13, r, &w13[s].b);
        bench_expert_problem(&p2[s], &x2, r, &w2[s].b);
        p13[s].d_padding = p2[s].d_padding = d_padding;
        l13[s].p = &p13[s];
        l13[s].label = lab13;
        l2[s].p = &p2[s];
        l2[s].label = lab2;
        l13[s].flags = l2[s].flags = 0;
        o13[s] = l13[s];
        o2[s] = l2[s];
        o13[s].flags = o2[s].flags = HFP4_GEMM_OVERLAP_PREVIOUS;
    }
    for (int i = 0; i < KINDS; i++) have[i] = 1;
    /* the glue's rows: w13's D feeds w2's A (FP32 K-major scales, what the glue writes) */
    have[K_GLUE] = have[K_GLUE_OVL] = m->n13 == 2 * m->k2 && p2[0].a.scales.dtype == HFP4_DTYPE_FP32 &&
                                      p2[0].a.scales.stride_k == 1 && (pos = routed_row_places(r, &x13)) != NULL;
    glue.y = x13.d;
    glue.n = m->k2;
    glue.routed = r->rows;
    glue.layout_rows = (g == HFP4_GROUPING_MASKED ? r->experts : 1) * x13.m;
    glue.pos = pos;
    glue.gran = c->gran;
    glue.a = (uint8_t *)x2.a;
    glue.sf = (float *)x2.sf;
    have[K_LAYERS2] = have[K_LAYERS2_OVL] = have[K_LAYERS8_OVL] = nsets == 2;
    /* standalone stream launches; they are also the warm-up a capture needs (one-time set-up) */
    if (bench_time_gemm(c, &p13[0], lab13, &kind[K_W13].stream_us) != 0 ||
        bench_time_gemm(c, &p2[0], lab2, &kind[K_W2].stream_us) != 0)
        goto done;
    if (have[K_GLUE] && (launch_glue(&glue, 0) != 0 || !BENCH_CUDA(cudaDeviceSynchronize())))
        goto done; /* (the glue's warm-up, as the GEMMs' timed launches are theirs) */
    for (int i = K_LAYER; i < KINDS; i++) /* (the glue rows: the GEMMs' launches only) */
        kind[i].stream_us = kind_layers(i) * (kind[K_W13].stream_us + kind[K_W2].stream_us);
    for (int s = 0; s < nsets; s++) {
        const int o = nsets - 1 - s; /* the other set: a second layer's weights */
        const graph_step G13 = {bench_launch_gemm, &l13[s]}, G2 = {bench_launch_gemm, &l2[s]};
        const graph_step O13 = {bench_launch_gemm, &o13[s]}, O2 = {bench_launch_gemm, &o2[s]};
        const graph_step G13o = {bench_launch_gemm, &l13[o]}, G2o = {bench_launch_gemm, &l2[o]};
        const graph_step O13o = {bench_launch_gemm, &o13[o]}, O2o = {bench_launch_gemm, &o2[o]};
        const graph_step GL = {launch_glue, &glue};
        graph_step steps[KINDS][16] = {{G13}, {G2}, {G13, G2}, {O13, O2}, {G13, GL, G2}, {O13, GL, O2},
                                       {G13, G2, G13o, G2o}, {O13, O2, O13o, O2o}};
        for (int j = 0; j < 16; j++) steps[K_LAYERS8_OVL][j] = steps[K_LAYERS2_OVL][j % 4]; /* (four times) */
        static const int nsteps[KINDS] = {1, 1, 2, 2, 3, 3, 4, 4, 16};
        for (int i = 0; i < KINDS; i++) {
            if (!have[i]) continue;
            void *args[16];
            for (int j = 0; j < nsteps[i]; j++) args[j] = (void *)&steps[i][j];
            if (bench_capture(c, launch_step, args, nsteps[i], &kind[i].exec[s], &kind[i].kernels) != 0) {
                fprintf(stderr, "bench: %s: graph capture failed\n", kind[i].name);
                goto done;
            }
        }
    }
    for (int i = 0; i < KINDS; i++) {
        if (!have[i]) continue;
        const graph_kind *gk = &kind[i];
        /* (layers8_overlap: its one graph back to back already alternates the sets, see above) */
        const int chain = i == K_LAYERS8_OVL;
        const int alternate = chain || bench_alternate_sets(c, nsets, gk->weight_bytes);
        double us = 0;
        char watched[192];
        snprintf(watched, sizeof watched, "%.60s %.40s T=%lld, graph replays", gk->name, layout, (long long)r->tokens);
        bench_watch(watched);
        const int timed = bench_time_graphs(c, gk->exec, alternate && !chain ? 2 : 1, !alternate, NULL, &us);
        bench_watch(NULL);
        if (timed != 0) {
            fprintf(stderr, "bench: %s %s T=%lld: graph replay failed\n", gk->name, layout, (long long)r->tokens);
            goto done;
        }
        bench_row row;
        bench_row_experts(&row, layout, gk->name, r, gk->n, gk->k, m->experts, us, gk->flops, gk->bytes,
                          gk->base_us > 0 ? "cublaslt_fp8_rowwise" : "unavailable", gk->base_us, gk->fp8_bytes);
        row.gran = c->gran;
        row.floor_us = bench_floor_us(c, gk->bytes);
        row.launch_us = bench_launch_floor_graph(c, gk->kernels);
        row.stream_us = gk->stream_us;
        row.flush = alternate                                  ? "alternate_weights"
                    : c->l2_flush == HFP4_BENCH_FLUSH_WRITE ? "memset"
                    : c->l2_flush == HFP4_BENCH_FLUSH_NONE  ? "none"
                                                            : "read";
        if (g == HFP4_GROUPING_CONTIGUOUS && d_padding == HFP4_D_PADDING_ZERO) row.tbps_with_padding = (gk->bytes + gk->pad_bytes) / us * 1e-6;
        bench_print_row(c, &row);
        kind_us[i] = us;
        /* the warm start (a T whose replays are separated by the flush, and a second weight set) */
        if (i <= K_LAYER && !alternate && nsets == 2 && c->l2_flush != HFP4_BENCH_FLUSH_NONE) {
            double wus = 0;
            bench_watch(watched);
            const int wtimed = bench_time_graphs(c, gk->exec, 1, 1, gk->exec[1], &wus);
            bench_watch(NULL);
            if (wtimed != 0) {
                fprintf(stderr, "bench: %s %s T=%lld: warm-start replays failed\n", gk->name, layout, (long long)r->tokens);
                goto done;
            }
            print_warm_start(c, layout, gk->name, r->tokens, wus, gk->bytes, us);
            kind_warm_us[i] = wus;
        }
    }
    if (g == HFP4_GROUPING_MASKED) { /* what reading the hit experts alone takes, launched the same way */
        const hfp4_matrix *b13[2] = {&w13[0].b, &w13[nsets - 1].b}, *b2[2] = {&w2[0].b, &w2[nsets - 1].b};
        const hfp4_matrix *bl[4] = {&w13[0].b, &w2[0].b, &w13[nsets - 1].b, &w2[nsets - 1].b};
        const hfp4_matrix *const *bs[3] = {b13, b2, bl};
        for (int i = K_W13; i <= K_LAYER; i++)
            if (bench_stream_floor(c, kind[i].name, layout, r->tokens, (const int32_t *)x13.layout, m->experts, bs[i],
                                   i == K_LAYER ? 2 : 1, nsets, kind[i].weight_bytes, kind[i].bytes, kind_us[i],
                                   kind_warm_us[i]) != 0) {
                fprintf(stderr, "bench: %s %s T=%lld: stream floor failed\n", kind[i].name, layout, (long long)r->tokens);
                goto done;
            }
    }
    rc = 0;
done:
    for (int i = 0; i < KINDS; i++)
        for (int s = 0; s < 2; s++)
            if (kind[i].exec[s]) (void)BENCH_CUDA(cudaGraphExecDestroy(kind[i].exec[s]));
    if (pos) (void)BENCH_CUDA(cudaFree(pos));
    bench_acts_free(&x13);
    bench_acts_free(&x2);
    return rc;
}

/* Makes one set of weights, and a second when it fits with room to spare; returns the number of
 * sets (0 on failure, printed). */
static int make_sets(bench_ctx *c, const bench_moe_model *m, bench_weights *w13, bench_weights *w2) {
    if (bench_make_weights(m->experts, m->n13, m->k13, &w13[0]) != 0) return 0;
    if (bench_make_weights(m->experts, m->n2, m->k2, &w2[0]) != 0) {
        bench_free_weights(&w13[0]);
        return 0;
    }
    size_t free_b = 0, total_b = 0;
    if (!BENCH_CUDA(cudaMemGetInfo(&free_b, &total_b))) return 1;
    /* peak of making the second set, plus 4 GB for activations, outputs and the cuBLASLt baseline */
    size_t t13 = bench_weights_peak_bytes(m->experts, m->n13, m->k13) - w13[0].w_bytes;
    size_t t2 = bench_weights_peak_bytes(m->experts, m->n2, m->k2) - w2[0].w_bytes;
    size_t need = w13[0].w_bytes + w2[0].w_bytes + (t13 > t2 ? t13 : t2) + ((size_t)4 << 30);
    if (need > free_b) {
        fprintf(stderr, "bench: %s: one copy of the weights only (a second needs %.1f GB, %.1f GB free): replays are "
                        "separated by a memset\n", m->prefix, need / 1e9, free_b / 1e9);
        return 1;
    }
    if (bench_make_weights(m->experts, m->n13, m->k13, &w13[1]) != 0) return 1;
    if (bench_make_weights(m->experts, m->n2, m->k2, &w2[1]) != 0) {
        bench_free_weights(&w13[1]);
        return 1;
    }
    return 2;
}

void bench_layer_graphs(bench_ctx *c, const bench_moe_model *m, const int64_t *tokens, int ntok) {
    bench_weights w13[2], w2[2];
    int nsets = 0;
    memset(w13, 0, sizeof w13);
    memset(w2, 0, sizeof w2);
    for (int ti = 0; ti < ntok; ti++) {
        const int64_t T = tokens[ti];
        if (T > 256) continue; /* decode only: prefill's fixed costs are noise */
        if (!bench_budget_ok(c, "%s layer graphs T=%lld", m->prefix, (long long)T)) continue;
        if (nsets == 0) { /* made on the first case that runs, so a spent budget allocates nothing */
            bench_launch_floors(c);
            nsets = make_sets(c, m, w13, w2);
            if (nsets == 0) {
                fprintf(stderr, "bench: %s: could not allocate/repack the weights; its layer graphs are skipped\n", m->prefix);
                c->failed++;
                return;
            }
        }
        bench_routing r;
        if (bench_route(T, m->experts, m->topk, &r) != 0) {
            c->failed++;
            continue;
        }
        double base13 = 0, base2 = 0;
        char err[256] = "";
        if (baseline_cublaslt_fp8_rowwise(r.rows, m->n13, m->k13, c->iters, &base13, err, sizeof err) != 0) {
            base13 = 0;
            if (!c->json) fprintf(stderr, "  baseline: %s\n", err);
        }
        if (baseline_cublaslt_fp8_rowwise(r.rows, m->n2, m->k2, c->iters, &base2, err, sizeof err) != 0) {
            base2 = 0;
            if (!c->json) fprintf(stderr, "  baseline: %s\n", err);
        }
        const hfp4_d_padding zero = HFP4_D_PADDING_ZERO;
        if (layer_case(c, m, w13, w2, nsets, &r, HFP4_GROUPING_MASKED, base13, base2, zero) != 0) c->failed++;
        if (layer_case(c, m, w13, w2, nsets, &r, HFP4_GROUPING_CONTIGUOUS, base13, base2, zero) != 0) c->failed++;
        if (layer_case(c, m, w13, w2, nsets, &r, HFP4_GROUPING_CONTIGUOUS, base13, base2, HFP4_D_PADDING_ANY) != 0)
            c->failed++;
        bench_routing_free(&r);
    }
    for (int s = 0; s < nsets; s++) {
        bench_free_weights(&w13[s]);
        bench_free_weights(&w2[s]);
    }
}
