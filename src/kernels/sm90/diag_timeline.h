/*
 * diag_timeline.h - the host side of diag_timeline.cuh (the opt-in launch timeline), for tools.
 */
#ifndef HFP4_DIAG_TIMELINE_H
#define HFP4_DIAG_TIMELINE_H
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Prints the last SM90 launch's timeline to `out` (per point: min / p10 / p50 / p90 / max over the
 * CTAs that had items, in us from the first CTA's entry; the CTAs' item counts; each CTA's SM, items
 * and exit, in launch order). Synchronizes the device. Returns 0; -1 when the library was built
 * without `make DIAG=1`, -2 when the last launch recorded nothing (the 128-token tile records no
 * timeline), -3 on a CUDA error; it prints nothing then. */
int hfp4__diag_timeline_print(FILE *out);

/* Prints the consumers' cycles per item in each phase (diag_timeline.cuh, HFP4_DIAG_PH_*), summed
 * over every launch since the last call, and zeroes the sums; out NULL only zeroes them. Returns 0;
 * -1 without `make DIAG=1`, -2 when no item was recorded, -3 on a CUDA error. */
int hfp4__diag_phases_print(FILE *out);

#ifdef __cplusplus
}
#endif
#endif
