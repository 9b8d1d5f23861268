/*
 * bench.cu - `hfp4 bench`: times hfp4's SM90 FP8 x FP4 GEMMs on DeepSeek-V4 shapes with the
 * baselines (copy rate, cuBLASLt FP8 row-wise, cuBLASLt BF16, launch floors) timed in the same run.
 * Prints a table, or with --json one object per row. The sections, in the order they run:
 *
 *   w13, w2   V4-Flash experts (E = 256, top-6; w13 4096x4096, w2 4096x2048), masked (T <= 256)
 *             and contiguous layouts, each GEMM launched on its own
 *   dense     FP8 x FP4 8192^3 (and cuBLASLt BF16)
 *   sf        scale-factor layout transforms
 *   gran      V4-Flash w13 at T = 32 (masked), 4096 and 16384 (contiguous) with activation scales
 *             per 1x32 (what transformers passes) and per 1x128
 *   launch    launch floors: an empty kernel launched on a stream and as graphs of 1 and 2 kernels
 *   graph     V4-Flash: one MoE layer's w13 + w2 as CUDA-graph replays, decode T (bench_graph.cu)
 *   gemv      dense M = 1: 4096x4096 and 32768x1024, with the copy-rate and launch floors; FP8 weights too
 *   tp        V4-Flash TP8 shards (w13 512x4096, w2 4096x256, E = 256), decode: standalone + graphs
 *   pro       V4-Pro experts (E = 384; w13 6144x7168, w2 7168x3072): standalone at decode and
 *             prefill T, graphs at decode T
 *   moe       the MoE glue around the GEMMs (route, quantize rows, combine; bench_moe.cu), V4-Flash
 *             layer shape, decode T and 4096
 *
 * Timing (bench_timing.cu): median of --iters stream launches, each after a read of a 256 MB buffer
 * has emptied L2 (--l2-flush write: a memset, which leaves L2 dirty), or median of --replays graph
 * replays. FLOPs count only useful rows (2 x routed rows x N x K). Bytes that must move: FP4
 * weights and UE8M0 scales of the experts hit, FP8 activations with their scales, BF16 outputs;
 * "floor_us" is those bytes over the copy rate of this run.
 * Contiguous rows also carry "tbps_with_padding": the same with D's padding rows counted, the zeros
 * DeepGEMM's contiguous contract has the GEMM write (~25 % more bytes than w2's weights at T = 8).
 * Each timed row also carries the SM clock, the power draw and NVML's clock-event reasons
 * ("sm_mhz", "power_w", "clock_reasons"; bench_clock.cu), sampled while a launch of 1 ms or more
 * runs and read right after shorter cases, where NVML loads: prefill on the H200 runs at its power
 * limit, at 1.4-1.8 GHz.
 * A timed case still running after HFP4_BENCH_WATCHDOG_S seconds (120; 0: no limit, for profilers)
 * ends the run with its name on stderr and exit status 5 (a hung kernel: bench_watch).
 */
#include <math.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "baselines.h"
#include "bench_common.h"
#include "tool_common.h"

static const char *const k_sections[] = {"w13", "w2",  "dense", "sf",  "gran",  "launch",
                                         "graph", "gemv", "tp",   "pro", "tp-pro", "moe"};

/* 1 if section `name` runs: no --only, or `name` is one of its comma-separated entries. */
static int selected(const char *only, const char *name) {
    if (!only) return 1;
    const size_t len = strlen(name);
    for (const char *p = only; *p;) {
        const char *end = strchr(p, ',');
        const size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == len && !strncmp(p, name, len)) return 1;
        p += n + (end ? 1 : 0);
    }
    return 0;
}

/* 0 if every entry of --only names a section; otherwise prints the first that does not. */
static int check_only(const char *only) {
    for (const char *p = only; *p;) {
        const char *end = strchr(p, ',');
        const size_t n = end ? (size_t)(end - p) : strlen(p);
        int known = 0;
        for (size_t i = 0; i < sizeof k_sections / sizeof k_sections[0]; i++)
            known |= strlen(k_sections[i]) == n && !strncmp(p, k_sections[i], n);
        if (!known) {
            fprintf(stderr, "hfp4 bench: --only: unknown section '%.*s'\n", (int)n, p);
            return -1;
        }
        p += n + (end ? 1 : 0);
    }
    return 0;
}

static int has_tokens(const int64_t *list, int n, int64_t t) {
    for (int i = 0; i < n; i++)
        if (list[i] == t) return 1;
    return 0;
}

