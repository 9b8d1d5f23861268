/*
 * parallel.c - a tiny pthreads parallel-for for the CPU reference and quantizers.
 *
 * Work is split into contiguous index ranges, one per thread: the reference GEMMs are
 * embarrassingly parallel over output rows, so nothing finer is needed.
 */
#include <pthread.h>
#include <unistd.h>

#include "internal.h"

int hfp4__thread_count(int requested, int64_t work_items) {
    long n = requested;
    if (n <= 0) {
        n = sysconf(_SC_NPROCESSORS_ONLN);
        if (n < 1) n = 1;
        if (n > 64) n = 64;
    }
    if (work_items < n) n = work_items < 1 ? 1 : (long)work_items;
    return (int)n;
}

typedef struct range_job {
    void (*fn)(void *, int64_t);
    void *arg;
    int64_t begin, end;
} range_job;

static void *run_range(void *p) {
    range_job *job = (range_job *)p;
    for (int64_t i = job->begin; i < job->end; i++) job->fn(job->arg, i);
    return NULL;
}

int hfp4__parallel_for(int threads, int64_t count, void (*fn)(void *arg, int64_t index), void *arg) {
    enum { MAX_THREADS = 64 };
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads <= 1 || count <= 1) {
        for (int64_t i = 0; i < count; i++) fn(arg, i);
        return 0;
    }
    pthread_t tid[MAX_THREADS];
    int created[MAX_THREADS] = {0};
    range_job jobs[MAX_THREADS];
    int failed = 0;
    for (int t = 0; t < threads; t++) {
        jobs[t].fn = fn;
        jobs[t].arg = arg;
        jobs[t].begin = count * t / threads;
        jobs[t].end = count * (t + 1) / threads;
    }
    for (int t = 1; t < threads; t++) {
        if (pthread_create(&tid[t], NULL, run_range, &jobs[t]) == 0) {
            created[t] = 1;
        } else {
            failed = 1; /* could not start a thread: its share runs inline below */
        }
    }
    run_range(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (created[t]) pthread_join(tid[t], NULL);
        else run_range(&jobs[t]);
    }
    return failed ? -1 : 0;
}
