/*
 * dyn_slots.h - which counter of the module's array (dynamic_walk.cuh) a launch's dynamic walk (decode
 * tiles, the 128-token tile's contiguous and psum items) uses: no two launches that may run at the same time
 * may share one, or each would skip the items the other took.
 */
#ifndef HFP4_SM90_DYN_SLOTS_H
#define HFP4_SM90_DYN_SLOTS_H

#include <cuda_runtime.h>
#include <stdint.h>

/* The slot for a launch on `stream` of device `device`, or -1 (the launch walks statically: correct,
 * slower) when none is left or the stream's capture state cannot be read:
 * - a launch being captured into a graph: a slot of its own, not given again while the graph, or
 *   any copy or instance of it, exists or has launches pending (so the launches of a graph,
 *   whichever of them run at the same time, the launches of graphs alive at once, and the streams'
 *   launches never share one; a copy of the graph, an instance of it or it added twice as child
 *   graphs, would share its slots with the original: hfp4.h says so). The capturing graph holds a
 *   CUDA user object for it, whose destructor returns it to a free list once all of those are gone
 *   and their launches completed (dyn_slots.cu says what CUDA promises), except the device's first
 *   HFP4_SM90_DYN_PLAIN_SLOTS captured launches, whose slots are never given again and need no
 *   object (a graph holding one replays ~2 us slower). 31744 more per device held at once, then -1; -1 also when the capturing graph or the user object cannot be had (no error is
 *   left behind).
 * - otherwise one slot per stream (a stream's launches run one after another, and the next reads
 *   the counter only after the previous has completed, programmatic dependent launch included),
 *   from a table keyed by the stream handle (the legacy stream as NULL or cudaStreamLegacy is one
 *   key; cudaStreamPerThread is keyed by the calling thread). 1024 per device, then -1. */
int32_t hfp4__sm90_dyn_slot(int device, cudaStream_t stream);

/* (tests) Marks device's plain captured slots all handed out, so the next captured launches take
 * slots that come back (the first HFP4_SM90_DYN_PLAIN_SLOTS captured launches of a device take slots
 * that never do, and whose graphs need no user object: dyn_slots.cu). */
void hfp4__sm90_dyn_plain_slots_spend(int device);

#endif
