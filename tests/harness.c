/*
 * harness.c - the runner behind tests/harness.h.
 */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

enum { MAX_TESTS = 4096 };
static struct {
    const char *name, *file;
    hfp4_test_fn fn;
} tests[MAX_TESTS];
static int num_tests;
static int current_failed, current_skipped;
static int current_fail_lines;
static uint64_t seed = 20261130;

void hfp4_test_register(const char *name, const char *file, hfp4_test_fn fn) {
    if (num_tests < MAX_TESTS) {
        tests[num_tests].name = name;
        tests[num_tests].file = file;
        tests[num_tests].fn = fn;
        num_tests++;
    }
}

void hfp4_test_fail(const char *file, int line, const char *fmt, ...) {
    current_failed = 1;
    if (++current_fail_lines > 20) return; /* one broken loop should not flood the log */
    va_list ap;
    va_start(ap, fmt);
    fprintf(stdout, "    FAIL %s:%d: ", file, line);
    vfprintf(stdout, fmt, ap);
    fprintf(stdout, "\n");
    va_end(ap);
}

void hfp4_test_skip(const char *why) {
    current_skipped = 1;
    fprintf(stdout, "    skip: %s\n", why);
}

static hfp4_test_device_fn device_hook;
void hfp4_test_set_device_hook(hfp4_test_device_fn fn) { device_hook = fn; }

/* The test's body once per device of --devices (none given: once, on whatever device is current).
 * Every listed device runs; the test counts as skipped only if it skipped on all of them, as failed
 * if it failed on any (each device's skip or failure is printed under its "[device N]" line). */
enum { MAX_DEVICES = 8 };
static void run_body(hfp4_test_fn fn, const int *devices, int num_devices) {
    if (num_devices == 0) {
        fn();
        return;
    }
    int skipped_all = 1;
    for (int d = 0; d < num_devices; d++) {
        printf("    [device %d]\n", devices[d]);
        current_skipped = 0;
        if (device_hook(devices[d]) != 0) {
            hfp4_test_fail(__FILE__, __LINE__, "--devices: device %d cannot be selected", devices[d]);
            skipped_all = 0;
            continue;
        }
        fn();
        skipped_all = skipped_all && current_skipped;
    }
    current_skipped = skipped_all && !current_failed;
}

/* "0,1" -> {0, 1}; -1 on anything else (empty items, non-digits, more than MAX_DEVICES) */
static int parse_devices(const char *list, int *devices) {
    int n = 0;
    const char *p = list;
    for (;;) {
        char *end = NULL;
        if (*p < '0' || *p > '9' || n == MAX_DEVICES) return -1;
        const long v = strtol(p, &end, 10);
        if (v > 1024) return -1;
        devices[n++] = (int)v;
        if (*end == '\0') return n;
        if (*end != ',') return -1;
        p = end + 1;
    }
}

int hfp4_test_failed(void) { return current_failed; }
uint64_t hfp4_test_seed(void) { return seed; }

int hfp4_test_contains(const char *haystack, const char *needle) { return strstr(haystack, needle) != NULL; }

double hfp4_rng_normal(hfp4_rng *r) {
    double u1 = hfp4_rng_uniform(r), u2 = hfp4_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static double wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int by_file_then_order(const void *a, const void *b) {
    const char *fa = *(const char *const *)a, *fb = *(const char *const *)b;
    return strcmp(fa, fb);
}

int main(int argc, char **argv) {
    const char *filter = NULL;
    int list = 0, use_fork = 0;
    int devices[MAX_DEVICES], num_devices = 0;
    /* --fork: a test process still running after this many seconds is stopped and counted failed,
     * so a hung kernel names its test and the suite goes on (0: no limit) */
    long time_limit = 600;
    const char *env_seed = getenv("HFP4_TEST_SEED");
    if (env_seed) seed = strtoull(env_seed, NULL, 10);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
        else if (!strcmp(argv[i], "--list")) list = 1;
        else if (!strcmp(argv[i], "--fork")) use_fork = 1;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--devices") && i + 1 < argc) {
            num_devices = parse_devices(argv[++i], devices);
            if (num_devices < 0) {
                fprintf(stderr, "%s: --devices takes up to %d device numbers separated by commas (e.g. 0,1), not '%s'\n",
                        argv[0], MAX_DEVICES, argv[i]);
                return 2;
            }
        }
        else if (!strcmp(argv[i], "--time-limit") && i + 1 < argc) {
            char *end = NULL;
            time_limit = strtol(argv[++i], &end, 10);
            if (end == argv[i] || *end != '\0' || time_limit < 0 || time_limit > 86400) {
                fprintf(stderr, "%s: --time-limit must be 0..86400 seconds, not '%s'\n", argv[0], argv[i]);
                return 2;
            }
        } else {
            fprintf(stderr,
                    "usage: %s [--filter SUBSTR] [--list] [--seed N] [--fork [--time-limit SECONDS]] [--devices 0,1,...]\n",
                    argv[0]);
            return 2;
        }
    }
    (void)by_file_then_order;
    if (num_devices > 0 && !device_hook) {
        fprintf(stderr, "%s: --devices: this test binary has no GPU tests (it cannot select a device)\n", argv[0]);
        return 2;
    }
    int passed = 0, failed = 0, skipped = 0;
    printf("hfp4 tests (seed %llu; replay with --seed or HFP4_TEST_SEED)\n", (unsigned long long)seed);
    for (int i = 0; i < num_tests; i++) {
        if (filter && !strstr(tests[i].name, filter)) continue;
        if (list) {
            printf("%s (%s)\n", tests[i].name, tests[i].file);
            continue;
        }
        current_failed = current_skipped = current_fail_lines = 0;
        hfp4_clear_error();
        const double t0 = wall_seconds();
        if (use_fork) {
            /* NOTE: one process per test, because a CUDA fault poisons the context for every later
             * test of the same process; the parent never touches CUDA. */
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                if (time_limit > 0) alarm((unsigned)time_limit); /* (SIGALRM's default action ends the process) */
                run_body(tests[i].fn, devices, num_devices);
                fflush(stdout);
                _exit(current_failed ? 1 : current_skipped ? 2 : 0);
            }
            int st = 0;
            if (pid < 0 || waitpid(pid, &st, 0) < 0) {
                current_failed = 1;
                printf("    FAIL: could not fork the test process\n");
            } else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) {
                current_failed = 1;
                printf("    FAIL: still running after %ld s (--time-limit): a hang?\n", time_limit);
            } else if (WIFSIGNALED(st)) {
                current_failed = 1;
                printf("    FAIL: the test process died with signal %d\n", WTERMSIG(st));
            } else {
                current_failed = WEXITSTATUS(st) == 1 || WEXITSTATUS(st) > 2;
                current_skipped = WEXITSTATUS(st) == 2;
            }
        } else {
            run_body(tests[i].fn, devices, num_devices);
        }
        fflush(stdout);
        /* (each test's wall time: the GPU suite's whole run has to fit a device call) */
        const double secs = wall_seconds() - t0;
        if (current_failed) {
            failed++;
            printf("FAIL %s (%.1f s)\n", tests[i].name, secs);
        } else if (current_skipped) {
            skipped++;
            printf("skip %s (%.1f s)\n", tests[i].name, secs);
        } else {
            passed++;
            printf("ok   %s (%.1f s)\n", tests[i].name, secs);
        }
    }
    if (!list) printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
