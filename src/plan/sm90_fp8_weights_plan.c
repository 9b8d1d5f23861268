/*
 * sm90_fp8_weights_plan.c - the FP8-weight path's launch rules (sm90_fp8_weights_plan.h), each with
 * the H200 measurements that set it.
 */
#include "sm90_fp8_weights_plan.h"

#include <stdlib.h>
#include <string.h>

#define FW_TILE 128 /* the tile kernel's weight rows (N) a tile */

/* The token tile for m x n: the one with the shorter estimated time, waves of tiles (the grid is
 * persistent, one tile per SM at a time) times a tile's time, the 192-row tile counted 3 % faster
 * per row (H200 8192^3, MN-major scales, 3 interleaved rounds in one call: 955-984 against the
 * overlapped 128-row tile's 941-948 TFLOP/s, bench/RESULTS.md v32; 5 % before the overlap, v27). So
 * large M takes 192 unless its last wave is emptier than 128's (e.g. m = 256 gives 2 token tiles of
 * 192 rows for 256 useful ones). */
int32_t hfp4__sm90_fp8w_pick_tile(int64_t m, int64_t n, int num_sms) {
    const int64_t sms = num_sms > 0 ? num_sms : 1;
    const int64_t tiles_n = (n + FW_TILE - 1) / FW_TILE;
    const int64_t waves128 = ((m + 127) / 128 * tiles_n + sms - 1) / sms;
    const int64_t waves192 = ((m + 191) / 192 * tiles_n + sms - 1) / sms;
    /* waves x rows a tile / speed: 128 w128 against 192 w192 / 1.03, in integers (x 100) */
    return waves192 * 192 * 100 < waves128 * 128 * 103 ? 192 : 128;
}

/* Warps a row group: the fewest that leave each at most 8 K-blocks to stream (two in flight) and give
 * the launch ~1536 warps or more (~12 an SM: enough bytes in flight), at most the CTA's 8, and no more
 * than the K-blocks (a warp without any would only add zeros). Measured at m = 1 (H200,
 * bench/RESULTS.md v46; us, warps a group 1 / 2 / 4 / 8, the rule's choice starred): 7168 x 2048
 * 16.5 / 11.6 / 9.7* / 11.4; 4096 x 4096 27.6 / 16.9 / 12.0 / 10.2*; 32768 x 1024 14.2* / 16.2 / 16.3
 * / 20.3; 2048 x 7168 44.3 / 25.0 / 15.5 / 11.2*; 12288 x 4096 - / 21.5 / 18.2* / 19.0; 24576 x 4096
 * 36.4 / - / 30.9* / 32.5; 6144 x 7168 - / - / 19.0 / 16.5* (the tile kernel: 13.2, 16.8, 17.3, 25.7,
 * 29.9, 48.1, 31.8) */
int32_t hfp4__sm90_fp8_gemv_warps(int64_t n, int64_t kblocks) {
    const int64_t groups = (n + HFP4_FP8_GEMV_ROWS - 1) / HFP4_FP8_GEMV_ROWS;
    int32_t kw = 1;
    while (kw < HFP4_FP8_GEMV_WARPS && 2 * kw <= kblocks && (kblocks > 8 * kw || groups * kw < 1536)) kw *= 2;
    return kw;
}

/* Whether a grouped problem takes the SKIP kernel (idle warpgroups skipped, A's idle half not
 * loaded): where its tiles are mostly single tiles of a few rows, i.e. decode. Contiguous: at most
 * 128 rows of A an expert on average (one tile each); masked: expected_m (else m) at most 128. The
 * measured sides (bench/RESULTS.md v46, V4-Flash FP8): T = 8 gains 12-38 %, T = 4096 (~125 rows an
 * expert after padding) moves -3...+3 %, T = 16384 (~450) loses 7 % on w13; v47 (its idle test made
 * warp-uniform): T = 16384 still -7 % (w13) and -6 % (w2), T = 4096 level, so two kernels. */
static int32_t skip_idle_wanted(const hfp4_gemm_problem *p) {
    const char *env = getenv("HFP4_SM90_FP8_WEIGHTS_SKIP_IDLE");
    if (env && (!strcmp(env, "0") || !strcmp(env, "1"))) return env[0] == '1';
    if (p->grouping == HFP4_GROUPING_MASKED) return (p->expected_m > 0 ? p->expected_m : p->m) <= 128;
    return p->m <= 128 * (int64_t)p->num_groups;
}

