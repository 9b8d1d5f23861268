"""What the FP8 grouped GEMMs a Hopper user can run today reach on DeepSeek-V4-Flash's expert shapes,
against issue 5's yardstick (one dense FP8 row-wise GEMM over all routed rows, same N and K), in one
run. Why: issue 5 asks FP8 x FP4 grouped GEMMs for 0.9x (T = 16384) and 0.8x (T = 4096) of that
yardstick; this says where FP8 weights themselves, with nothing to convert, land against it.

    python3 bench/peers_grouped_fp8.py [--tokens 4096,16384] [--seconds 1]

Rows, each with its TFLOP/s of useful rows (2 x rows x N x K over the time) and its ratio to the
dense row of the same shape:
- dense: torch._scaled_mm, FP8 row-wise scales, M = all routed rows (the issue's yardstick);
- grouped rowwise: torch._scaled_grouped_mm (CUTLASS's SM90 grouped kernel in torch), FP8 weights
  [E, N, K] with one scale a row and one a token: lighter scaling than DeepSeek's 1x128 / 128x128
  blocks, which need a promotion every 128 K; with and without fast accumulation;
- deep_gemm: DeepGEMM's m_grouped_fp8_gemm_nt_contiguous (1x128 and 128x128 block scales, each
  expert's rows padded to 128) when the package is installed, else a line saying it is not.
Routing: uniform random top-6 of 256 experts per token (torch's generator, seed 1): the same
statistics as `hfp4 bench --routing-seed 1`, not the same draw. Times: "timed" is the median of 5
rounds of 10 back-to-back calls; "sustained" is one window of back-to-back calls lasting about
--seconds (the rate at the GPU's power cap, as hfp4 bench's sustained column).
"""
import argparse
import statistics

import torch

from torch_timing import timed

EXPERTS, TOP_K = 256, 6
SHAPES = [("w13", 4096, 4096), ("w2", 4096, 2048)]


def routed_counts(tokens, gen):
    """Rows each expert gets under uniform random top-6 routing"""
    choice = torch.rand(tokens, EXPERTS, generator=gen, device="cuda").topk(TOP_K, dim=1).indices
    return torch.bincount(choice.flatten(), minlength=EXPERTS)


def rates(fn, flops, seconds):
    """(timed, sustained) TFLOP/s of fn"""
    us = statistics.median(timed(fn, 10, warm=(r == 0)) for r in range(5))
    calls = max(10, int(seconds * 1e6 / us))
    sustained_us = timed(fn, calls)
    return flops / us * 1e-6, flops / sustained_us * 1e-6


def deep_gemm_row(b, counts, n, k, seconds, flops):
    """DeepGEMM's contiguous grouped FP8 GEMM, or None when the package is not installed"""
    try:
        import deep_gemm
    except ImportError:
        return None
    padded = ((counts + 127) // 128) * 128
    rows_p = int(padded.sum())
    m_indices = torch.repeat_interleave(torch.arange(EXPERTS, device="cuda", dtype=torch.int32), padded)
    a_padded = torch.empty(rows_p, k, device="cuda", dtype=torch.float8_e4m3fn)
    # (every row 1.0, padding included: constant operands draw a little less power at the cap than
    # random ones, bench/RESULTS.md v42, so this row may flatter DeepGEMM by ~2 %)
    a_padded.view(torch.uint8).fill_(0x38)
    sfa = torch.ones(rows_p, k // 128, device="cuda")
    sfb = torch.ones(EXPERTS, n // 128, k // 128, device="cuda")
    d = torch.empty(rows_p, n, device="cuda", dtype=torch.bfloat16)
    return rates(lambda: deep_gemm.m_grouped_fp8_gemm_nt_contiguous((a_padded, sfa), (b, sfb), d, m_indices), flops,
                 seconds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="4096,16384")
    ap.add_argument("--seconds", type=float, default=1.0)
    args = ap.parse_args()
    gen = torch.Generator(device="cuda").manual_seed(1)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; TFLOP/s of useful rows, timed / sustained, "
          "and each against the dense row of its shape")
    for name, n, k in SHAPES:
        b = torch.randn(EXPERTS, n, k, generator=gen, device="cuda").to(torch.float8_e4m3fn)
        sb = torch.rand(EXPERTS, n, generator=gen, device="cuda") + 0.5
        for tokens in (int(t) for t in args.tokens.split(",")):
            counts = routed_counts(tokens, gen)
            rows = int(counts.sum())
            offs = torch.cumsum(counts, 0).to(torch.int32)
            a = torch.randn(rows, k, generator=gen, device="cuda").to(torch.float8_e4m3fn)
            sa = torch.rand(rows, generator=gen, device="cuda") + 0.5
            flops = 2.0 * rows * n * k
            dense = rates(lambda: torch._scaled_mm(a, b[0].t(), scale_a=sa.view(-1, 1), scale_b=sb[0].view(1, -1),
                                                   out_dtype=torch.bfloat16), flops, args.seconds)
            table = [("dense torch._scaled_mm (yardstick)", dense)]
            for fast in (False, True):
                table.append((f"grouped torch._scaled_grouped_mm rowwise{' fast accum' if fast else ''}",
                              rates(lambda: torch._scaled_grouped_mm(a, b.transpose(-2, -1), sa, sb, offs=offs,
                                                                     out_dtype=torch.bfloat16, use_fast_accum=fast),
                                    flops, args.seconds)))
            try:
                dg = deep_gemm_row(b, counts, n, k, args.seconds, flops)
            except Exception as e:  # (an installed DeepGEMM whose API differs: say so, keep the other rows)
                print(f"  deep_gemm: {type(e).__name__}: {e}")
                dg = None
            print(f"{name} T = {tokens} ({rows} rows, {int((counts > 0).sum())} experts hit, "
                  f"{int(counts.min())}..{int(counts.max())} rows an expert)")
            for label, (t, s) in table + ([("deep_gemm m_grouped_fp8_gemm_nt_contiguous", dg)] if dg else []):
                print(f"  {label:58s} {t:7.1f} / {s:7.1f}   {t / dense[0]:.2f}x / {s / dense[1]:.2f}x")
            if dg is None:
                print("  deep_gemm: not installed here")
        del b


if __name__ == "__main__":
    main()