/* An option with two values: *flag = 0 for `off`, 1 for `on`; -1 (with a message) for anything else. */
static int two_way_option(const char *opt, const char *val, const char *off, const char *on, int *flag) {
    if (strcmp(val, off) && strcmp(val, on)) {
        fprintf(stderr, "hfp4 bench: %s %s: must be %s or %s\n", opt, val, off, on);
        return -1;
    }
    *flag = !strcmp(val, on);
    return 0;
}

/* The options: to stdout for --help, to stderr after a bad option */
static void bench_usage(FILE *f) {
    fprintf(f,
            "usage: hfp4 bench [--json] [--quick] [--iters N] [--replays N] [--tokens T1,T2,...] [--gran 32|128]\n"
            "                  [--sf-layout k|mn] [--a-scales fp32|ue8m0] [--w-scales narrow|drift] [--seconds-budget S]\n"
            "                  [--routing-seed S] [--routing uniform|balanced] [--contiguous-hint rows|none|R]\n"
            "                  [--l2-flush read|write|none] [--only SECTION[,SECTION...]] [--dense-shape M,N,K]...\n"
            "  sections: w13 w2 dense sf gran launch graph gemv tp pro moe (default: all), and tp-pro\n"
            "            (V4-Pro's TP8 shards, only when named)\n"
            "  --iters N           stream-launched cases: median of N launches (3..1000, default 20)\n"
            "  --replays N         graph cases: median of N replays (10..10000, default 200)\n"
            "  --tokens list       token counts of every expert section (graphs use those <= 256)\n"
            "  --gran G            activation scale gran_k of every FP8 x FP4 case (default 128)\n"
            "  --sf-layout L       FP32 activation scales K-major (k, default) or MN-major (mn: DeepGEMM's\n"
            "                      TMA-aligned layout, where a group's rows are a multiple of 4)\n"
            "  --a-scales D        activation scale dtype: fp32 (default) or ue8m0 (bytes; the same 2^-8)\n"
            "  --w-scales S        expert weight scales: narrow (default: exponents 118..123, every tile\n"
            "                      one-base) or drift (row bases climb over K: the chunk-by-chunk path)\n"
            "  --seconds-budget S  cases that would start after S seconds are skipped and listed\n"
            "  --routing-seed S    each token count's routing from its own stream seeded by S (>= 1): the\n"
            "                      same whatever --tokens lists; default: the bench's one stream\n"
            "  --routing R         uniform (default: each token's top-k drawn at random) or balanced (token\n"
            "                      t's j-th expert is (t x top-k + j) mod E: every expert the same rows where\n"
            "                      E divides T x top-k; the grouped kernels' no-tail case, for diagnosis)\n"
            "  --contiguous-hint H contiguous cases (not psum) with expected_m = rows per routed expert\n"
            "                      (rows, default), none (DeepGEMM's contiguous API has no hint, so\n"
            "                      transformers passes none and the token tile follows m / groups, padding\n"
            "                      included) or R, a fixed value (1..65536: the tile it picks, at every size)\n"
            "  --l2-flush F        how L2 is emptied before a timed launch: read (default: a 256 MB read leaves\n"
            "                      clean lines, as other kernels' reads do) or write (a 256 MB memset leaves\n"
            "                      ~50 MB of dirty lines the launch then writes back) or none (diagnosis only:\n"
            "                      L2 keeps what the launch before left, so the figures read cached weights)\n"
            "  --dense-shape M,N,K the dense section times this shape instead of 8192^3 (repeatable, up to 8)\n");
}

/* Whether `opt` is one of the options that take a value (a missing value and an unknown option get
 * different messages) */
static int takes_value(const char *opt) {
    static const char *const with_value[] = {"--iters", "--replays", "--tokens", "--gran", "--sf-layout",
                                             "--a-scales", "--w-scales", "--seconds-budget", "--routing-seed",
                                             "--routing", "--contiguous-hint", "--l2-flush", "--only", "--dense-shape"};
    for (size_t i = 0; i < sizeof with_value / sizeof with_value[0]; i++)
        if (!strcmp(opt, with_value[i])) return 1;
    return 0;
}

static int usage_error(const char *arg) {
    fprintf(stderr, "hfp4 bench: bad option '%s'\n", arg);
    bench_usage(stderr);
    return 2;
}

