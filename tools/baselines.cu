/*
 * baselines.cu - see baselines.h.
 *
 * cuBLASLt is reached only through dlopen/dlsym: <cublasLt.h> is included for its types and enums
 * (and decltype of its prototypes), never for a call, so nothing here needs -lcublasLt and the hfp4
 * command still starts where cuBLAS is absent. Calling a cublasLt* function directly by mistake
 * shows up as an undefined reference when build/hfp4 is linked.
 *
 * Self-check (on an H100/H200; prints the three baselines for one shape):
 *   make build/obj/tools/baselines.cu.o && cat > /tmp/bl.c <<'EOF'
 *   #include <stdio.h>
 *   #include "baselines.h"
 *   int main(void) {
 *       char err[2048]; const char *info; double us, gbps; int rc;
 *       rc = baseline_cublaslt_info(&info, err, sizeof err); printf("lt rc=%d %s %s\n", rc, info, err);
 *       rc = baseline_copy_gbps((size_t)1 << 30, 50, &gbps, &us);
 *       printf("copy rc=%d %.0f GB/s %.1f us %s\n", rc, gbps, us, baseline_last_error());
 *       rc = baseline_cublaslt_fp8_rowwise(4096, 4096, 4096, 50, &us, err, sizeof err);
 *       printf("fp8 rc=%d %.1f us %.0f TFLOPS [%s]\n", rc, us, 2.0 * 4096 * 4096 * 4096 / us * 1e-6, err);
 *       rc = baseline_cublaslt_bf16(4096, 4096, 4096, 50, &us, err, sizeof err);
 *       printf("bf16 rc=%d %.1f us %.0f TFLOPS [%s]\n", rc, us, 2.0 * 4096 * 4096 * 4096 / us * 1e-6, err);
 *       return 0;
 *   }
 *   EOF
 *   gcc -Itools /tmp/bl.c build/obj/tools/baselines.cu.o -o /tmp/bl -L/usr/local/cuda/lib64 \
 *       -lcudart_static -lstdc++ -ldl -lrt -lpthread -lm && /tmp/bl
 * Seen on an H200 (cuBLASLt 13.1): copy 1 GiB ~4230 GB/s (read + write); 4096^3 FP8 row-wise
 * ~1300 TFLOPS, BF16 ~740-800 TFLOPS; rc=0 with an empty note. Without a GPU every call returns
 * BASELINE_UNAVAILABLE with a message; where no cuBLASLt can be found, "cuBLASLt not found: tried ...".
 * Each GEMM baseline also checks 64 sampled outputs against a double-precision dot product on the
 * GPU before timing, so a wrong layout or scale mapping fails instead of timing the wrong thing.
 */
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <glob.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "baselines.h"

/* ------------------------------------------------------------------------------------------- */
/* Errors                                                                                       */
/* ------------------------------------------------------------------------------------------- */

static __thread char g_last_error[2048];

static void appendf(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void appendf(char *buf, size_t cap, const char *fmt, ...) {
    size_t len = strnlen(buf, cap);
    if (len + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
}

/* Writes the message to `err` (when given) and to the per-thread last error. */
static void seterr(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
    va_end(ap);
    if (err && errlen) snprintf(err, errlen, "%s", g_last_error);
}

static void clearerr_out(char *err, size_t errlen) {
    g_last_error[0] = '\0';
    if (err && errlen) err[0] = '\0';
}

const char *baseline_last_error(void) {
    return g_last_error;
}

/* No driver or no GPU is the normal case on a CPU box: report it as "unavailable", not a failure. */
static int cuda_rc(cudaError_t e) {
    return (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice ||
            e == cudaErrorCallRequiresNewerDriver)
               ? BASELINE_UNAVAILABLE
               : BASELINE_ERR;
}

/* Needs in scope: fn (const char *), rc, err, errlen, and a `done:` cleanup label. */
#define BL_CUDA(call)                                                                                                  \
    do {                                                                                                               \
        cudaError_t bl_e_ = (call);                                                                                    \
        if (bl_e_ != cudaSuccess) {                                                                                    \
            seterr(err, errlen, "%s: %s failed: %s (%s)", fn, #call, cudaGetErrorName(bl_e_),                          \
                   cudaGetErrorString(bl_e_));                                                                         \
            rc = cuda_rc(bl_e_);                                                                                       \
            goto done;                                                                                                 \
        }                                                                                                              \
    } while (0)

static int require_device(const char *fn, char *err, size_t errlen) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        seterr(err, errlen, "%s: no usable CUDA device (%s)", fn,
               e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount reported 0 devices");
        return BASELINE_UNAVAILABLE;
    }
    return BASELINE_OK;
}

/* ------------------------------------------------------------------------------------------- */
/* cuBLASLt, loaded at run time                                                                  */
/* ------------------------------------------------------------------------------------------- */

typedef struct lt_api {
    void *lib;
    char path[1024];
    size_t version;
    decltype(&cublasLtCreate) create;
    decltype(&cublasLtDestroy) destroy;
    decltype(&cublasLtGetVersion) get_version;
    decltype(&cublasLtMatmulDescCreate) desc_create;
    decltype(&cublasLtMatmulDescDestroy) desc_destroy;
    decltype(&cublasLtMatmulDescSetAttribute) desc_set;
    decltype(&cublasLtMatrixLayoutCreate) layout_create;
    decltype(&cublasLtMatrixLayoutDestroy) layout_destroy;
    decltype(&cublasLtMatmulPreferenceCreate) pref_create;
    decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy;
    decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set;
    decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic;
    decltype(&cublasLtMatmul) matmul;
    decltype(&cublasLtGetStatusString) status_string; /* optional: only for messages */
} lt_api;

static lt_api g_lt;
static int g_lt_state; /* 0: not tried, 1: loaded, -1: failed (g_lt_error says why) */
static char g_lt_error[4096];
static char g_lt_info[1200];
static pthread_mutex_t g_lt_mutex = PTHREAD_MUTEX_INITIALIZER;

static const char *lt_status(cublasStatus_t s) {
    static __thread char buf[64];
    if (g_lt.status_string) {
        const char *str = g_lt.status_string(s);
        if (str) return str;
    }
    snprintf(buf, sizeof buf, "cublasStatus %d", (int)s);
    return buf;
}

/* Resolves every entry point of `h` into g_lt; on a missing symbol says which (an old cuBLASLt). */
static int lt_resolve(void *h, const char *path, char *why, size_t whylen) {
    lt_api a;
    memset(&a, 0, sizeof a);
#define BL_SYM(field, name)                                                                                            \
    do {                                                                                                               \
        *(void **)&a.field = dlsym(h, #name);                                                                          \
        if (!a.field) {                                                                                                \
            snprintf(why, whylen, "%s lacks %s", path, #name);                                                         \
            return 0;                                                                                                  \
        }                                                                                                              \
    } while (0)
    BL_SYM(create, cublasLtCreate);
    BL_SYM(destroy, cublasLtDestroy);
    BL_SYM(get_version, cublasLtGetVersion);
    BL_SYM(desc_create, cublasLtMatmulDescCreate);
    BL_SYM(desc_destroy, cublasLtMatmulDescDestroy);
    BL_SYM(desc_set, cublasLtMatmulDescSetAttribute);
    BL_SYM(layout_create, cublasLtMatrixLayoutCreate);
    BL_SYM(layout_destroy, cublasLtMatrixLayoutDestroy);
    BL_SYM(pref_create, cublasLtMatmulPreferenceCreate);
    BL_SYM(pref_destroy, cublasLtMatmulPreferenceDestroy);
    BL_SYM(pref_set, cublasLtMatmulPreferenceSetAttribute);
    BL_SYM(heuristic, cublasLtMatmulAlgoGetHeuristic);
    BL_SYM(matmul, cublasLtMatmul);
#undef BL_SYM
    *(void **)&a.status_string = dlsym(h, "cublasLtGetStatusString");
    a.lib = h;
    snprintf(a.path, sizeof a.path, "%s", path);
    a.version = a.get_version();
    g_lt = a;
    return 1;
}

/* dlopens `name` (a soname for the loader's search path, or a path) and resolves it. Paths that do
 * not exist are skipped silently; other failures are recorded in `notes` for the final message. */
static int lt_try(const char *name, char *notes, size_t noteslen) {
    struct stat st;
    if (strchr(name, '/') && stat(name, &st) != 0) return 0;
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        /* "cannot open shared object file" for a bare soname is the expected miss: not worth listing */
        if (strchr(name, '/')) appendf(notes, noteslen, "; %s: %s", name, e ? e : "dlopen failed");
        return 0;
    }
    char why[1200];
    if (!lt_resolve(h, name, why, sizeof why)) {
        appendf(notes, noteslen, "; %s", why);
        dlclose(h);
        return 0;
    }
    return 1;
}

/* Tries dir/libcublasLt.so.13, .so.12, .so, then any dir/libcublasLt.so.* (newest name first). */
static int lt_try_dir(const char *dir, char *notes, size_t noteslen) {
    static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
    char path[1200];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (lt_try(path, notes, noteslen)) return 1;
    }
    snprintf(path, sizeof path, "%s/libcublasLt.so.*", dir);
    glob_t gl;
    int found = 0;
    if (glob(path, 0, NULL, &gl) == 0) {
        for (size_t i = gl.gl_pathc; i-- > 0 && !found;) found = lt_try(gl.gl_pathv[i], notes, noteslen);
        globfree(&gl);
    }
    return found;
}

/* Expands a directory pattern (glob(3)) and tries each match. */
static int lt_try_dir_pattern(const char *pattern, char *notes, size_t noteslen) {
    glob_t gl;
    int found = 0;
    if (glob(pattern, GLOB_ONLYDIR, NULL, &gl) == 0) {
        for (size_t i = 0; i < gl.gl_pathc && !found; i++) found = lt_try_dir(gl.gl_pathv[i], notes, noteslen);
        globfree(&gl);
    }
    return found;
}

/* buf = $var + suffix when $var is set and non-empty; NULL otherwise. */
static const char *env_path(char *buf, size_t cap, const char *var, const char *suffix) {
    const char *v = getenv(var);
    if (!v || !v[0]) return NULL;
    buf[0] = '\0';
    appendf(buf, cap, "%s%s", v, suffix);
    return buf;
}

/* Appends `dir` (if non-null and not yet listed): CUDA_HOME is often /usr/local/cuda itself. */
static void add_unique(const char **list, int *n, const char *dir) {
    if (!dir) return;
    for (int i = 0; i < *n; i++)
        if (strcmp(list[i], dir) == 0) return;
    list[(*n)++] = dir;
}

static int lt_load_locked(void) {
    char notes[3000] = "";
    char pattern[1200];
    const char *env = getenv("HFP4_CUBLASLT_PATH");

    /* 1. An explicit choice wins: HFP4_CUBLASLT_PATH, colon-separated files or directories. */
    if (env && env[0]) {
        char list[2048];
        snprintf(list, sizeof list, "%s", env);
        char *save = NULL;
        for (char *tok = strtok_r(list, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
            struct stat st;
            if (stat(tok, &st) == 0 && S_ISDIR(st.st_mode)) {
                if (lt_try_dir(tok, notes, sizeof notes)) return 1;
            } else if (stat(tok, &st) == 0) {
                if (lt_try(tok, notes, sizeof notes)) return 1;
            } else {
                appendf(notes, sizeof notes, "; HFP4_CUBLASLT_PATH entry %s does not exist", tok);
            }
        }
    }
    /* 2. The loader's own search (LD_LIBRARY_PATH, ldconfig): newest major first. */
    if (lt_try("libcublasLt.so.13", notes, sizeof notes) || lt_try("libcublasLt.so.12", notes, sizeof notes) ||
        lt_try("libcublasLt.so", notes, sizeof notes))
        return 1;

    /* 3. Toolkits and Python wheels (torch pulls cuBLAS in as nvidia-cublas-cu12 -> nvidia/cublas/lib,
     *    or the CUDA 13 wheels -> nvidia/cu13/lib). */
    static const char *const wheel_dirs[] = {"nvidia/cu13/lib", "nvidia/cublas/lib"};
    const char *prefixes[16];
    int np = 0;
    /* python prefixes under which site-packages/dist-packages live ("python3*" also matches "python3") */
    char venv_p[1100], conda_p[1100], home_p[1100];
    if (env_path(venv_p, sizeof venv_p, "VIRTUAL_ENV", "/lib/python3*/site-packages")) prefixes[np++] = venv_p;
    if (env_path(conda_p, sizeof conda_p, "CONDA_PREFIX", "/lib/python3*/site-packages")) prefixes[np++] = conda_p;
    if (env_path(home_p, sizeof home_p, "HOME", "/.local/lib/python3*/site-packages")) prefixes[np++] = home_p;
    prefixes[np++] = "/usr/local/lib/python3*/dist-packages";
    prefixes[np++] = "/usr/local/lib/python3*/site-packages";
    prefixes[np++] = "/usr/lib/python3*/dist-packages";
    prefixes[np++] = "/usr/lib/python3*/site-packages";
    prefixes[np++] = "/opt/conda/lib/python3*/site-packages";
    prefixes[np++] = "/usr/local/lib64/python3*/site-packages";

    const char *toolkit_dirs[8];
    char ch[1100], cp[1100], cl[1100];
    int nt = 0;
    add_unique(toolkit_dirs, &nt, env_path(ch, sizeof ch, "CUDA_HOME", "/lib64"));
    add_unique(toolkit_dirs, &nt, env_path(cp, sizeof cp, "CUDA_PATH", "/lib64"));
    add_unique(toolkit_dirs, &nt, env_path(cl, sizeof cl, "CONDA_PREFIX", "/lib")); /* conda's cuda-toolkit */
    add_unique(toolkit_dirs, &nt, "/usr/local/cuda/lib64");
    add_unique(toolkit_dirs, &nt, "/usr/local/cuda/targets/x86_64-linux/lib");
    add_unique(toolkit_dirs, &nt, "/usr/local/cuda-1[23]*/targets/x86_64-linux/lib");
    add_unique(toolkit_dirs, &nt, "/usr/lib/x86_64-linux-gnu");

    for (int p = 0; p < np; p++)
        for (size_t w = 0; w < sizeof wheel_dirs / sizeof wheel_dirs[0]; w++) {
            snprintf(pattern, sizeof pattern, "%s/%s", prefixes[p], wheel_dirs[w]);
            if (lt_try_dir_pattern(pattern, notes, sizeof notes)) return 1;
        }
    for (int t = 0; t < nt; t++)
        if (lt_try_dir_pattern(toolkit_dirs[t], notes, sizeof notes)) return 1;

    /* Nothing loaded: name everything that was searched, so the fix is obvious. */
    snprintf(g_lt_error, sizeof g_lt_error,
             "cuBLASLt not found: tried HFP4_CUBLASLT_PATH (%s), libcublasLt.so.13/.so.12/.so on the loader path",
             env && env[0] ? env : "unset");
    for (int p = 0; p < np; p++) appendf(g_lt_error, sizeof g_lt_error, ", %s/nvidia/{cu13,cublas}/lib", prefixes[p]);
    for (int t = 0; t < nt; t++) appendf(g_lt_error, sizeof g_lt_error, ", %s", toolkit_dirs[t]);
    appendf(g_lt_error, sizeof g_lt_error, "%s; set HFP4_CUBLASLT_PATH to the directory holding libcublasLt.so.*",
            notes);
    return 0;
}

/* Loads cuBLASLt once per process (later calls reuse the result, success or failure). */
static int lt_load(const char *fn, char *err, size_t errlen) {
    pthread_mutex_lock(&g_lt_mutex);
    if (g_lt_state == 0) {
        if (lt_load_locked()) {
            g_lt_state = 1;
            snprintf(g_lt_info, sizeof g_lt_info, "%s (version %zu)", g_lt.path, g_lt.version);
        } else {
            g_lt_state = -1;
        }
    }
    int ok = g_lt_state == 1;
    pthread_mutex_unlock(&g_lt_mutex);
    if (!ok) {
        seterr(err, errlen, "%s: %s", fn, g_lt_error);
        return BASELINE_UNAVAILABLE;
    }
    return BASELINE_OK;
}

int baseline_cublaslt_info(const char **info, char *err, size_t errlen) {
    clearerr_out(err, errlen);
    int rc = lt_load("baseline_cublaslt_info", err, errlen);
    if (info) *info = rc == BASELINE_OK ? g_lt_info : "";
    return rc;
}

/* ------------------------------------------------------------------------------------------- */
/* Device helpers: random fill, spin, sampled check                                              */
/* ------------------------------------------------------------------------------------------- */

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* e4m3 with exponent field 6..8 (magnitudes 0.5 .. 3.75) and a random sign: never 0, never NaN,
 * and a k-long dot product stays far inside BF16's range. */
__global__ void fill_fp8_kernel(uint8_t *p, size_t count, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t h = mix64(i ^ (seed << 40));
        uint32_t sign = (uint32_t)(h >> 63), exp = 6 + (uint32_t)((h >> 8) % 3), man = (uint32_t)(h & 7);
        p[i] = (uint8_t)((sign << 7) | (exp << 3) | man);
    }
}

/* BF16 with magnitude in [0.25, 1) and a random sign: never 0. */
__global__ void fill_bf16_kernel(__nv_bfloat16 *p, size_t count, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t h = mix64(i ^ (seed << 40));
        float u = (float)(h >> 40) * (1.0f / 16777216.0f);
        p[i] = __float2bfloat16((h & 1) ? -(0.25f + 0.75f * u) : (0.25f + 0.75f * u));
    }
}

/* Scales in [0.5, 1.5): distinct per row, so a swapped row/column mapping fails the check. */
__global__ void fill_scale_kernel(float *p, size_t count, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        p[i] = 0.5f + (float)(mix64(i ^ (seed << 40)) >> 40) * (1.0f / 16777216.0f);
}

/* Holds the stream for `ns` nanoseconds so the host can queue a whole batch of timed launches
 * behind it: each launch is then timed back to back on the GPU, not at the host's launch rate. */
__global__ void spin_kernel(uint64_t ns) {
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

enum { CHECK_SAMPLES = 64, CHECK_THREADS = 256 };

__device__ __forceinline__ double load_ab(const void *p, int64_t idx, int fp8) {
    if (fp8) {
        __nv_fp8_e4m3 v;
        v.__x = ((const uint8_t *)p)[idx];
        return (double)(float)v;
    }
    return (double)__bfloat162float(((const __nv_bfloat16 *)p)[idx]);
}

/* One block per sample (i, j): ref = sa[i] * sb[j] * sum_k A[i,k] B[j,k] in double, and the sum of
 * |terms| (the scale of rounding error). Scale strides: 1 = per row, 0 = one scale, null = 1. */
__global__ void check_kernel(const void *a, const void *b, int fp8, const float *sa, int sa_stride, const float *sb,
                             int sb_stride, const __nv_bfloat16 *d, int64_t m, int64_t n, int64_t k, double *ref,
                             double *abs_sum, float *got) {
    __shared__ double s_sum[CHECK_THREADS], s_abs[CHECK_THREADS];
    int s = blockIdx.x;
    int64_t i, j;
    if (s < 4) { /* the corners catch off-by-one layouts */
        i = (s & 1) ? m - 1 : 0;
        j = (s & 2) ? n - 1 : 0;
    } else {
        uint64_t h = mix64(0x5EEDull * (uint64_t)s);
        i = (int64_t)(h % (uint64_t)m);
        j = (int64_t)((h >> 32) % (uint64_t)n);
    }
    double sum = 0, mag = 0;
    for (int64_t kk = threadIdx.x; kk < k; kk += blockDim.x) {
        double t = load_ab(a, i * k + kk, fp8) * load_ab(b, j * k + kk, fp8);
        sum += t;
        mag += fabs(t);
    }
    s_sum[threadIdx.x] = sum;
    s_abs[threadIdx.x] = mag;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) {
            s_sum[threadIdx.x] += s_sum[threadIdx.x + w];
            s_abs[threadIdx.x] += s_abs[threadIdx.x + w];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        double scale = (sa ? (double)sa[i * sa_stride] : 1.0) * (sb ? (double)sb[j * sb_stride] : 1.0);
        ref[s] = s_sum[0] * scale;
        abs_sum[s] = s_abs[0] * fabs(scale);
        got[s] = __bfloat162float(d[i * n + j]);
    }
}

static unsigned fill_blocks(size_t count) {
    size_t b = (count + 255) / 256;
    return (unsigned)(b < 4096 ? (b ? b : 1) : 4096);
}

/* ------------------------------------------------------------------------------------------- */
/* Timing                                                                                       */
/* ------------------------------------------------------------------------------------------- */

typedef int (*launch_fn)(void *ctx, cudaStream_t stream, char *err, size_t errlen);

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static baseline_clock_reader clock_reader;
static int last_mhz, last_power_w; /* (the bench's thread only, as the timing itself) */

void baseline_set_clock_reader(baseline_clock_reader fn) { clock_reader = fn; }

static baseline_energy_reader energy_reader;
static double energy_window_ms, last_energy_mj, last_sustained_us, last_median_us;
void baseline_set_energy_reader(baseline_energy_reader fn, double window_ms) {
    energy_reader = window_ms > 0 ? fn : NULL;
    energy_window_ms = window_ms;
}
double baseline_last_energy_mj(void) { return last_energy_mj; }
double baseline_last_sustained_us(void) { return last_sustained_us; }
double baseline_last_median_us(void) { return last_median_us; }
void baseline_last_clock(int *sm_mhz, int *power_w) {
    *sm_mhz = last_mhz;
    *power_w = last_power_w;
}

int baseline_energy_window(const char *fn, baseline_window_launch launch, void *ctx, void *stream_v, double median_us,
                           double window_ms, baseline_energy_reader reader, double *mj, double *sustained_us,
                           char *err, size_t errlen) {
    cudaStream_t stream = (cudaStream_t)stream_v;
    cudaEvent_t ev[2] = {NULL, NULL};
    int nev = 0, rc = BASELINE_OK;
    unsigned long long e0 = 0, e1 = 0;
    float ms = 0;
    *mj = *sustained_us = 0;
    if (!reader || window_ms <= 0 || median_us < 200.0) return BASELINE_OK;
    const int n = (int)fmin(5000.0, fmax(5.0, window_ms * 1e3 / median_us));
    BL_CUDA(cudaStreamSynchronize(stream));
    if (!reader(&e0)) return BASELINE_OK;
    for (nev = 0; nev < 2; nev++) BL_CUDA(cudaEventCreate(&ev[nev]));
    BL_CUDA(cudaEventRecord(ev[0], stream));
    for (int j = 0; j < n; j++)
        if ((rc = launch(ctx, stream)) != 0) goto done;
    BL_CUDA(cudaEventRecord(ev[1], stream));
    BL_CUDA(cudaStreamSynchronize(stream));
    if (reader(&e1) && e1 > e0) {
        *mj = (double)(e1 - e0) / n;
        /* (the window's mean launch time: the rate it sustains at the power cap, next to the timed
         * median; on the H200 the two agree within a few %) */
        BL_CUDA(cudaEventElapsedTime(&ms, ev[0], ev[1]));
        *sustained_us = (double)ms * 1e3 / n;
    }
done:
    if (rc != BASELINE_OK) {
        cudaStreamSynchronize(stream); /* nothing in flight when the caller frees buffers */
        *mj = *sustained_us = 0;
    }
    for (int e = 0; e < nev; e++) cudaEventDestroy(ev[e]);
    return rc;
}

/* A baseline's launch (with its error buffer) as the energy window's launch */
typedef struct baseline_window_ctx {
    launch_fn launch;
    void *ctx;
    char *err;
    size_t errlen;
} baseline_window_ctx;
static int baseline_window_step(void *c, void *stream) {
    baseline_window_ctx *w = (baseline_window_ctx *)c;
    return w->launch(w->ctx, (cudaStream_t)stream, w->err, w->errlen);
}

typedef struct clock_sample {
    int mhz, power_w;
} clock_sample;
static int by_sample_mhz(const void *x, const void *y) {
    return ((const clock_sample *)x)->mhz - ((const clock_sample *)y)->mhz;
}

/* Median GPU time of one launch, in microseconds. Warm-up first (module load, clocks up, a power
 * state of its own: at least 3 launches and about 100 ms of work, at most 1000 launches, as
 * bench_time_launches settles the hfp4 rows of >= 1 ms), then batches of launches each bracketed by its own pair of
 * events, queued behind a spin kernel so the GPU never waits on the host between them. */
static int time_median_us(const char *fn, launch_fn launch, void *ctx, cudaStream_t stream, int iters,
                          double *median_us, char *err, size_t errlen) {
    enum { BATCH = 64, MAX_SAMPLES = 64 };
    const uint64_t spin_ns_per_launch = 40000; /* > host cost of one launch + two event records */
    cudaEvent_t ev[2 * BATCH];
    int nev = 0, rc = BASELINE_OK, lrc;
    double *times = (double *)malloc((size_t)iters * sizeof(double));
    float ms = 0;
    int warm = 3, done_iters = 0;
    double per_ms = 0;
    clock_sample samples[MAX_SAMPLES];
    int nsamples = 0;
    last_mhz = last_power_w = 0;
    last_energy_mj = last_sustained_us = last_median_us = 0;
    if (!times) {
        seterr(err, errlen, "%s: out of host memory for %d timings", fn, iters);
        return BASELINE_ERR;
    }
    for (nev = 0; nev < 2 * BATCH; nev++) BL_CUDA(cudaEventCreate(&ev[nev]));

    BL_CUDA(cudaEventRecord(ev[0], stream));
    for (int w = 0; w < warm; w++)
        if ((lrc = launch(ctx, stream, err, errlen)) != 0) {
            rc = lrc;
            goto done;
        }
    BL_CUDA(cudaEventRecord(ev[1], stream));
    BL_CUDA(cudaEventSynchronize(ev[1]));
    BL_CUDA(cudaEventElapsedTime(&ms, ev[0], ev[1]));
    {
        per_ms = ms / warm;
        int extra = per_ms > 0 ? (int)fmin(1000.0, 100.0 / per_ms) : 1000;
        for (int w = 0; w < extra; w++)
            if ((lrc = launch(ctx, stream, err, errlen)) != 0) {
                rc = lrc;
                goto done;
            }
        BL_CUDA(cudaStreamSynchronize(stream));
    }

    while (done_iters < iters) {
        int nb = iters - done_iters < BATCH ? iters - done_iters : BATCH;
        spin_kernel<<<1, 1, 0, stream>>>(spin_ns_per_launch * (uint64_t)nb);
        BL_CUDA(cudaGetLastError());
        for (int j = 0; j < nb; j++) {
            BL_CUDA(cudaEventRecord(ev[2 * j], stream));
            if ((lrc = launch(ctx, stream, err, errlen)) != 0) {
                rc = lrc;
                goto done;
            }
            BL_CUDA(cudaEventRecord(ev[2 * j + 1], stream));
        }
        /* the clock within the batch: once a launch a quarter, half and three quarters in has
         * started (the rest of the batch is queued behind it, so the GPU never waits on this), for
         * batches of >= 5 ms (a reading takes tens of microseconds: each falls inside its batch) */
        for (int q = 1; q <= 3 && clock_reader && per_ms * nb >= 5.0 && nsamples < MAX_SAMPLES; q++) {
            BL_CUDA(cudaEventSynchronize(ev[2 * (q * nb / 4)])); /* (a quarter, half, three quarters in) */
            clock_reader(&samples[nsamples].mhz, &samples[nsamples].power_w);
            if (samples[nsamples].mhz > 0) nsamples++;
        }
        BL_CUDA(cudaStreamSynchronize(stream));
        for (int j = 0; j < nb; j++) {
            BL_CUDA(cudaEventElapsedTime(&ms, ev[2 * j], ev[2 * j + 1]));
            times[done_iters + j] = (double)ms * 1000.0;
        }
        done_iters += nb;
    }
    qsort(times, (size_t)iters, sizeof(double), cmp_double);
    *median_us = (iters & 1) ? times[iters / 2] : 0.5 * (times[iters / 2 - 1] + times[iters / 2]);
    last_median_us = *median_us;
    /* the energy a launch takes (baseline_energy_window), sized and gated by the median, as the
     * hfp4 rows are (the warm-up's first launches carry first-call host work) */
    {
        baseline_window_ctx w = {launch, ctx, err, errlen};
        if ((lrc = baseline_energy_window(fn, baseline_window_step, &w, stream, *median_us, energy_window_ms,
                                          energy_reader, &last_energy_mj, &last_sustained_us, err, errlen)) != 0) {
            rc = lrc;
            goto done;
        }
    }
    if (nsamples > 0) {
        qsort(samples, (size_t)nsamples, sizeof samples[0], by_sample_mhz);
        last_mhz = samples[nsamples / 2].mhz;
        last_power_w = samples[nsamples / 2].power_w;
    }
done:
    if (rc != BASELINE_OK) cudaStreamSynchronize(stream); /* nothing in flight when buffers are freed */
    for (int e = 0; e < nev; e++) cudaEventDestroy(ev[e]);
    free(times);
    return rc;
}

/* ------------------------------------------------------------------------------------------- */
/* Copy bandwidth                                                                               */
/* ------------------------------------------------------------------------------------------- */

typedef struct copy_ctx {
    void *dst;
    const void *src;
    size_t bytes;
} copy_ctx;

static int copy_launch(void *ctx, cudaStream_t stream, char *err, size_t errlen) {
    const char *fn = "baseline_copy_gbps";
    copy_ctx *c = (copy_ctx *)ctx;
    int rc = BASELINE_OK;
    BL_CUDA(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, stream));
done:
    return rc;
}

int baseline_copy_gbps(size_t bytes, int iters, double *gbps, double *us) {
    const char *fn = "baseline_copy_gbps";
    char *err = NULL; /* this entry point reports through baseline_last_error() only */
    size_t errlen = 0;
    int rc = BASELINE_OK;
    void *src = NULL, *dst = NULL;
    cudaStream_t stream = NULL;
    copy_ctx c;
    double t = 0;
    clearerr_out(err, errlen);
    if (bytes == 0 || iters < 1 || !gbps || !us) {
        seterr(err, errlen, "%s: bytes = %zu and iters = %d must be positive, gbps and us non-null", fn, bytes, iters);
        return BASELINE_ERR;
    }
    if ((rc = require_device(fn, err, errlen)) != BASELINE_OK) return rc;
    BL_CUDA(cudaMalloc(&src, bytes));
    BL_CUDA(cudaMalloc(&dst, bytes));
    BL_CUDA(cudaMemset(src, 0xA5, bytes));
    BL_CUDA(cudaMemset(dst, 0x5A, bytes));
    BL_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    c.dst = dst;
    c.src = src;
    c.bytes = bytes;
    if ((rc = time_median_us(fn, copy_launch, &c, stream, iters, &t, err, errlen)) != BASELINE_OK) goto done;
    *us = t;
    *gbps = 2.0 * (double)bytes / (t * 1e-6) * 1e-9;
done:
    if (stream) cudaStreamDestroy(stream);
    cudaFree(src);
    cudaFree(dst);
    return rc;
}

/* ------------------------------------------------------------------------------------------- */
/* cuBLASLt GEMMs                                                                               */
/* ------------------------------------------------------------------------------------------- */

enum scale_mode { SCALE_NONE, SCALE_TENSOR, SCALE_OUTER };

/* In hfp4's terms: D[m,n] (row-major BF16) = A[m,k] * B[n,k]^T, scales per row of A / per row of B.
 *
 * cuBLASLt is column-major and its FP8 kernels need "TN" (op(A) = T, op(B) = N). Row-major D[m,n]
 * is column-major D^T[n,m] = B * A^T, so, as torch._scaled_mm does, cuBLASLt's A is our B
 * (stored k x n column-major, ld k, transposed), its B is our A (k x m column-major, ld k), and its
 * D is n x m column-major (ld n), i.e. our row-major D. Its M is our n and its N our m, so its
 * A-scale vector (M long) is our per-B-row scale and its B-scale vector (N long) our per-A-row one. */
typedef struct lt_gemm {
    int64_t m, n, k;
    cudaDataType_t ab_type;
    const void *a, *b;
    void *d;
    enum scale_mode scale;
    const float *a_scale, *b_scale; /* SCALE_OUTER: m and n floats; SCALE_TENSOR: 1 each */
    void *workspace;
    size_t workspace_bytes;
} lt_gemm;

typedef struct lt_plan {
    cublasLtHandle_t handle;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulHeuristicResult_t heur;
    const lt_gemm *g;
} lt_plan;

static void plan_destroy(lt_plan *p) {
    if (p->pref) g_lt.pref_destroy(p->pref);
    if (p->ld) g_lt.layout_destroy(p->ld);
    if (p->lb) g_lt.layout_destroy(p->lb);
    if (p->la) g_lt.layout_destroy(p->la);
    if (p->desc) g_lt.desc_destroy(p->desc);
    p->pref = NULL;
    p->ld = p->lb = p->la = NULL;
    p->desc = NULL;
}

/* `what` names the cuBLASLt call (and attribute) in the message. */
#define BL_LT(what, call)                                                                                              \
    do {                                                                                                               \
        cublasStatus_t bl_s_ = (call);                                                                                 \
        if (bl_s_ != CUBLAS_STATUS_SUCCESS) {                                                                          \
            seterr(err, errlen, "%s: %s failed: %s", fn, what, lt_status(bl_s_));                                      \
            rc = bl_s_ == CUBLAS_STATUS_NOT_SUPPORTED ? BASELINE_UNAVAILABLE : BASELINE_ERR;                           \
            goto done;                                                                                                 \
        }                                                                                                              \
    } while (0)

/* Descriptors, layouts and the heuristic's first algorithm for `g`. On failure p is cleaned up. */
static int plan_create(const char *fn, cublasLtHandle_t handle, const lt_gemm *g, lt_plan *p, char *err,
                       size_t errlen) {
    int rc = BASELINE_OK, returned = 0;
    cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
    uint64_t ws = g->workspace_bytes;
    memset(p, 0, sizeof *p);
    p->handle = handle;
    p->g = g;
    BL_LT("cublasLtMatmulDescCreate", g_lt.desc_create(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    BL_LT("cublasLtMatmulDescSetAttribute(TRANSA)",
          g_lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t));
    BL_LT("cublasLtMatmulDescSetAttribute(TRANSB)",
          g_lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n));
    if (g->scale != SCALE_NONE) {
        /* swapped on purpose: see lt_gemm */
        BL_LT("cublasLtMatmulDescSetAttribute(A_SCALE_POINTER)",
              g_lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g->b_scale, sizeof g->b_scale));
        BL_LT("cublasLtMatmulDescSetAttribute(B_SCALE_POINTER)",
              g_lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g->a_scale, sizeof g->a_scale));
    }
    if (g->scale == SCALE_OUTER) {
        int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        BL_LT("cublasLtMatmulDescSetAttribute(A_SCALE_MODE = OUTER_VEC_32F)",
              g_lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode));
        BL_LT("cublasLtMatmulDescSetAttribute(B_SCALE_MODE = OUTER_VEC_32F)",
              g_lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode));
    }
    /* FAST_ACCUM stays at its default 0, as torch._scaled_mm's use_fast_accum=False. */
    BL_LT("cublasLtMatrixLayoutCreate(A)",
          g_lt.layout_create(&p->la, g->ab_type, (uint64_t)g->k, (uint64_t)g->n, g->k));
    BL_LT("cublasLtMatrixLayoutCreate(B)",
          g_lt.layout_create(&p->lb, g->ab_type, (uint64_t)g->k, (uint64_t)g->m, g->k));
    BL_LT("cublasLtMatrixLayoutCreate(D)",
          g_lt.layout_create(&p->ld, CUDA_R_16BF, (uint64_t)g->n, (uint64_t)g->m, g->n));
    BL_LT("cublasLtMatmulPreferenceCreate", g_lt.pref_create(&p->pref));
    BL_LT("cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)",
          g_lt.pref_set(p->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    BL_LT("cublasLtMatmulAlgoGetHeuristic",
          g_lt.heuristic(handle, p->desc, p->la, p->lb, p->ld, p->ld, p->pref, 1, &p->heur, &returned));
    if (returned < 1) {
        seterr(err, errlen, "%s: cuBLASLt has no algorithm for m=%lld n=%lld k=%lld (heuristic returned none)", fn,
               (long long)g->m, (long long)g->n, (long long)g->k);
        rc = BASELINE_UNAVAILABLE;
        goto done;
    }
done:
    if (rc != BASELINE_OK) plan_destroy(p);
    return rc;
}

static int plan_launch(void *ctx, cudaStream_t stream, char *err, size_t errlen) {
    const char *fn = "cublasLtMatmul";
    lt_plan *p = (lt_plan *)ctx;
    const lt_gemm *g = p->g;
    const float alpha = 1.0f, beta = 0.0f;
    int rc = BASELINE_OK;
    /* beta = 0: C is not read, it only has to be described (same layout and type as D) */
    BL_LT("cublasLtMatmul", g_lt.matmul(p->handle, p->desc, &alpha, g->b, p->la, g->a, p->lb, &beta, g->d, p->ld, g->d,
                                        p->ld, &p->heur.algo, g->workspace, g->workspace_bytes, stream));
done:
    return rc;
}

/* Runs the plan once on a poisoned D and compares CHECK_SAMPLES outputs with a double reference:
 * the BF16 rounding of D (2^-9 relative, 2^-7 allowed) plus accumulation error, bounded by a
 * fraction of sum |terms| (Hopper's FP8 tensor cores accumulate with about 2^-14 relative error
 * between promotions; 2^-12 allowed). A wrong layout or scale mapping misses by ~|D| itself. */
static int verify(const char *fn, lt_plan *p, cudaStream_t stream, char *err, size_t errlen) {
    const lt_gemm *g = p->g;
    int rc = BASELINE_OK, bad = 0, first_bad = -1;
    double *dref = NULL, *dabs = NULL;
    float *dgot = NULL;
    double ref[CHECK_SAMPLES], abs_sum[CHECK_SAMPLES];
    float got[CHECK_SAMPLES];
    int stride = g->scale == SCALE_OUTER ? 1 : 0;
    BL_CUDA(cudaMalloc(&dref, sizeof ref));
    BL_CUDA(cudaMalloc(&dabs, sizeof abs_sum));
    BL_CUDA(cudaMalloc(&dgot, sizeof got));
    BL_CUDA(cudaMemsetAsync(g->d, 0xFF, (size_t)g->m * (size_t)g->n * 2, stream)); /* BF16 NaN */
    if ((rc = plan_launch(p, stream, err, errlen)) != BASELINE_OK) goto done;
    check_kernel<<<CHECK_SAMPLES, CHECK_THREADS, 0, stream>>>(
        g->a, g->b, g->ab_type == CUDA_R_8F_E4M3, g->scale == SCALE_NONE ? NULL : g->a_scale, stride,
        g->scale == SCALE_NONE ? NULL : g->b_scale, stride, (const __nv_bfloat16 *)g->d, g->m, g->n, g->k, dref, dabs,
        dgot);
    BL_CUDA(cudaGetLastError());
    BL_CUDA(cudaMemcpyAsync(ref, dref, sizeof ref, cudaMemcpyDeviceToHost, stream));
    BL_CUDA(cudaMemcpyAsync(abs_sum, dabs, sizeof abs_sum, cudaMemcpyDeviceToHost, stream));
    BL_CUDA(cudaMemcpyAsync(got, dgot, sizeof got, cudaMemcpyDeviceToHost, stream));
    BL_CUDA(cudaStreamSynchronize(stream));
    for (int s = 0; s < CHECK_SAMPLES; s++) {
        double tol = ldexp(fabs(ref[s]), -7) + ldexp(abs_sum[s], -12);
        if (!(fabs((double)got[s] - ref[s]) <= tol)) { /* also catches NaN: D not written */
            if (first_bad < 0) first_bad = s;
            bad++;
        }
    }
    if (bad) {
        seterr(err, errlen,
               "%s: cuBLASLt result check failed at %d of %d sampled outputs (first: sample %d got %g, expected %g, "
               "sum|terms| %g): the baseline's layout or scales are wrong, not timing it",
               fn, bad, CHECK_SAMPLES, first_bad, (double)got[first_bad], ref[first_bad], abs_sum[first_bad]);
        rc = BASELINE_ERR;
    }
done:
    cudaFree(dref);
    cudaFree(dabs);
    cudaFree(dgot);
    return rc;
}

static int check_shape(const char *fn, int64_t m, int64_t n, int64_t k, int iters, double *us, char *err,
                       size_t errlen) {
    if (m < 1 || n < 1 || k < 1 || iters < 1 || !us) {
        seterr(err, errlen, "%s: m = %lld, n = %lld, k = %lld and iters = %d must be positive and us non-null", fn,
               (long long)m, (long long)n, (long long)k, iters);
        return BASELINE_ERR;
    }
    return BASELINE_OK;
}

/* The shared body of both GEMM baselines. fp8: e4m3 inputs with row-wise scales (falling back to
 * tensor-wise scales if this cuBLASLt rejects row-wise); otherwise BF16 inputs without scales. */
static int gemm_baseline(const char *fn, int fp8, int64_t m, int64_t n, int64_t k, int iters, double *us, char *err,
                         size_t errlen) {
    const size_t ws_bytes = (size_t)32 << 20;
    const size_t elem = fp8 ? 1 : 2;
    int rc = BASELINE_OK, have_plan = 0;
    void *a = NULL, *b = NULL, *d = NULL, *ws = NULL;
    float *sa = NULL, *sb = NULL;
    cudaStream_t stream = NULL;
    cublasLtHandle_t handle = NULL;
    lt_gemm g;
    lt_plan plan;
    char note[1024] = "";
    double t = 0;

    clearerr_out(err, errlen);
    if ((rc = check_shape(fn, m, n, k, iters, us, err, errlen)) != BASELINE_OK) return rc;
    if (fp8 && k % 16 != 0) { /* cuBLASLt's FP8 kernels need 16-byte aligned rows of A and B */
        seterr(err, errlen, "%s: k = %lld: cuBLASLt FP8 GEMMs need k to be a multiple of 16", fn, (long long)k);
        return BASELINE_UNAVAILABLE;
    }
    if ((rc = require_device(fn, err, errlen)) != BASELINE_OK) return rc;
    if ((rc = lt_load(fn, err, errlen)) != BASELINE_OK) return rc;

    BL_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    BL_CUDA(cudaMalloc(&a, (size_t)m * (size_t)k * elem));
    BL_CUDA(cudaMalloc(&b, (size_t)n * (size_t)k * elem));
    BL_CUDA(cudaMalloc(&d, (size_t)m * (size_t)n * 2));
    BL_CUDA(cudaMalloc(&ws, ws_bytes));
    if (fp8) {
        BL_CUDA(cudaMalloc(&sa, (size_t)m * sizeof(float)));
        BL_CUDA(cudaMalloc(&sb, (size_t)n * sizeof(float)));
        fill_fp8_kernel<<<fill_blocks((size_t)m * k), 256, 0, stream>>>((uint8_t *)a, (size_t)m * k, 1);
        fill_fp8_kernel<<<fill_blocks((size_t)n * k), 256, 0, stream>>>((uint8_t *)b, (size_t)n * k, 2);
        fill_scale_kernel<<<fill_blocks((size_t)m), 256, 0, stream>>>(sa, (size_t)m, 3);
        fill_scale_kernel<<<fill_blocks((size_t)n), 256, 0, stream>>>(sb, (size_t)n, 4);
    } else {
        fill_bf16_kernel<<<fill_blocks((size_t)m * k), 256, 0, stream>>>((__nv_bfloat16 *)a, (size_t)m * k, 1);
        fill_bf16_kernel<<<fill_blocks((size_t)n * k), 256, 0, stream>>>((__nv_bfloat16 *)b, (size_t)n * k, 2);
    }
    BL_CUDA(cudaGetLastError());
    BL_CUDA(cudaStreamSynchronize(stream));
    {
        cublasStatus_t s = g_lt.create(&handle);
        if (s != CUBLAS_STATUS_SUCCESS) {
            seterr(err, errlen, "%s: cublasLtCreate failed: %s", fn, lt_status(s));
            rc = BASELINE_ERR;
            goto done;
        }
    }

    memset(&g, 0, sizeof g);
    g.m = m;
    g.n = n;
    g.k = k;
    g.ab_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    g.a = a;
    g.b = b;
    g.d = d;
    g.scale = fp8 ? SCALE_OUTER : SCALE_NONE;
    g.a_scale = sa;
    g.b_scale = sb;
    g.workspace = ws;
    g.workspace_bytes = ws_bytes;

    rc = plan_create(fn, handle, &g, &plan, err, errlen);
    if (rc == BASELINE_OK) {
        have_plan = 1;
        rc = plan_launch(&plan, stream, err, errlen);
        cudaError_t e = rc == BASELINE_OK ? cudaStreamSynchronize(stream) : cudaSuccess;
        if (e != cudaSuccess) {
            rc = BASELINE_ERR; /* a device fault is sticky: no fallback can run after it */
            seterr(err, errlen, "%s: first cuBLASLt launch failed: %s (%s)", fn, cudaGetErrorName(e),
                   cudaGetErrorString(e));
            goto done;
        }
    }
    if (rc != BASELINE_OK && fp8) {
        /* Older cuBLASLt (< 12.9) or this GPU has no outer-vector FP8 kernel: time tensor-wise
         * scaling (one scale each for A and B) instead, and say so. */
        char first[sizeof g_last_error];
        memcpy(first, g_last_error, sizeof first);
        appendf(note, sizeof note, /* appendf: truncating the long library path is fine here */
                "row-wise (OUTER_VEC_32F) scaling rejected by %s (%s); timed tensor-wise scaling instead", g_lt_info,
                first);
        if (have_plan) plan_destroy(&plan);
        have_plan = 0;
        g.scale = SCALE_TENSOR;
        if ((rc = plan_create(fn, handle, &g, &plan, err, errlen)) != BASELINE_OK) {
            char reason[sizeof g_last_error];
            memcpy(reason, g_last_error, sizeof reason); /* seterr overwrites g_last_error */
            seterr(err, errlen, "%s: row-wise scaling failed (%s), and so did the tensor-wise fallback: %s", fn, first,
                   reason);
            goto done;
        }
        have_plan = 1;
    } else if (rc != BASELINE_OK) {
        goto done;
    }

    if ((rc = verify(fn, &plan, stream, err, errlen)) != BASELINE_OK) goto done;
    if ((rc = time_median_us(fn, plan_launch, &plan, stream, iters, &t, err, errlen)) != BASELINE_OK) goto done;
    *us = t;
    clearerr_out(err, errlen);
    if (note[0] && err && errlen) snprintf(err, errlen, "%s", note);
done:
    if (stream) cudaStreamSynchronize(stream);
    if (have_plan) plan_destroy(&plan);
    if (handle) g_lt.destroy(handle);
    if (stream) cudaStreamDestroy(stream);
    cudaFree(a);
    cudaFree(b);
    cudaFree(d);
    cudaFree(ws);
    cudaFree(sa);
    cudaFree(sb);
    return rc;
}

int baseline_cublaslt_fp8_rowwise(int64_t m, int64_t n, int64_t k, int iters, double *us, char *err, size_t errlen) {
    return gemm_baseline("baseline_cublaslt_fp8_rowwise", 1, m, n, k, iters, us, err, errlen);
}

int baseline_cublaslt_bf16(int64_t m, int64_t n, int64_t k, int iters, double *us, char *err, size_t errlen) {
    return gemm_baseline("baseline_cublaslt_bf16", 0, m, n, k, iters, us, err, errlen);
}
