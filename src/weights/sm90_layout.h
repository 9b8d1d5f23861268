/*
 * sm90_layout.h - geometry of HFP4_DTYPE_FP4_E2M1_SM90, the repacked FP4 weight layout that hfp4's
 * SM90 kernels load (version HFP4_SM90_WEIGHTS_VERSION = 3). Shared by the CPU repack, the GPU
 * repack, the reference decoder and the kernels, so it is plain C usable from CUDA.
 *
 * Why this layout: the kernels compute D^T = W * A^T with the weights as the register operand (A)
 * of wgmma m64nNk32 (.e4m3). In that operand each thread of a warpgroup holds, per k32 step, the
 * 16 values at rows (g, g+8) of its warp's 16-row slice and K offsets (4t..4t+3, 16+4t..16+4t+3),
 * with g = lane/4, t = lane%4. The repack stores exactly those 16 FP4 values of two consecutive k32
 * steps as one 16-byte chunk per thread, so a warpgroup streams a (64 rows x 64 K) tile as 2 KB of
 * perfectly coalesced 16-byte loads and needs no shuffles.
 *
 * Each 32-bit word holds 4 values of row g and 4 of row g+8 (same K offsets kk+0..3) with the
 * signs placed so that one prmt per row turns magnitudes into FP8 bytes through an 8-entry table
 * and one and-or adds the signs (FlashInfer's "pre-placed signs"):
 *   bits 4j..4j+2      magnitude (3 bits) of row g,   K offset kk+j   (j = 0..3)
 *   bits 16+4j..+2     magnitude of row g+8, K offset kk+j
 *   bit  8j+7          sign of row g,   kk+j      bit 8j+3   sign of row g+8, kk+j
 *
 * Buffer = weights, then (256-byte aligned) scales, then (256-byte aligned) chunk modes:
 *   weights: [G][N_pad/64 tiles][K_pad/64 pairs][128 threads][16 bytes]
 *            thread th: w = th/32, g = (th%32)/4, t = th%4; rows r0 = 64*tile + 16*w + g, r1 = r0 + 8;
 *            step s in {0,1} (K base kb = 64*pair + 32*s): word 2s at K offset kb+4t, word 2s+1 at
 *            kb+16+4t, each as above.
 *   scales (UE8M0): [G][tiles][K_pad/128 chunks][64 rows] uint32:
 *            fast chunk (mode bit 0 clear): bits 4j..4j+3 = off_j in 1..12, bits 16..23 = e_max, so that the
 *            weight is fp4 x 2^(off_j - 6) (exact in e4m3) times 2^(e_max - 133). Groups whose 32
 *            codes are all zero do not count toward e_max and get off = 12.
 *            per-32 chunk (mode bit 0 set): byte j = the UE8M0 exponent of group 4*chunk+j.
 *   scales (FP32):  [G][tiles][chunks][64 rows][4] float, element j = scale of group 4*chunk+j
 *            (every chunk is per-32).
 *   modes: [G][tiles][chunks] uint8: bit 0 clear = fast (every row's non-zero groups within 11
 *            binades of the row's largest), set = per-32 (scale applied after every k32 step: exact,
 *            slower); bit 1 (only with bit 0 clear; on every folded chunk of the tile or on none) = every row of
 *            the tile keeps one e_max for all of K, so the kernels promote every chunk with one FFMA
 *            per accumulator without checking (version 3).
 * N_pad = align(N, 128), K_pad = align(K, 128). Padding rows, padding K and padding groups hold
 * code 0 and scale byte 127 (1.0) / off 12, so they contribute exact zeros.
 */
#ifndef HFP4_SM90_LAYOUT_H
#define HFP4_SM90_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define HFP4_SM90_ROW_TILE 64     /* weight rows per warpgroup tile (wgmma M)            */
#define HFP4_SM90_N_ALIGN 128     /* rows are padded to this (two warpgroups per CTA)     */
#define HFP4_SM90_K_CHUNK 128     /* K per pipeline stage and per packed scale word       */
#define HFP4_SM90_PAIR_BYTES 2048 /* one (64 rows x 64 K) tile: 128 threads x 16 bytes    */
#define HFP4_SM90_FOLD_SPAN 11    /* largest e_max - e_j folded exactly into e4m3 (off >= 1) */
#define HFP4_SM90_MODE_PER32 1    /* chunk-mode bit 0: per-32 scales                      */
#define HFP4_SM90_MODE_ONE_BASE 2 /* chunk-mode bit 1: one e_max per row over all of K     */

