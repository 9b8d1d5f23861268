"""Times hfp4.experts.experts_forward (the transformers experts backend) on a DeepSeek-V4-Flash MoE
layer's shapes (E = 256, H = 4096, I = 2048, top-6; random FP4 weights and UE8M0 scales made on the
GPU), eager and as a CUDA-graph replay, for decode token counts, with torch's glue
(HFP4_EXPERTS_GLUE=0), the library's with the module's own gate between the GEMMs ("library"), and
the library's with the gate fused into the second quantization ("fused": what transformers'
FP8Experts gets; this module declares its clamped SwiGLU with hfp4_swiglu_limit). Prints, per T: the microseconds of a whole forward (routing,
quantization, both GEMMs, gate, combine) and the effective bandwidth over the FP4 weight and scale
bytes of the experts hit (the bytes that bound decode).

    HFP4_LIBRARY=$PWD/build/libhfp4.so PYTHONPATH=python python3 bench/experts_forward.py [--profile] [T ...]

Eager times are back-to-back calls with one synchronization at the end: the larger of the host's
time a call and the GPU's. --profile adds a Python profile (cProfile, by own time) of 300 eager
fused calls at the first T: where the host time of an eager decode step goes.
"""
import os
import sys

import torch

import hfp4.deep_gemm as dg
import hfp4.experts as X

E, H, I, TOPK = 256, 4096, 2048, 6


class Layer:
    def __init__(self):
        g = torch.Generator(device="cuda").manual_seed(1)

        def fp4(n, k):
            w = torch.randint(-128, 128, (E, n, k // 2), generator=g, device="cuda", dtype=torch.int8)
            sf = torch.randint(118, 124, (E, n, k // 32), generator=g, device="cuda", dtype=torch.uint8)
            return w, sf.view(torch.float8_e8m0fnu)

        self.gate_up_proj, self.gate_up_proj_scale_inv = fp4(2 * I, H)
        self.down_proj, self.down_proj_scale_inv = fp4(H, I)
        self.num_experts, self.has_gate, self.activation_scheme = E, True, "dynamic"
        self.hfp4_swiglu_limit = None

    def _apply_gate(self, gate_up):
        gate, up = gate_up.chunk(2, dim=-1)
        return torch.nn.functional.silu(gate.clamp(max=10.0)) * up.clamp(-10.0, 10.0)


def time_us(fn, reps=50):
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / reps


def main(tokens):
    layer = Layer()
    g = torch.Generator(device="cuda").manual_seed(2)
    print("# hfp4.experts.experts_forward, V4-Flash layer (E %d, H %d, I %d, top-%d), %s"
          % (E, H, I, TOPK, torch.cuda.get_device_name()))
    for T in tokens:
        x = torch.randn(T, H, generator=g, device="cuda").to(torch.bfloat16)
        idx = torch.stack([torch.randperm(E, generator=g, device="cuda")[:TOPK] for _ in range(T)])
        w = torch.rand(T, TOPK, generator=g, device="cuda")
        hit = int(torch.unique(idx).numel())
        weight_bytes = hit * (2 * I * H + H * I) * (0.5 + 1.0 / 32)
        for glue in ("torch", "library", "fused"):
            os.environ["HFP4_EXPERTS_GLUE"] = "0" if glue == "torch" else "1"
            layer.hfp4_swiglu_limit = 10.0 if glue == "fused" else None
            eager = time_us(lambda: X.experts_forward(layer, x, idx, w))
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                X.experts_forward(layer, x, idx, w)
            replay = time_us(graph.replay)
            print("T %4d  experts hit %3d  glue %-7s  eager %8.1f us  graph %8.1f us  %.2f TB/s (weights + "
                  "scales of the hit experts / graph time)" % (T, hit, glue, eager, replay,
                                                               weight_bytes / replay * 1e-6))
    dg.clear_weight_cache()
    dg.release_graph_weights()


def profile(T):
    import cProfile
    import pstats
    import time
    layer = Layer()
    layer.hfp4_swiglu_limit = 10.0
    os.environ["HFP4_EXPERTS_GLUE"] = "1"
    g = torch.Generator(device="cuda").manual_seed(3)
    x = torch.randn(T, H, generator=g, device="cuda").to(torch.bfloat16)
    idx = torch.stack([torch.randperm(E, generator=g, device="cuda")[:TOPK] for _ in range(T)])
    w = torch.rand(T, TOPK, generator=g, device="cuda")
    for _ in range(20):
        X.experts_forward(layer, x, idx, w)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(300):
        X.experts_forward(layer, x, idx, w)
    host = (time.perf_counter() - t0) / 300 * 1e6
    torch.cuda.synchronize()
    print("# T %d fused: host time of an eager call %.1f us (300 calls, no synchronization between them)" % (T, host))
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(300):
        X.experts_forward(layer, x, idx, w)
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(25)
    # the host time of each library call (the C side: plan, checks, tensor maps, launch), timed
    # around the call through a proxy of the loaded library
    import hfp4._lib as L
    real, spent, count = L.lib(), {}, {}

    class Timed:
        def __getattr__(self, name):
            fn = getattr(real, name)

            def call(*args):
                t = time.perf_counter()
                r = fn(*args)
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t
                count[name] = count.get(name, 0) + 1
                return r
            return call
    proxy = Timed()
    saved, L.lib = L.lib, lambda: proxy
    try:
        for _ in range(300):
            X.experts_forward(layer, x, idx, w)
        torch.cuda.synchronize()
    finally:
        L.lib = saved
    print("# host time of each library call, T %d fused (300 forwards):" % T)
    for name in sorted(spent, key=lambda n: -spent[n]):
        print("%-40s %6d calls  %7.2f us a call" % (name, count[name], spent[name] / count[name] * 1e6))
    dg.clear_weight_cache()


if __name__ == "__main__":
    args = sys.argv[1:]
    want_profile = "--profile" in args
    tokens = [int(v) for v in args if v != "--profile"] or [1, 8, 32, 128]
    main(tokens)
    if want_profile:
        profile(tokens[0])
