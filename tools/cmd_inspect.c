/*
 * cmd_inspect.c - `hfp4 inspect FILE.safetensors [--tensor NAME]`: the tensors of a safetensors
 * file (name, dtype, shape, bytes) and, for each FP4 expert weight with its scale tensor, how much
 * of it the SM90 kernels will run on the fast (folded) path after `hfp4 repack`
 * (docs/CHECKPOINTS.md). Reads one expert at a time, so whole checkpoint shards are fine.
 *
 * Exit status: 0 ok; 2 usage or bad input (a malformed file, a broken FP4 pair: the message names
 * it); 1 other errors (I/O, memory).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/checkpoint/fp4_experts.h"
#include "../src/weights/sm90_layout.h"
#include "tool_common.h"

static int exit_code(hfp4_status st) { return st == HFP4_ERR_INVALID_ARGUMENT ? 2 : 1; }

/* prefix, then the library's last message escaped: it quotes tensor names and metadata from the
 * file, which may hold terminal control sequences */
static void print_error(FILE *out, const char *prefix) {
    fputs(prefix, out);
    hfp4__st_fputs_printable(out, hfp4_last_error());
    fputc('\n', out);
}

/* (to stdout for --help, to stderr after a usage error) */
static int inspect_usage_to(FILE *f) {
    fprintf(f, "usage: hfp4 inspect FILE.safetensors [--tensor NAME]\n");
    return 2;
}

static int inspect_usage(void) { return inspect_usage_to(stderr); }

/* The number after `token` ("layers.") when it ends at a '.' or the end of the name. */
static int number_after(const char *name, const char *token, long *v) {
    const char *p = strstr(name, token);
    if (!p) return 0;
    p += strlen(token);
    if (*p < '0' || *p > '9') return 0;
    char *end;
    errno = 0;
    *v = strtol(p, &end, 10);
    /* past long's range strtol gives LONG_MAX: that would be shown as the layer, so no number */
    return errno != ERANGE && (*end == '.' || *end == '\0');
}

typedef enum kind { KIND_W13, KIND_W2, KIND_OTHER, KIND_COUNT } kind;
static const char *const kind_names[KIND_COUNT] = {"w13 (gate/up: w1, w3, gate_up_proj)", "w2 (down: w2, down_proj)",
                                                   "other"};

/* "w1 of layer 3 expert 17" for DeepSeek names, "w13 (gate_up_proj) of layer 3, experts 0..255"
 * for transformers' stacked ones, else the tensor name; and which projection it is. */
static kind describe(const hfp4__fp4_expert *e, char *buf, size_t cap) {
    const char *name = e->weight->name;
    long layer = -1, expert = -1;
    int has_layer = number_after(name, "layers.", &layer), has_expert = number_after(name, "experts.", &expert);
    static const struct {
        const char *suffix, *label;
        kind k;
    } forms[] = {
        {".w1.weight", "w1", KIND_W13},
        {".w3.weight", "w3", KIND_W13},
        {".w2.weight", "w2", KIND_W2},
        {".gate_up_proj", "w13 (gate_up_proj)", KIND_W13},
        {".down_proj", "w2 (down_proj)", KIND_W2},
    };
    size_t n = strlen(name);
    for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
        size_t m = strlen(forms[f].suffix);
        if (n < m || strcmp(name + n - m, forms[f].suffix) != 0 || !has_layer) continue;
        if (e->groups == 1 && has_expert) snprintf(buf, cap, "%s of layer %ld expert %ld", forms[f].label, layer, expert);
        else if (e->groups == 1) snprintf(buf, cap, "%s of layer %ld", forms[f].label, layer);
        else snprintf(buf, cap, "%s of layer %ld, experts 0..%d", forms[f].label, layer, (int)e->groups - 1);
        return forms[f].k;
    }
    snprintf(buf, cap, "%s", name);
    return KIND_OTHER;
}

static void print_stats(const char *label, const hfp4__fold_stats *s) {
    int64_t folded = hfp4__fold_stats_folded(s);
    hfp4__st_fputs_printable(stdout, label); /* (a tensor's own name for unrecognized ones) */
    printf(": %.1f %% of 128-K chunks fold (fast path), %.1f %% of tiles one-base, ",
           s->chunk_tiles ? 100.0 * folded / s->chunk_tiles : 0.0,
           s->tiles ? 100.0 * hfp4__fold_stats_one_base(s) / s->tiles : 0.0);
    if (s->exp_min <= s->exp_max) printf("exponents %d..%d\n", s->exp_min, s->exp_max);
    else printf("no non-zero 32-group\n");
}

static void print_detail(const hfp4__fp4_expert *e, const hfp4__fold_stats *s) {
    printf("      ");
    hfp4__st_fputs_printable(stdout, e->weight->name);
    printf(": ");
    if (e->groups > 1) printf("%d groups of ", (int)e->groups);
    printf("N %lld, K %lld, %s scales; %lld of %lld chunk-tiles fold; %lld of %lld 32-groups all zero\n", (long long)e->n,
           (long long)e->k, hfp4__st_dtype_name(e->scale->dtype), (long long)hfp4__fold_stats_folded(s),
           (long long)s->chunk_tiles, (long long)s->zero_groups, (long long)s->k_groups);
    if (s->non_pow2_scales)
        printf("      %lld scales are not powers of two: the repack stores FP32 scales, every chunk per-32 (exact, slower)\n",
               (long long)s->non_pow2_scales);
}

