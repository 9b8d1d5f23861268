/*
 * env_switch.c - the library's environment switches: read once (hfp4__env_switch, hfp4__env_tristate)
 * or at each call (hfp4__env_is: the comparison switches of the launch plans).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int hfp4__env_switch(const char *name, int default_on, int *cache) {
    int on = __atomic_load_n(cache, __ATOMIC_RELAXED);
    if (on < 0) {
        const char *env = getenv(name);
        on = default_on ? !(env && strcmp(env, "0") == 0) : (env && strcmp(env, "1") == 0);
        __atomic_store_n(cache, on, __ATOMIC_RELAXED);
    }
    return on;
}

int hfp4__env_tristate(const char *name, int *cache) {
    int v = __atomic_load_n(cache, __ATOMIC_RELAXED);
    if (v == -2) {
        const char *env = getenv(name);
        v = env && strcmp(env, "1") == 0 ? 1 : env && strcmp(env, "0") == 0 ? 0 : -1;
        __atomic_store_n(cache, v, __ATOMIC_RELAXED);
    }
    return v;
}

int hfp4__env_is(const char *name, const char *value) {
    const char *env = getenv(name);
    return env != NULL && strcmp(env, value) == 0;
}
