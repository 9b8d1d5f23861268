/*
 * hfp4.c - the hfp4 command: demo, bench, verify, info, inspect, repack.
 *
 *   hfp4 demo            a small DeepSeek-V4-shaped FP4 experts layer on the CPU reference, checked;
 *                        where a Hopper GPU is present, V4-Flash's expert GEMMs checked and timed
 *   hfp4 bench [--json]  speed table with baselines timed in the same run (Hopper GPU)
 *   hfp4 verify          the GPU checks of the demo without timing, and V4's FP8-weight GEMMs'
 *   hfp4 info            library version and the GPU (if any)
 *   hfp4 inspect FILE    tensors of a safetensors file and the SM90 fold statistics of its FP4 experts
 *   hfp4 repack IN OUT   FP4 expert weights of a safetensors file into an HFP4SM90 container
 */
#include <stdio.h>
#include <string.h>

#include "hfp4.h"
#include "tool_common.h"

static int usage(FILE *f) {
    fprintf(f,
            "usage: hfp4 <command> [options]\n"
            "  demo            checked DeepSeek-V4-shaped FP4 expert GEMMs (timed on a Hopper GPU)\n"
            "  bench [--json] [--quick] [--iters N] [--replays N] [--tokens T1,T2..] [--gran 32|128]\n"
            "        [--sf-layout k|mn] [--a-scales fp32|ue8m0] [--w-scales narrow|drift] [--seconds-budget S]\n"
            "        [--routing-seed S] [--contiguous-hint rows|none|R] [--l2-flush read|write|none]\n"
            "        [--only SECTION,..] [--dense-shape M,N,K]\n"
            "                  speed vs cuBLASLt FP8/BF16 and the copy rate, same run (Hopper GPU);\n"
            "                  sections: w13 w2 dense sf gran launch graph gemv tp pro moe (default: all)\n"
            "                  and tp-pro (only when named)\n"
            "  verify          GPU kernels vs the CPU reference: FP4 experts, FP8 weights (Hopper GPU)\n"
            "  info            library version and GPU\n"
            "  inspect FILE.safetensors [--tensor NAME]\n"
            "                  tensors, and how much of each FP4 expert weight runs on the fast paths\n"
            "  repack IN.safetensors OUT.bin (--tensor NAME | --groups-from PATTERN)\n"
            "                  FP4 expert weights into the SM90 layout (HFP4SM90 file, docs/CHECKPOINTS.md)\n");
    return f == stderr ? 2 : 0;
}

static int cmd_info(void) {
    printf("hfp4 %s (SM90 weight layout v%d)\n", hfp4_version_string(), HFP4_SM90_WEIGHTS_VERSION);
    hfp4_device_info info;
    hfp4_status st = hfp4_device_query(0, &info);
    if (st != HFP4_OK) {
        printf("GPU: none (%s)\n", hfp4_last_error());
        return 0;
    }
    printf("GPU 0: %s, compute capability %d.%d, %d SMs, %.1f GiB; SM90 kernels: %s\n", info.name, info.cc_major,
           info.cc_minor, info.num_sms, info.global_mem_bytes / 1073741824.0, info.has_sm90_kernels ? "yes" : "no");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage(stderr);
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) return usage(stdout);
    if (!strcmp(cmd, "info")) {
        if (argc > 2) {
            fprintf(stderr, "hfp4 info: unexpected argument '%s' (info takes none)\n", argv[2]);
            return 2;
        }
        return cmd_info();
    }
    if (!strcmp(cmd, "demo")) {
        int rc = hfp4_cmd_demo_cpu(argc - 2, argv + 2);
        if (rc != 0) return rc;
        if (hfp4_have_hopper()) return hfp4_cmd_demo_gpu(argc - 2, argv + 2);
        printf("\nNo Hopper (SM90) GPU here, so no speed figures: the kernels and `hfp4 bench` need an H100/H200.\n"
               "Everything above ran the CPU reference, which is the ground truth the GPU kernels are tested against.\n");
        return 0;
    }
    if (!strcmp(cmd, "bench")) return hfp4_cmd_bench(argc - 2, argv + 2);
    if (!strcmp(cmd, "verify")) return hfp4_cmd_verify(argc - 2, argv + 2);
    if (!strcmp(cmd, "inspect")) return hfp4_cmd_inspect(argc - 2, argv + 2);
    if (!strcmp(cmd, "repack")) return hfp4_cmd_repack(argc - 2, argv + 2);
    fprintf(stderr, "hfp4: unknown command '%s'\n", cmd);
    return usage(stderr);
}