/* Whether the few-row kernel takes the call.
 * Dense: m <= 8, or m <= 16 below n = 8192 (bench/RESULTS.md v46: m <= 8 1.2-2.3x the tile kernel;
 * m = 9..16 1.4x at n = 4096, level at 7168, 5 % behind at 12288, where the tile kernel's 96 CTAs
 * fill the SMs); HFP4_SM90_FP8_GEMV=0 keeps the tile kernel.
 * Masked: opt-in (HFP4_SM90_FP8_GEMV_MASKED=1: every masked call of up to HFP4_FP8_GEMV_MAX_GROUPS
 * groups; a group's rows past 8 take further passes over its weights). Measured (v47, V4-Flash FP8):
 * 13-14 % faster than the SKIP tile kernel with 6 live groups (T = 1), 6-22 % slower with 41 or
 * more (T = 8, 32: its 16-byte loads stream ~3.3 TB/s where TMA tiles reach ~4). The host cannot
 * tell those apart (both have expected_m 1; masked_m lives on the device), so it is not a default. */
static int few_rows_wanted(const hfp4_gemm_problem *p) {
    if (p->grouping == HFP4_GROUPING_NONE)
        return (p->m <= 8 || (p->m <= HFP4_FP8_GEMV_MAX_M && p->n < 8192)) && !hfp4__env_is("HFP4_SM90_FP8_GEMV", "0");
    if (p->grouping == HFP4_GROUPING_MASKED)
        return p->num_groups <= HFP4_FP8_GEMV_MAX_GROUPS && hfp4__env_is("HFP4_SM90_FP8_GEMV_MASKED", "1");
    return 0;
}

void hfp4__sm90_fp8w_plan(const hfp4_gemm_problem *p, int num_sms, hfp4_sm90_fp8w_plan *plan) {
    memset(plan, 0, sizeof *plan);
    const int grouped = p->grouping != HFP4_GROUPING_NONE, masked = p->grouping == HFP4_GROUPING_MASKED;
    /* the token tile (hfp4__sm90_fp8w_pick_tile); HFP4_SM90_FP8_WEIGHTS_TILE=128, 192 or 256 forces one
     * (a comparison switch: any other value means the choice; 256 is never chosen: 5 % slower, v40).
     * Grouped: 128 (segments of 128 rows: a tile each). */
    plan->block_m = grouped                                          ? 128
                    : hfp4__env_is("HFP4_SM90_FP8_WEIGHTS_TILE", "256") ? 256
                    : hfp4__env_is("HFP4_SM90_FP8_WEIGHTS_TILE", "192") ? 192
                    : hfp4__env_is("HFP4_SM90_FP8_WEIGHTS_TILE", "128") ? 128
                                                                  : hfp4__sm90_fp8w_pick_tile(p->m, p->n, num_sms);
    /* D through shared memory to TMA stores where D allows: BF16 without C, its rows and start 16-byte
     * aligned, n a multiple of 8 (and masked, each group's start); HFP4_SM90_FP8_WEIGHTS_DTMA=0 keeps
     * the register stores.
     * NOTE: n % 8: the TMA store clips a row at n only to 16 bytes: with n = 389 it wrote columns
     * 389-391 of D's padding (H200, gpu_fp8_weights_dense case 14, bench/RESULTS.md v40) */
    plan->tma_store = plan->block_m != 256 && p->d.dtype == HFP4_DTYPE_BF16 && p->d.c == NULL &&
                      (p->d.ld * 2) % 16 == 0 && p->n % 8 == 0 && (uintptr_t)p->d.data % 16 == 0 &&
                      !hfp4__env_is("HFP4_SM90_FP8_WEIGHTS_DTMA", "0") &&
                      (!masked || p->num_groups == 1 ||
                       ((p->d.stride_group * 2) % 16 == 0 && p->d.stride_group * 2 < ((int64_t)1 << 40)));
    plan->skip_idle = grouped ? skip_idle_wanted(p) : 0;
    plan->kernel = few_rows_wanted(p) ? HFP4_FP8W_FEW_ROWS : HFP4_FP8W_TILES;
    if (plan->kernel == HFP4_FP8W_FEW_ROWS) {
        /* (masked: the live groups are known on the device only; the rule counts six, a decode
         * step's top-6 experts at T = 1). HFP4_SM90_FP8_GEMV_KW=1, 2, 4 or 8 forces it (tests, A/Bs). */
        const char *kw_env = getenv("HFP4_SM90_FP8_GEMV_KW");
        if (kw_env && (!strcmp(kw_env, "1") || !strcmp(kw_env, "2") || !strcmp(kw_env, "4") || !strcmp(kw_env, "8")))
            plan->warps_per_rows = atoi(kw_env);
        else
            plan->warps_per_rows =
                hfp4__sm90_fp8_gemv_warps(masked ? p->n * (p->num_groups < 6 ? p->num_groups : 6) : p->n, p->k / 128);
    }
}