/* A whole-string decimal integer in [lo, hi] into *out; else a message naming the option and its text */
static int int_option(const char *opt, const char *text, long lo, long hi, int *out) {
    char *end = NULL;
    errno = 0;
    const long v = strtol(text, &end, 10);
    if (end == text || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "hfp4 bench: %s %s: must be an integer in %ld..%ld\n", opt, text, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

extern "C" int hfp4_cmd_bench(int argc, char **argv) {
    bench_ctx c;
    memset(&c, 0, sizeof c);
    c.iters = 20;
    c.replays = 200;
    c.gran = 128;
    int quick = 0, ntok_arg = 0, ndense = 0;
    int64_t dense_shapes[8][3];
    int64_t tok_arg[16];
    const char *only = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            bench_usage(stdout);
            return 0;
        }
        char *end = NULL;
        if (!strcmp(argv[i], "--json")) c.json = 1;
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
            if (int_option("--iters", argv[++i], 3, 1000, &c.iters) != 0) return 2;
        } else if (!strcmp(argv[i], "--replays") && i + 1 < argc) {
            if (int_option("--replays", argv[++i], 10, 10000, &c.replays) != 0) return 2;
        }
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--dense-shape") && i + 1 < argc) {
            long long m, n, k;
            char tail;
            ++i;
            if (ndense == 8 || sscanf(argv[i], "%lld,%lld,%lld%c", &m, &n, &k, &tail) != 3 || m < 1 || n < 1 || k < 1 ||
                m > (1 << 30) || n > (1 << 30) || k > (1 << 30)) {
                fprintf(stderr, "hfp4 bench: --dense-shape %s: must be M,N,K (positive, <= 2^30; at most 8 shapes)\n",
                        argv[i]);
                return 2;
            }
            dense_shapes[ndense][0] = m, dense_shapes[ndense][1] = n, dense_shapes[ndense][2] = k;
            ndense++;
        }
        else if (!strcmp(argv[i], "--gran") && i + 1 < argc) {
            int g32 = 0;
            if (two_way_option("--gran", argv[++i], "128", "32", &g32) != 0) return 2;
            c.gran = g32 ? 32 : 128;
        } else if (!strcmp(argv[i], "--sf-layout") && i + 1 < argc) {
            if (two_way_option("--sf-layout", argv[++i], "k", "mn", &bench_a_scales_mn_major) != 0) return 2;
        } else if (!strcmp(argv[i], "--a-scales") && i + 1 < argc) {
            if (two_way_option("--a-scales", argv[++i], "fp32", "ue8m0", &bench_a_scales_ue8m0) != 0) return 2;
        } else if (!strcmp(argv[i], "--contiguous-hint") && i + 1 < argc) {
            const char *h = argv[++i];
            if (!strcmp(h, "rows")) bench_contiguous_hint = -1;
            else if (!strcmp(h, "none")) bench_contiguous_hint = 0;
            else if (int_option("--contiguous-hint", h, 1, 65536, &bench_contiguous_hint) != 0) return 2;
        } else if (!strcmp(argv[i], "--l2-flush") && i + 1 < argc) {
            const char *f = argv[++i];
            if (!strcmp(f, "read")) c.l2_flush = HFP4_BENCH_FLUSH_READ;
            else if (!strcmp(f, "write")) c.l2_flush = HFP4_BENCH_FLUSH_WRITE;
            else if (!strcmp(f, "none")) c.l2_flush = HFP4_BENCH_FLUSH_NONE;
            else {
                fprintf(stderr, "hfp4 bench: --l2-flush %s: must be read, write or none\n", f);
                return 2;
            }
        } else if (!strcmp(argv[i], "--w-scales") && i + 1 < argc) {
            if (two_way_option("--w-scales", argv[++i], "narrow", "drift", &bench_w_scales_drift) != 0) return 2;
        } else if (!strcmp(argv[i], "--routing") && i + 1 < argc) {
            if (two_way_option("--routing", argv[++i], "uniform", "balanced", &bench_routing_balanced) != 0) return 2;
        } else if (!strcmp(argv[i], "--routing-seed") && i + 1 < argc) {
            char *end = NULL;
            const unsigned long long v = strtoull(argv[++i], &end, 10);
            if (end == argv[i] || *end || argv[i][0] == '-' || v == 0) {
                fprintf(stderr, "hfp4 bench: --routing-seed %s: must be a positive integer\n", argv[i]);
                return 2;
            }
            bench_routing_seed = v;
        } else if (!strcmp(argv[i], "--seconds-budget") && i + 1 < argc) {
            c.budget_s = strtod(argv[++i], &end);
            if (end == argv[i] || *end || !(c.budget_s > 0) || !isfinite(c.budget_s)) {
                fprintf(stderr, "hfp4 bench: --seconds-budget %s: must be a positive number of seconds\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) {
            /* comma-separated token counts, e.g. --tokens 32,4096 */
            char *list = argv[++i];
            while (*list) {
                if (ntok_arg == 16) {
                    fprintf(stderr, "hfp4 bench: --tokens '%s': at most 16 counts\n", argv[i]);
                    return 2;
                }
                long long v = strtoll(list, &end, 10);
                if (end == list || v < 1 || v > 1000000) {
                    fprintf(stderr, "hfp4 bench: --tokens '%s': each count must be an integer in 1..1000000\n", argv[i]);
                    return 2;
                }
                tok_arg[ntok_arg++] = v;
                list = *end == ',' ? end + 1 : end;
                if (*end && *end != ',') {
                    fprintf(stderr, "hfp4 bench: --tokens '%s': expected comma-separated integers\n", argv[i]);
                    return 2;
                }
            }
        } else if (i + 1 == argc && takes_value(argv[i])) {
            fprintf(stderr, "hfp4 bench: %s needs a value\n", argv[i]);
            return 2;
        } else {
            return usage_error(argv[i]);
        }
    }
    if (only && check_only(only) != 0) return 2;
    hfp4_device_info info;
    if (hfp4_device_query(0, &info) != HFP4_OK || !info.has_sm90_kernels) {
        fprintf(stderr, "hfp4 bench: needs a Hopper (SM90) GPU: %s\n", hfp4_last_error()[0] ? hfp4_last_error() : "device 0 is not SM90");
        return 3;
    }
    c.t0 = bench_now();
    bench_clock_for_baselines(); /* (the baselines' rows then carry their clock and power too) */
    if (bench_timing_init(&c) != 0) {
        bench_timing_fini(&c);
        return 4;
    }
    double cus = 0;
    if (baseline_copy_gbps((size_t)1 << 30, 10, &c.copy_gbps, &cus) != 0) {
        /* floors are left out of the rows (floor_us needs the copy rate), everything else runs */
        fprintf(stderr, "bench: copy rate: %s\n", baseline_last_error());
        c.copy_gbps = 0;
        c.failed++;
    }
    if (c.json) printf("{\"op\": \"copy\", \"layout\": \"dense\", \"tokens\": null, \"bytes\": %lld, \"us\": %.2f, \"tbps\": %.3f, \"gpu\": \"%s\"}\n",
                       (long long)(2LL << 30), cus, c.copy_gbps / 1000, info.name);
    else printf("# %s, %d SMs; device-to-device copy (read+write) %.0f GB/s\n"
                "%-10s %-10s %-8s %6s %7s %6s %6s %4s %9s %8s %7s | %-22s %9s %8s %7s  %6s\n",
                info.name, info.num_sms, c.copy_gbps, "op", "layout", "shape", "", "rows", "n", "k", "hit", "us", "TFLOP/s",
                "TB/s", "baseline", "us", "TFLOP/s", "TB/s", "speedup");
    if (c.l2_flush == HFP4_BENCH_FLUSH_NONE) {
        if (c.json) printf("{\"op\": \"note\", \"l2_flush\": \"none\"}\n");
        else printf("# --l2-flush none: L2 is not emptied between timed launches (diagnosis only: the figures read "
                    "cached weights)\n");
    }
    fflush(stdout);

    /* token lists: --tokens replaces every one of them */
    static const int64_t tok_full[] = {1, 8, 32, 64, 256, 4096, 16384}, tok_quick[] = {1, 32, 4096};
    static const int64_t dec_full[] = {1, 8, 32, 64, 128}, dec_quick[] = {1, 32};
    static const int64_t pro_full[] = {1, 8, 32, 64, 128, 4096, 16384}, pro_quick[] = {1, 32, 4096};
    static const int64_t gran_tok[] = {32, 4096, 16384}; /* decode (masked) and prefill */
    const int64_t *tl = ntok_arg ? tok_arg : quick ? tok_quick : tok_full;
    const int nt = ntok_arg ? ntok_arg : quick ? 3 : 7;
    const int64_t *dl = ntok_arg ? tok_arg : quick ? dec_quick : dec_full;
    const int nd = ntok_arg ? ntok_arg : quick ? 2 : 5;
    const int64_t *pl = ntok_arg ? tok_arg : quick ? pro_quick : pro_full;
    const int np = ntok_arg ? ntok_arg : quick ? 3 : 7;

    static const bench_moe_model flash = {"v4f", 256, 6, 4096, 4096, 4096, 2048};
    static const bench_moe_model tp8 = {"v4f-tp8", 256, 6, 512, 4096, 4096, 256};
    static const bench_moe_model pro = {"v4p", 384, 6, 6144, 7168, 7168, 3072};
    static const bench_moe_model tp8_pro = {"v4p-tp8", 384, 6, 768, 7168, 7168, 384}; /* (deepseek-v4.md) */

    /* gran: the w13 section times the other granularity on its own routing at the gran section's
     * T that it runs; the gran section runs the rest with both granularities */
    int64_t gran_rest[3];
    int n_gran_rest = 0;
    for (int i = 0; i < 3; i++)
        if (!(selected(only, "w13") && has_tokens(tl, nt, gran_tok[i]))) gran_rest[n_gran_rest++] = gran_tok[i];
    if (selected(only, "w13")) {
        bench_expert_case ec = {"v4f-w13", flash.experts, flash.topk, flash.n13, flash.k13, tl, nt,
                                gran_tok, selected(only, "gran") ? 3 : 0};
        bench_experts(&c, &ec);
    }
    if (selected(only, "w2")) {
        bench_expert_case ec = {"v4f-w2", flash.experts, flash.topk, flash.n2, flash.k2, tl, nt, NULL, 0};
        bench_experts(&c, &ec);
    }
    if (selected(only, "dense")) {
        if (ndense == 0) bench_dense(&c, 8192, 8192, 8192);
        for (int i = 0; i < ndense; i++) bench_dense(&c, dense_shapes[i][0], dense_shapes[i][1], dense_shapes[i][2]);
    }
    if (selected(only, "sf")) {
        bench_sf_layout(&c, "v4f-w13", 256, 4096, 128);            /* V4-Flash w13 expert scales */
        if (!quick) bench_sf_layout(&c, "v4p-w2", 384, 7168, 96); /* V4-Pro w2 expert scales */
    }
    if (selected(only, "gran") && n_gran_rest > 0) {
        bench_expert_case ec = {"v4f-w13", flash.experts, flash.topk, flash.n13, flash.k13, gran_rest, n_gran_rest,
                                gran_rest, n_gran_rest};
        bench_experts(&c, &ec);
    }
    if (selected(only, "launch")) bench_launch_floors(&c);
    if (selected(only, "graph")) bench_layer_graphs(&c, &flash, dl, nd);
    if (selected(only, "gemv")) {
        bench_gemv(&c, 4096, 4096);  /* e.g. a 4096-wide projection for one token */
        bench_gemv(&c, 32768, 1024); /* V4-Flash q_b_proj shape */
    }
    if (selected(only, "tp")) {
        bench_expert_case e13 = {"v4f-tp8-w13", tp8.experts, tp8.topk, tp8.n13, tp8.k13, dl, nd, NULL, 0};
        bench_expert_case e2 = {"v4f-tp8-w2", tp8.experts, tp8.topk, tp8.n2, tp8.k2, dl, nd, NULL, 0};
        bench_experts(&c, &e13);
        bench_experts(&c, &e2);
        bench_layer_graphs(&c, &tp8, dl, nd);
    }
    if (selected(only, "pro")) {
        /* weights: w13 9.0 GB, w2 4.5 GB (FP4 + scales); made one GEMM at a time here, and two copies
         * of both (27 GB, plus 9 GB while making one) for the graphs, when they fit */
        bench_expert_case e13 = {"v4p-w13", pro.experts, pro.topk, pro.n13, pro.k13, pl, np, NULL, 0};
        bench_expert_case e2 = {"v4p-w2", pro.experts, pro.topk, pro.n2, pro.k2, pl, np, NULL, 0};
        bench_experts(&c, &e13);
        bench_experts(&c, &e2);
        bench_layer_graphs(&c, &pro, pl, np);
    }
    if (selected(only, "moe")) {
        static const int64_t glue_tok[] = {1, 8, 32, 128, 4096};
        bench_moe_glue(&c, ntok_arg ? tok_arg : glue_tok, ntok_arg ? ntok_arg : quick ? 2 : 5);
    }
    if (only && selected(only, "tp-pro")) { /* (not in the default run: the full run's length stays) */
        bench_expert_case e13 = {"v4p-tp8-w13", tp8_pro.experts, tp8_pro.topk, tp8_pro.n13, tp8_pro.k13, dl, nd, NULL, 0};
        bench_expert_case e2 = {"v4p-tp8-w2", tp8_pro.experts, tp8_pro.topk, tp8_pro.n2, tp8_pro.k2, dl, nd, NULL, 0};
        bench_experts(&c, &e13);
        bench_experts(&c, &e2);
        bench_layer_graphs(&c, &tp8_pro, dl, nd);
    }
    bench_timing_fini(&c);
    if (c.skipped)
        fprintf(stderr, "bench: %d case(s) skipped: --seconds-budget %.0f s was spent after %.1f s\n", c.skipped, c.budget_s,
                bench_now() - c.t0);
    if (c.failed) fprintf(stderr, "bench: %d case(s) failed (messages above)\n", c.failed);
    return 0;
}
