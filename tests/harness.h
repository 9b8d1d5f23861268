/*
 * harness.h - hfp4's small C test harness (libuv/llm.c style, no dependencies).
 *
 *   TEST(name) { CHECK(x == 1); CHECK_STATUS(call(...), HFP4_OK); }
 *
 * Tests register themselves (a constructor per TEST), so a new tests/test_*.c needs no list.
 * Checks never abort: a failing check prints file:line, the expression and the values, marks the
 * test failed and the test goes on. The runner prints "N passed, N failed, N skipped" last and exits
 * non-zero on any failure. Options: --filter SUBSTR, --list, --seed N (also env HFP4_TEST_SEED),
 * --fork (each test in its own process: used for GPU tests, where a fault poisons the context),
 * --devices LIST (GPU tests: each test's body once per listed CUDA device, in order, in one process,
 * e.g. "0,1": what a per-device cache set up on the first device does on the second).
 */
#ifndef HFP4_TEST_HARNESS_H
#define HFP4_TEST_HARNESS_H

#include <stdint.h>
#include <stdio.h>

#include "hfp4.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*hfp4_test_fn)(void);
void hfp4_test_register(const char *name, const char *file, hfp4_test_fn fn);
void hfp4_test_fail(const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void hfp4_test_skip(const char *why);
int hfp4_test_failed(void); /* has the current test failed so far? */
uint64_t hfp4_test_seed(void);
/* --devices: the GPU test binary registers how a device is selected (a constructor in
 * tests/gpu/test_devices.cu); the hook returns 0, or non-zero with a message printed. A binary
 * without one answers --devices with a usage error. (--time-limit covers all of a test's devices.) */
typedef int (*hfp4_test_device_fn)(int device);
void hfp4_test_set_device_hook(hfp4_test_device_fn fn);

/* Deterministic xorshift RNG for test data; seeded from hfp4_test_seed() and a per-test salt. */
typedef struct hfp4_rng { uint64_t s; } hfp4_rng;
static inline uint64_t hfp4_rng_next(hfp4_rng *r) {
    uint64_t x = r->s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return r->s = x;
}
static inline hfp4_rng hfp4_rng_make(uint64_t salt) {
    hfp4_rng r = {hfp4_test_seed() * 0x9E3779B97F4A7C15ull + salt * 0xD1B54A32D192ED03ull + 1};
    for (int i = 0; i < 4; i++) hfp4_rng_next(&r);
    return r;
}
/* uniform in [0, 1) */
static inline double hfp4_rng_uniform(hfp4_rng *r) { return (double)(hfp4_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }
/* standard normal (Box-Muller) */
double hfp4_rng_normal(hfp4_rng *r);

#define TEST(name)                                                                                   \
    static void test_##name(void);                                                                   \
    __attribute__((constructor)) static void register_##name(void) {                                  \
        hfp4_test_register(#name, __FILE__, test_##name);                                            \
    }                                                                                                \
    static void test_##name(void)

#define CHECK(cond)                                                                                  \
    do {                                                                                             \
        if (!(cond)) hfp4_test_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);                         \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                         \
    do {                                                                                             \
        if (!(cond)) hfp4_test_fail(__FILE__, __LINE__, __VA_ARGS__);                                \
    } while (0)

#define CHECK_EQ_I64(a, b)                                                                           \
    do {                                                                                             \
        long long hfp4_a_ = (long long)(a), hfp4_b_ = (long long)(b);                                \
        if (hfp4_a_ != hfp4_b_)                                                                      \
            hfp4_test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, hfp4_a_, hfp4_b_);   \
    } while (0)

/* Checks the exact status and, on mismatch, prints both names and the library's message. */
#define CHECK_STATUS(expr, want)                                                                     \
    do {                                                                                             \
        hfp4_status hfp4_got_ = (expr);                                                              \
        if (hfp4_got_ != (want))                                                                     \
            hfp4_test_fail(__FILE__, __LINE__, "%s: got %s, want %s (last error: %s)", #expr,         \
                           hfp4_status_name(hfp4_got_), hfp4_status_name(want), hfp4_last_error());   \
    } while (0)

/* Checks the status and that the last-error message contains `needle` (for rejections). */
#define CHECK_REJECT(expr, want, needle)                                                             \
    do {                                                                                             \
        hfp4_status hfp4_got_ = (expr);                                                              \
        if (hfp4_got_ != (want))                                                                     \
            hfp4_test_fail(__FILE__, __LINE__, "%s: got %s, want %s (last error: %s)", #expr,         \
                           hfp4_status_name(hfp4_got_), hfp4_status_name(want), hfp4_last_error());   \
        else if (!hfp4_test_contains(hfp4_last_error(), needle))                                     \
            hfp4_test_fail(__FILE__, __LINE__, "%s: message \"%s\" does not mention \"%s\"", #expr,   \
                           hfp4_last_error(), needle);                                                \
    } while (0)
int hfp4_test_contains(const char *haystack, const char *needle);

#define SKIP(why)                                                                                    \
    do {                                                                                             \
        hfp4_test_skip(why);                                                                         \
        return;                                                                                      \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif
