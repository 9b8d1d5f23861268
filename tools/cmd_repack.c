/*
 * cmd_repack.c - `hfp4 repack IN.safetensors OUT.bin (--tensor NAME | --groups-from PATTERN)`:
 * one FP4 expert weight (a stacked [E, N, K/2] tensor gives G = E groups), or the per-expert
 * weights that PATTERN's '*' numbers (groups = experts first..last), repacked into the SM90
 * layout and written as an HFP4SM90 container (docs/CHECKPOINTS.md).
 *
 * Exit status: 0 ok; 2 usage or bad input (the message names the argument or tensor); 1 other
 * errors (I/O, memory).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/checkpoint/repack_experts.h"
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
static int repack_usage_to(FILE *f) {
    fprintf(f,
            "usage: hfp4 repack IN.safetensors OUT.bin --tensor NAME\n"
            "       hfp4 repack IN.safetensors OUT.bin --groups-from PATTERN\n"
            "  --tensor NAME          one FP4 expert weight (3-D stacked experts become the groups)\n"
            "  --groups-from PATTERN  per-expert weights whose names match PATTERN, '*' = the expert number,\n"
            "                         e.g. 'layers.3.ffn.experts.*.w1.weight' (numbers must be consecutive)\n");
    return 2;
}

static int repack_usage(void) { return repack_usage_to(stderr); }

int hfp4_cmd_repack(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *tensor = NULL, *pattern = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            repack_usage_to(stdout);
            return 0;
        }
        int is_tensor = !strcmp(argv[i], "--tensor"), is_groups = !strcmp(argv[i], "--groups-from");
        if (is_tensor || is_groups) {
            if (i + 1 >= argc) {
                fprintf(stderr, "hfp4 repack: %s needs a value\n", argv[i]);
                return repack_usage();
            }
            const char **slot = is_tensor ? &tensor : &pattern;
            if (*slot) {
                fprintf(stderr, "hfp4 repack: %s given twice\n", argv[i]);
                return repack_usage();
            }
            *slot = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "hfp4 repack: unknown option '%s'\n", argv[i]);
            return repack_usage();
        } else if (!in) {
            in = argv[i];
        } else if (!out) {
            out = argv[i];
        } else {
            fprintf(stderr, "hfp4 repack: unexpected argument '%s'\n", argv[i]);
            return repack_usage();
        }
    }
    if (!in || !out) {
        fprintf(stderr, "hfp4 repack: missing %s\n", !in ? "IN.safetensors and OUT.bin" : "OUT.bin");
        return repack_usage();
    }
    if (!tensor == !pattern) {
        fprintf(stderr, "hfp4 repack: give exactly one of --tensor NAME and --groups-from PATTERN\n");
        return repack_usage();
    }

    hfp4__st_file *f = NULL;
    hfp4_status st = hfp4__st_open(in, &f);
    if (st != HFP4_OK) {
        print_error(stderr, "hfp4 repack: ");
        return exit_code(st);
    }
    hfp4__fp4_expert single, *parts = NULL;
    int32_t count = 0;
    int64_t first = 0;
    if (tensor) {
        st = hfp4__fp4_expert_pair(f, tensor, &single);
        if (st != HFP4_OK) print_error(stderr, "hfp4 repack: --tensor: ");
        parts = &single;
        count = 1;
    } else {
        st = hfp4__fp4_expert_match(f, pattern, &parts, &count, &first);
        if (st != HFP4_OK) print_error(stderr, "hfp4 repack: --groups-from: ");
    }
    hfp4__repack_result res;
    if (st == HFP4_OK) {
        st = hfp4__repack_experts_to_file(f, parts, count, out, &res);
        if (st != HFP4_OK) print_error(stderr, "hfp4 repack: ");
    }
    if (st == HFP4_OK) {
        const hfp4__sm90_container *h = &res.header;
        hfp4__st_fputs_printable(stdout, tensor ? tensor : pattern); /* (names as the file spells them) */
        if (!tensor) printf(" (experts %lld..%lld)", (long long)first, (long long)(first + count - 1));
        printf(" -> ");
        hfp4__st_fputs_printable(stdout, out);
        printf(": G %d, N %lld, K %lld, %s scales, SM90 layout v%u, %llu bytes + %d-byte header\n",
               (int)h->groups, (long long)h->n, (long long)h->k, hfp4_dtype_name(h->scale_dtype), h->layout_version,
               (unsigned long long)h->bytes, HFP4__SM90_CONTAINER_HEADER_BYTES);
        printf("%.1f %% of 128-K chunks fold (fast path): %lld of %lld chunk-tiles; %.1f %% of tiles one-base "
               "(look-ahead path): %lld of %lld\n",
               res.chunk_tiles ? 100.0 * res.folded / res.chunk_tiles : 0.0, (long long)res.folded,
               (long long)res.chunk_tiles, res.tiles ? 100.0 * res.one_base / res.tiles : 0.0, (long long)res.one_base,
               (long long)res.tiles);
    }
    if (parts != &single) free(parts);
    hfp4__st_close(f);
    return st == HFP4_OK ? 0 : exit_code(st);
}
