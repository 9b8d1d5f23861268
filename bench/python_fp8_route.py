"""Where fp8_fp4_gemm_nt's FP8 route (hfp4/_fp8_route.py: the weights converted to FP8 for the
call, then the FP8 x FP8 GEMM) beats the FP4 kernel: per (N, K) and M, the time of a call each way
(HFP4_FP8_ROUTE_MIN_M=1 against HFP4_FP8_ROUTE=0; "auto": the default rule, what callers get), with
torch's FP8 row-wise GEMM (torch._scaled_mm: CUTLASS's kernel on SM90 in torch 2.x, faster than
cuBLASLt's row-wise one in our runs) timed in the same rounds as a yardstick. Random FP4 weights with UE8M0 scales in
a 6-binade range (exact in FP8), activations with 1x128 UE8M0 scales, BF16 out.

    HFP4_LIBRARY=$PWD/build/libhfp4.so PYTHONPATH=python python3 bench/python_fp8_route.py [--profile]

--profile: instead, a Python profile (cProfile, by own time) of 300 host-bound calls (M = 256,
N = 2048, K = 4096) each way: where the route's extra host time goes.

Each figure: the median over 7 rounds of 10 back-to-back eager calls between two CUDA events (the
host's Python and launch time included: what a caller gets); the three forms interleaved in each
round. Prints the microseconds a call, TFLOP/s, route / FP4 kernel and each against cuBLASLt.
"""
import os
import statistics
import sys

import torch

import hfp4.deep_gemm as dg
from torch_timing import timed

SHAPES = [(8192, 8192), (7168, 2048), (4096, 7168), (2048, 4096)]
MS = [256, 512, 1024, 2048, 4096, 8192, 16384]
CALLS, ROUNDS = 10, 7


def main():
    g = torch.Generator(device="cuda").manual_seed(1)
    print("M N K | route us  fp4 us  auto us  torch us | route TFLOP/s  fp4 TFLOP/s | route/fp4 speedup  "
          "route/torch  fp4/torch  auto/best")
    for n, k in SHAPES:
        b = torch.randint(-128, 128, (n, k // 2), generator=g, device="cuda", dtype=torch.int8)
        sfb = torch.randint(120, 126, (n, k // 32), generator=g, device="cuda", dtype=torch.uint8)
        sfb = sfb.view(torch.float8_e8m0fnu) if hasattr(torch, "float8_e8m0fnu") else sfb
        wq = torch.randn(n, k, generator=g, device="cuda").to(torch.float8_e4m3fn)
        ws = torch.rand(1, n, generator=g, device="cuda") + 0.5
        for m in MS:
            x = torch.randn(m, k, generator=g, device="cuda")
            a, sfa = dg.per_token_cast_to_fp8(x, True, 128)
            d = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            aq = torch.randn(m, k, generator=g, device="cuda").to(torch.float8_e4m3fn)
            asc = torch.rand(m, 1, generator=g, device="cuda") + 0.5

            def route():
                os.environ["HFP4_FP8_ROUTE_MIN_M"] = "1"
                os.environ.pop("HFP4_FP8_ROUTE", None)
                dg.fp8_fp4_gemm_nt((a, sfa), (b, sfb), d)

            def fp4():
                os.environ["HFP4_FP8_ROUTE"] = "0"
                dg.fp8_fp4_gemm_nt((a, sfa), (b, sfb), d)

            def auto():
                os.environ.pop("HFP4_FP8_ROUTE_MIN_M", None)
                os.environ.pop("HFP4_FP8_ROUTE", None)
                dg.fp8_fp4_gemm_nt((a, sfa), (b, sfb), d)

            def cublaslt():
                torch._scaled_mm(aq, wq.t(), scale_a=asc, scale_b=ws, out_dtype=torch.bfloat16)

            for f in (route, fp4, auto, cublaslt):  # warm-up: the route learns the weights, the FP4 kernel repacks them
                f()
            torch.cuda.synchronize()
            t = {"route": [], "fp4": [], "auto": [], "cublaslt": []}
            for _ in range(ROUNDS):
                for name, f in (("route", route), ("fp4", fp4), ("auto", auto), ("cublaslt", cublaslt)):
                    t[name].append(timed(f, CALLS))
            med = {kk: statistics.median(v) for kk, v in t.items()}
            fl = 2.0 * m * n * k
            print("%5d %5d %5d | %8.1f %7.1f %7.1f %8.1f | %8.0f %8.0f | %6.2fx %6.2fx %6.2fx %6.2fx" % (
                m, n, k, med["route"], med["fp4"], med["auto"], med["cublaslt"], fl / med["route"] / 1e6,
                fl / med["fp4"] / 1e6, med["fp4"] / med["route"], med["cublaslt"] / med["route"],
                med["cublaslt"] / med["fp4"], min(med["route"], med["fp4"]) / med["auto"]))
            sys.stdout.flush()
        dg.clear_weight_cache()
        del b, sfb, wq


def profile():
    import cProfile
    import pstats
    g = torch.Generator(device="cuda").manual_seed(2)
    m, n, k = 256, 2048, 4096
    b = torch.randint(-128, 128, (n, k // 2), generator=g, device="cuda", dtype=torch.int8)
    sfb = torch.randint(120, 126, (n, k // 32), generator=g, device="cuda", dtype=torch.uint8)
    a, sfa = dg.per_token_cast_to_fp8(torch.randn(m, k, generator=g, device="cuda"), True, 128)
    d = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    for name, env in (("route", {"HFP4_FP8_ROUTE_MIN_M": "1"}), ("fp4", {"HFP4_FP8_ROUTE": "0"})):
        os.environ.pop("HFP4_FP8_ROUTE_MIN_M", None)
        os.environ.pop("HFP4_FP8_ROUTE", None)
        os.environ.update(env)
        dg.fp8_fp4_gemm_nt((a, sfa), (b, sfb), d)
        torch.cuda.synchronize()
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(300):
            dg.fp8_fp4_gemm_nt((a, sfa), (b, sfb), d)
        pr.disable()
        torch.cuda.synchronize()
        print("==== %s: 300 calls" % name)
        pstats.Stats(pr).sort_stats("tottime").print_stats(22)


if __name__ == "__main__":
    profile() if "--profile" in sys.argv else main()
