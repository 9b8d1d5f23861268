/*
 * internal.h - helpers shared by hfp4's host C sources (not installed).
 *
 * Every public function reports failure the same way: it records a message naming the offending
 * argument and value in the per-thread last-error buffer and returns a status. The macros below
 * keep that one line per check.
 */
#ifndef HFP4_INTERNAL_H
#define HFP4_INTERNAL_H

#include "hfp4.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records the formatted message as this thread's last error and returns `status`. */
hfp4_status hfp4__fail(hfp4_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* A name or path for a message: s itself, or when it is longer than HFP4__SHOWN_MAX bytes its first
 * HFP4__SHOWN_HEAD and last HFP4__SHOWN_TAIL bytes around "...(N bytes)..." written into buf. Why:
 * names and paths come from files and callers and can be any length; whole, they would push what
 * follows them in a message (the field, the value, the expectation) out of the last-error buffer.
 * Sequences of UTF-8 are not cut. HFP4__SHOWN(s) passes a buffer that lives as long as the
 * enclosing block, for use as a message argument. */
#define HFP4__SHOWN_HEAD 120
#define HFP4__SHOWN_TAIL 60
#define HFP4__SHOWN_MAX (HFP4__SHOWN_HEAD + HFP4__SHOWN_TAIL + 40)
#define HFP4__SHOWN_CAP (HFP4__SHOWN_MAX + 1)
const char *hfp4__shown(const char *s, char buf[HFP4__SHOWN_CAP]);
#define HFP4__SHOWN(s) hfp4__shown((s), (char[HFP4__SHOWN_CAP]){0})

/* Return INVALID_ARGUMENT with a message when `cond` is false. The message should name the
 * function, the argument and its value: HFP4_CHECK_ARG(k > 0, "hfp4_ref_gemm: k = %lld must be > 0", k) */
#define HFP4_CHECK_ARG(cond, ...)                                                                    \
    do {                                                                                             \
        if (!(cond)) return hfp4__fail(HFP4_ERR_INVALID_ARGUMENT, __VA_ARGS__);                      \
    } while (0)

/* Return UNSUPPORTED with a message when `cond` is false (a valid request we cannot serve). */
#define HFP4_REQUIRE(cond, ...)                                                                      \
    do {                                                                                             \
        if (!(cond)) return hfp4__fail(HFP4_ERR_UNSUPPORTED, __VA_ARGS__);                           \
    } while (0)

/* Propagate a non-OK status (the callee already recorded the message). */
#define HFP4_TRY(expr)                                                                               \
    do {                                                                                             \
        hfp4_status hfp4__s = (expr);                                                                \
        if (hfp4__s != HFP4_OK) return hfp4__s;                                                      \
    } while (0)

static inline int64_t hfp4__ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The largest element offset hfp4 computes into a caller's array (1 EiB of bytes; more is a garbage
 * stride, and products of such values would overflow int64) */
#define HFP4_MAX_EXTENT ((int64_t)1 << 60)

/* Whether count items `stride` apart, each `span` long, end at or below HFP4_MAX_EXTENT: (count - 1)
 * * stride + span, evaluated without overflow (count >= 1, stride >= 0, span >= 0). */
static inline int hfp4__extent_ok(int64_t count, int64_t stride, int64_t span) {
    if (count < 1 || stride < 0 || span < 0 || span > HFP4_MAX_EXTENT) return 0;
    return count == 1 || stride <= (HFP4_MAX_EXTENT - span) / (count - 1);
}

/* The span of a [groups][rows][cols] array with row stride ld and group stride stride_group (all in
 * elements), or -1 when it passes HFP4_MAX_EXTENT */
static inline int64_t hfp4__array_span(int64_t groups, int64_t stride_group, int64_t rows, int64_t ld, int64_t cols) {
    if (!hfp4__extent_ok(rows, ld, cols)) return -1;
    const int64_t row_span = (rows - 1) * ld + cols;
    if (!hfp4__extent_ok(groups, stride_group, row_span)) return -1;
    return (groups - 1) * stride_group + row_span;
}
static inline int64_t hfp4__align(int64_t a, int64_t b) { return hfp4__ceil_div(a, b) * b; }

/* Whether the byte ranges [x, x + x_bytes) and [y, y + y_bytes) share a byte (an empty range shares
 * none). Only addresses are compared, so host and device pointers alike can be checked. */
static inline int hfp4__ranges_overlap(const void *x, int64_t x_bytes, const void *y, int64_t y_bytes) {
    if (x == NULL || y == NULL || x_bytes <= 0 || y_bytes <= 0) return 0;
    const uintptr_t a = (uintptr_t)x, b = (uintptr_t)y;
    return a < b + (uintptr_t)y_bytes && b < a + (uintptr_t)x_bytes;
}

/* An environment switch, read once into *cache (-1: not read yet; a caller may also store 0 or 1 there
 * to override it): default_on, on unless `name` is "0"; otherwise on only when it is "1". Threads
 * racing on the first read store the same value. */
int hfp4__env_switch(const char *name, int default_on, int *cache);

/* A three-way environment switch, read once into *cache (-2: not read yet): 1 when `name` is "1", 0
 * when it is "0", -1 (the caller's automatic choice) otherwise, unset included. */
int hfp4__env_tristate(const char *name, int *cache);

/* Whether environment variable `name` is set to exactly `value`, read at each call (the launch
 * plans' comparison switches, which tests and A/Bs flip between calls). */
int hfp4__env_is(const char *name, const char *value);

/* Number of worker threads to use for `requested` (0 = one per online CPU), at most `work_items`. */
int hfp4__thread_count(int requested, int64_t work_items);

/* Runs fn(arg, index) for index in [0, count) on `threads` threads (pthreads; 1 = inline). Returns
 * 0 on success, -1 if threads could not be created (the work then ran inline, still complete). */
int hfp4__parallel_for(int threads, int64_t count, void (*fn)(void *arg, int64_t index), void *arg);

#ifdef __cplusplus
}
#endif

#endif