int hfp4_cmd_inspect(int argc, char **argv) {
    const char *path = NULL, *only = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            inspect_usage_to(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--tensor")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "hfp4 inspect: --tensor needs a tensor name\n");
                return inspect_usage();
            }
            only = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "hfp4 inspect: unknown option '%s'\n", argv[i]);
            return inspect_usage();
        } else if (path) {
            fprintf(stderr, "hfp4 inspect: unexpected argument '%s' (one file at a time)\n", argv[i]);
            return inspect_usage();
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "hfp4 inspect: missing FILE.safetensors\n");
        return inspect_usage();
    }
    hfp4__st_file *f = NULL;
    hfp4_status st = hfp4__st_open(path, &f);
    if (st != HFP4_OK) {
        print_error(stderr, "hfp4 inspect: ");
        return exit_code(st);
    }
    const hfp4__st_tensor *one = NULL;
    if (only && !(one = hfp4__st_find(f, only))) {
        fprintf(stderr, "hfp4 inspect: --tensor '");
        hfp4__st_fputs_printable(stderr, only);
        fprintf(stderr, "': no such tensor in '");
        hfp4__st_fputs_printable(stderr, path);
        fprintf(stderr, "'\n");
        hfp4__st_close(f);
        return 2;
    }

    hfp4__st_fputs_printable(stdout, path);
    printf(": %llu bytes (header %llu, data %llu), %zu tensors\n", (unsigned long long)f->file_bytes,
           (unsigned long long)f->header_bytes, (unsigned long long)f->data_bytes, f->count);
    for (size_t i = 0; i < f->meta_count; i++) {
        printf("metadata: ");
        hfp4__st_fputs_printable(stdout, f->meta_keys[i]);
        printf(" = ");
        hfp4__st_fputs_printable(stdout, f->meta_values[i]);
        printf("\n");
    }
    printf("  %-8s %-22s %14s  %s\n", "dtype", "shape", "bytes", "name");
    for (size_t i = 0; i < f->count; i++) {
        const hfp4__st_tensor *t = &f->tensors[i];
        if (one && t != one) continue;
        char sh[160];
        printf("  %-8s %-22s %14llu  ", hfp4__st_dtype_name(t->dtype), hfp4__st_shape_string(t, sh, sizeof sh),
               (unsigned long long)t->bytes);
        hfp4__st_fputs_printable(stdout, t->name);
        printf("\n");
    }

    hfp4__fold_stats total, by_kind[KIND_COUNT];
    hfp4__fold_stats_init(&total);
    for (int k = 0; k < KIND_COUNT; k++) hfp4__fold_stats_init(&by_kind[k]);
    int64_t weights = 0, per_kind[KIND_COUNT] = {0};
    int errors = 0, rc = 0;
    int header_printed = 0;
    for (size_t i = 0; i < f->count; i++) {
        const hfp4__st_tensor *t = &f->tensors[i];
        if (one && t != one) continue;
        /* with --tensor, any packed-FP4-typed tensor is checked as a pair (and its problem shown) */
        int fp4_typed = t->dtype == HFP4__ST_I8 || t->dtype == HFP4__ST_U8 || t->dtype == HFP4__ST_F4;
        if (!hfp4__fp4_expert_candidate(f, t) && !(one && fp4_typed)) continue;
        if (!header_printed) {
            printf("FP4 expert weights (fast path: a 128-K chunk of a 64-row tile whose rows' non-zero 32-groups span "
                   "<= %d binades):\n",
                   HFP4_SM90_FOLD_SPAN);
            header_printed = 1;
        }
        hfp4__fp4_expert e;
        hfp4__fold_stats s;
        st = hfp4__fp4_expert_pair(f, t->name, &e);
        if (st == HFP4_OK) st = hfp4__fp4_expert_stats(f, &e, &s);
        if (st != HFP4_OK) {
            print_error(stdout, "  error: "); /* (in the listing, and on stderr for scripts) */
            fflush(stdout);
            print_error(stderr, "hfp4 inspect: ");
            errors++;
            if (rc != 1) rc = exit_code(st);
            continue;
        }
        char label[400];
        kind k = describe(&e, label, sizeof label);
        printf("  ");
        print_stats(label, &s);
        print_detail(&e, &s);
        /* FP32 storage is decided per tensor: sum what each tensor will store, not the exponent rule */
        hfp4__fold_stats stored = s;
        stored.folded_if_ue8m0 = hfp4__fold_stats_folded(&s);
        stored.one_base_if_ue8m0 = hfp4__fold_stats_one_base(&s);
        stored.non_pow2_scales = 0;
        hfp4__fold_stats_merge(&total, &stored);
        hfp4__fold_stats_merge(&by_kind[k], &stored);
        weights++;
        per_kind[k]++;
    }
    if (one && !header_printed) {
        printf("'");
        hfp4__st_fputs_printable(stdout, one->name);
        printf("' is %s: not an FP4 expert weight\n", hfp4__st_dtype_name(one->dtype));
    }
    if (!one) {
        if (weights == 0 && errors == 0) printf("no FP4 expert weights (I8/U8/F4 with a .scale or _scale_inv tensor)\n");
        if (weights > 0) {
            char label[160];
            snprintf(label, sizeof label, "summary: %lld FP4 expert weights (%lld matrices)", (long long)weights,
                     (long long)total.matrices);
            print_stats(label, &total);
            for (int k = 0; k < KIND_COUNT; k++) {
                if (!per_kind[k]) continue;
                snprintf(label, sizeof label, "  %s, %lld weights", kind_names[k], (long long)per_kind[k]);
                print_stats(label, &by_kind[k]);
            }
            printf("  %lld of %lld chunk-tiles fold; %lld of %lld 32-groups all zero\n",
                   (long long)hfp4__fold_stats_folded(&total), (long long)total.chunk_tiles, (long long)total.zero_groups,
                   (long long)total.k_groups);
        }
        if (errors) printf("%d FP4 expert weight%s could not be read (see the errors above)\n", errors, errors > 1 ? "s" : "");
    }
    hfp4__st_close(f);
    return rc;
}