typedef struct hfp4_sm90_geometry {
    int64_t groups, n, k;      /* logical                                     */
    int64_t n_pad, k_pad;      /* padded                                      */
    int64_t tiles, pairs;      /* n_pad / 64, k_pad / 64                      */
    int64_t chunks;            /* k_pad / 128                                 */
    int64_t weight_bytes;      /* groups * n_pad * k_pad / 2                  */
    int64_t scale_offset;      /* start of the scale region (256-aligned)     */
    int64_t scale_bytes_per_group;
    int64_t mode_offset;       /* start of the chunk-mode bytes (256-aligned) */
    int64_t total_bytes;
    int32_t scale_fp32;        /* 1: FP32 scales, 0: UE8M0                    */
} hfp4_sm90_geometry;

/* Whether the geometry of (groups, n, k) stays far from int64 overflow: the padded weights below
 * 2^59 bytes (the scales and modes are smaller still) */
static inline int hfp4_sm90_geometry_fits(int64_t groups, int64_t n, int64_t k) {
    const int64_t limit = (int64_t)1 << 59, lim_dim = (int64_t)1 << 40;
    if (groups < 1 || n < 1 || k < 1 || n > lim_dim || k > lim_dim) return 0;
    const int64_t n_pad = (n + HFP4_SM90_N_ALIGN - 1) / HFP4_SM90_N_ALIGN * HFP4_SM90_N_ALIGN;
    const int64_t k_pad = (k + HFP4_SM90_K_CHUNK - 1) / HFP4_SM90_K_CHUNK * HFP4_SM90_K_CHUNK;
    if (n_pad > limit / k_pad) return 0;
    return groups <= limit / (n_pad * k_pad);
}

static inline hfp4_sm90_geometry hfp4_sm90_geometry_make(int64_t groups, int64_t n, int64_t k, int scale_fp32) {
    hfp4_sm90_geometry g;
    g.groups = groups;
    g.n = n;
    g.k = k;
    g.n_pad = (n + HFP4_SM90_N_ALIGN - 1) / HFP4_SM90_N_ALIGN * HFP4_SM90_N_ALIGN;
    g.k_pad = (k + HFP4_SM90_K_CHUNK - 1) / HFP4_SM90_K_CHUNK * HFP4_SM90_K_CHUNK;
    g.tiles = g.n_pad / HFP4_SM90_ROW_TILE;
    g.pairs = g.k_pad / 64;
    g.chunks = g.k_pad / HFP4_SM90_K_CHUNK;
    g.weight_bytes = groups * g.n_pad * g.k_pad / 2;
    g.scale_offset = (g.weight_bytes + 255) / 256 * 256;
    g.scale_fp32 = scale_fp32;
    g.scale_bytes_per_group = g.n_pad * g.chunks * 4 * (scale_fp32 ? 4 : 1);
    g.mode_offset = (g.scale_offset + groups * g.scale_bytes_per_group + 255) / 256 * 256;
    g.total_bytes = g.mode_offset + groups * g.tiles * g.chunks;
    return g;
}

/* Byte offset of the 16-byte chunk of (group, tile, pair, thread) in the weight region. */
static inline int64_t hfp4_sm90_weight_chunk_offset(const hfp4_sm90_geometry *g, int64_t group, int64_t tile,
                                                    int64_t pair, int64_t thread) {
    return (((group * g->tiles + tile) * g->pairs + pair) * 128 + thread) * 16;
}

/* Location of the FP4 value (row n, column k) inside a group: byte offset of its 32-bit word
 * relative to the group's weight start, and the bit positions of its 3-bit magnitude and sign. */
static inline int64_t hfp4_sm90_value_bits(const hfp4_sm90_geometry *g, int64_t n, int64_t k, int *mag_shift,
                                           int *sign_shift) {
    int64_t tile = n / 64, r = n % 64;
    int64_t w = r / 16, rr = r % 16;
    int64_t grow = rr % 8;
    int high_row = rr >= 8;
    int64_t pair = k / 64, kk = k % 64;
    int64_t s = kk / 32, k32 = kk % 32;
    int64_t half = k32 / 16, k16 = k32 % 16;
    int64_t t = k16 / 4;
    int j = (int)(k16 % 4);
    int64_t thread = w * 32 + grow * 4 + t;
    *mag_shift = high_row ? 16 + 4 * j : 4 * j;
    *sign_shift = high_row ? 8 * j + 3 : 8 * j + 7;
    return ((tile * g->pairs + pair) * 128 + thread) * 16 + s * 8 + half * 4;
}

/* Index (in elements: uint32 words for UE8M0, floats for FP32) of the scale of (row n, 32-group j)
 * relative to the start of a group's scales (UE8M0: the row's word for chunk j/4). */
static inline int64_t hfp4_sm90_scale_index(const hfp4_sm90_geometry *g, int64_t n, int64_t j) {
    int64_t tile = n / 64, r = n % 64, chunk = j / 4;
    int64_t word = (tile * g->chunks + chunk) * 64 + r;
    return g->scale_fp32 ? word * 4 + (j % 4) : word;
}

#endif
