/*
 * no_cuda_tools.c - the GPU subcommands for a build without the CUDA toolkit (compiled only when
 * nvcc is absent): they say so and exit with status 3.
 */
#include <stdio.h>

#include "tool_common.h"

int hfp4_have_hopper(void) { return 0; }

static int no_gpu(const char *what) {
    fprintf(stderr, "hfp4 %s: this build has no CUDA (nvcc was not found at build time); it needs a Hopper GPU\n", what);
    return 3;
}

int hfp4_cmd_bench(int argc, char **argv) { (void)argc; (void)argv; return no_gpu("bench"); }
int hfp4_cmd_verify(int argc, char **argv) { (void)argc; (void)argv; return no_gpu("verify"); }
int hfp4_cmd_demo_gpu(int argc, char **argv) { (void)argc; (void)argv; return no_gpu("demo"); }
