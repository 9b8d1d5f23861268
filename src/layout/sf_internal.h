/*
 * sf_internal.h - the plan shared by the CPU (C) and GPU (CUDA) halves of the SF layout toolkit.
 *
 * Every public call runs the same three steps: plan (validate the descriptors and arguments and
 * compute the output description; reads no data), bind (check dst against the plan), execute (CPU:
 * check the data, then write; GPU: launch). Planning is pure C shared by both halves, so the CPU
 * and GPU forms accept and reject exactly the same requests.
 */
#ifndef HFP4_SF_INTERNAL_H
#define HFP4_SF_INTERNAL_H

#include "internal.h"
#include "sf_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest mn, sf_k or group row count accepted: keeps offsets and byte counts far from int64_t
 * overflow and lets the GPU kernels index rows with 32-bit grid coordinates. */
#define HFP4__SF_MAX_DIM ((int64_t)1 << 31)
/* Largest output, in 4-byte elements (inputs are bounded by their non-overlapping extent). */
#define HFP4__SF_MAX_OUT_ELEMS ((int64_t)1 << 56)

typedef enum hfp4__sf_op {
    HFP4__SF_OP_NONE = 0,  /* pass-through or empty output: nothing to write        */
    HFP4__SF_OP_MN_MAJOR,  /* 4-byte copy into the MN-major TMA-aligned layout       */
    HFP4__SF_OP_PACK,      /* FP32 -> packed UE8M0 MN-major (broadcast, psum)        */
    HFP4__SF_OP_K_GROUPED, /* FP32 -> K-grouped packed UE8M0                         */
    HFP4__SF_OP_UTCCP      /* int32 row permutation of 128-row chunks                */
} hfp4__sf_op;

typedef struct hfp4__sf_plan {
    hfp4__sf_op op;
    int passthrough;       /* the output is the input                                 */
    hfp4_sf_tensor in;     /* the input, dtype normalized (UE8M0_PACKED -> INT32)     */
    hfp4_sf_tensor out;    /* the output; data is bound by hfp4__sf_bind              */
    size_t bytes;          /* bytes the output needs at dst (0: pass-through/empty)   */
    int64_t in_extent;     /* bytes spanned by the input (0 if empty)                 */
    /* PACK */
    int64_t mn;            /* output rows                                             */
    int32_t gran_mn;       /* output rows per input row                               */
    int has_psum;
    hfp4_sf_psum psum;     /* alignment resolved (never 0)                            */
    /* K_GROUPED */
    hfp4_sf_k_groups kg;
    /* transforms */
    int32_t gran_k;        /* the resolved K granularity                              */
} hfp4__sf_plan;

/* Validates a descriptor (see hfp4_sf_tensor; its data pointer is checked later, by bind) and
 * copies it to *norm with the dtype normalized. `what` names it ("sf"). Sets *extent_bytes to the
 * bytes it spans (0 when empty). */
hfp4_status hfp4__sf_check_tensor(const char *fn, const char *what, const hfp4_sf_tensor *t, hfp4_sf_tensor *norm,
                                  int64_t *extent_bytes);

/* Elements of a tensor (max(G,1) * mn * sf_k). */
int64_t hfp4__sf_numel(const hfp4_sf_tensor *t);

/* The MN-major TMA-aligned description of [(G,) mn, sf_k] with `dtype`, and its bytes. */
void hfp4__sf_mn_major_desc(hfp4_dtype dtype, int32_t num_groups, int64_t mn, int64_t sf_k, hfp4_sf_tensor *out,
                            size_t *bytes);

/* Plans of the primitives (fn names the public call in messages). */
hfp4_status hfp4__sf_plan_mn_major(const char *fn, const hfp4_sf_tensor *sf, hfp4__sf_plan *plan);
hfp4_status hfp4__sf_plan_pack(const char *fn, const hfp4_sf_tensor *sf, int64_t mn, int32_t gran_mn,
                               const hfp4_sf_psum *psum, hfp4__sf_plan *plan);
hfp4_status hfp4__sf_plan_k_grouped(const char *fn, const hfp4_sf_tensor *sf, const hfp4_sf_k_groups *groups,
                                    hfp4__sf_plan *plan);
hfp4_status hfp4__sf_plan_utccp(const char *fn, const hfp4_sf_tensor *sf, hfp4__sf_plan *plan);
hfp4_status hfp4__sf_plan_transform(const char *fn, const hfp4_sf_transform_request *req, hfp4__sf_plan *plan);
hfp4_status hfp4__sf_plan_pair(const char *fn, const hfp4_sf_pair_request *req, hfp4__sf_plan *plan_a,
                               hfp4__sf_plan *plan_b, hfp4_sf_pair_result *res);

/* Query result of a plan: *out and *bytes as the *_query calls report them. */
hfp4_status hfp4__sf_report(const char *fn, const hfp4__sf_plan *plan, hfp4_sf_tensor *out, size_t *bytes);

/* Checks the input's data pointer and dst for the plan (NULL/size/alignment/overlap with the input
 * and with `avoid`, a byte range that must not be touched, e.g. the other operand of a pair) and
 * sets plan->out (the input itself for pass-through). `what` names dst in messages. */
hfp4_status hfp4__sf_bind(const char *fn, const char *what, hfp4__sf_plan *plan, void *dst, size_t dst_bytes,
                          const void *avoid, int64_t avoid_bytes);

/* Binds both outputs of a pair: neither dst may overlap either input or the other dst. */
hfp4_status hfp4__sf_bind_pair(const char *fn, hfp4__sf_plan *plan_a, hfp4__sf_plan *plan_b, void *dst_a,
                               size_t dst_a_bytes, void *dst_b, size_t dst_b_bytes);

/* Validates opts (NULL = defaults): flags limited to HFP4_SF_ROUND_UP. */
hfp4_status hfp4__sf_check_options(const char *fn, const hfp4_sf_options *opts);

/* CPU: checks what only the data can tell (psum and K-group layout contents, UE8M0 exactness);
 * then writes the output. Execute requires a successful check first. */
hfp4_status hfp4__sf_check_data_cpu(const char *fn, const hfp4__sf_plan *plan, const hfp4_sf_options *opts);
void hfp4__sf_execute_cpu(const hfp4__sf_plan *plan, const hfp4_sf_options *opts);

/* GPU (sf_gpu.cu): launches the plan's kernels on `stream` (NO_DEVICE / UNSUPPORTED without an
 * SM90 device, CUDA if a launch fails). A build without CUDA defines it in src/runtime/no_cuda.c. */
hfp4_status hfp4__sf_execute_gpu(const char *fn, const hfp4__sf_plan *plan, const hfp4_sf_options *opts,
                                 hfp4_stream stream);

#ifdef __cplusplus
}
#endif

#endif
