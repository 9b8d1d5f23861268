/*
 * tool_common.h - entry points of the hfp4 command's subcommands (the files in tools/).
 */
#ifndef HFP4_TOOL_COMMON_H
#define HFP4_TOOL_COMMON_H

#ifdef __cplusplus
extern "C" {
#endif

int hfp4_cmd_bench(int argc, char **argv);    /* bench.cu: needs a Hopper GPU                */
int hfp4_cmd_demo_gpu(int argc, char **argv); /* demo_gpu.cu: checked V4 expert GEMMs + speed */
int hfp4_cmd_demo_cpu(int argc, char **argv); /* demo_cpu.c: CPU reference on a small problem */
int hfp4_cmd_verify(int argc, char **argv);   /* demo_gpu.cu: the GPU checks alone            */
int hfp4_verify_fp8_weights(void);            /* verify_fp8.cu: the FP8-weight GEMMs' checks; failures */
int hfp4_have_hopper(void);                   /* demo_gpu.cu: 1 if device 0 is SM90          */
int hfp4_cmd_inspect(int argc, char **argv);  /* cmd_inspect.c: safetensors tensors + fold stats */
int hfp4_cmd_repack(int argc, char **argv);   /* cmd_repack.c: FP4 experts -> HFP4SM90 file    */

#ifdef __cplusplus
}
#endif

#endif
