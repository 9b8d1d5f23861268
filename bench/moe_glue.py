"""Times the MoE glue kernels alone (hfp4_moe_route, hfp4_moe_quantize_rows,
hfp4_moe_swiglu_quantize_rows, hfp4_moe_combine) on a DeepSeek-V4-Flash layer's shapes (E = 256,
H = 4096, I = 2048, top-6, uniform routing) at prefill token counts, stream-launched back to back,
CUDA events around 20 launches after 3 warm-ups. Prints µs a launch and the bytes each kernel must
move over that time (its floor is those bytes at the copy rate, ~4.2 TB/s on the H200).

    HFP4_LIBRARY=$PWD/build/libhfp4.so PYTHONPATH=python python3 bench/moe_glue.py [T ...]
"""
import sys

import torch

import hfp4._lib as L
from experts_forward import time_us  # (this folder: the same CUDA-event timing)

E, H, I, TOPK, ALIGN = 256, 4096, 2048, 6, 128


def main(tokens):
    lib = L.lib()
    stream = torch.cuda.current_stream().cuda_stream
    g = torch.Generator(device="cuda").manual_seed(1)
    print("# MoE glue kernels, V4-Flash (E %d, H %d, I %d, top-%d), %s, %s"
          % (E, H, I, TOPK, torch.cuda.get_device_name(), L.library_path()))
    for T in tokens:
        S = T * TOPK
        m_pad = int(lib.hfp4_moe_layout_rows(S, E, ALIGN))
        ids = torch.stack([torch.randperm(E, generator=g, device="cuda")[:TOPK] for _ in range(T)]).reshape(-1)
        pos = torch.empty(S, dtype=torch.int32, device="cuda")
        layout = torch.empty(m_pad, dtype=torch.int32, device="cuda")
        x = torch.randn(T, H, generator=g, device="cuda").to(torch.bfloat16)
        a1 = torch.empty(m_pad, H, dtype=torch.uint8, device="cuda")
        sf1 = torch.zeros(m_pad, H // 128, dtype=torch.float32, device="cuda")
        y1 = (torch.randn(m_pad, 2 * I, generator=g, device="cuda") * 3).to(torch.bfloat16)
        a2 = torch.empty(m_pad, I, dtype=torch.uint8, device="cuda")
        sf2 = torch.zeros(m_pad, I // 128, dtype=torch.float32, device="cuda")
        y2 = torch.randn(m_pad, H, generator=g, device="cuda").to(torch.bfloat16)
        w = torch.rand(S, generator=g, device="cuda")
        out = torch.empty(T, H, dtype=torch.bfloat16, device="cuda")

        def route():
            L.check(lib.hfp4_moe_route_gpu(ids.data_ptr(), 1, S, E, ALIGN, pos.data_ptr(), layout.data_ptr(), m_pad,
                                           stream))

        def quantize():
            L.check(lib.hfp4_moe_quantize_rows_gpu(x.data_ptr(), L.DTYPE_BF16, T, H, H, TOPK, pos.data_ptr(), S, 128,
                                                   a1.data_ptr(), H, sf1.data_ptr(), m_pad, stream))

        def swiglu():
            L.check(lib.hfp4_moe_swiglu_quantize_rows_gpu(y1.data_ptr(), 2 * I, I, L.GATE_UP_STACKED, 10.0,
                                                          pos.data_ptr(), S, 128, a2.data_ptr(), I, sf2.data_ptr(),
                                                          m_pad, stream))

        def combine():
            L.check(lib.hfp4_moe_combine_gpu(y2.data_ptr(), H, m_pad, H, pos.data_ptr(), w.data_ptr(), L.DTYPE_FP32, T,
                                             TOPK, out.data_ptr(), L.DTYPE_BF16, H, stream))

        route()
        torch.cuda.synchronize()
        rows = [("route", route, S * 8 + S * 4 + m_pad * 4),
                ("quantize", quantize, T * H * 2 + S * H + S * (H // 128) * 4),
                ("swiglu_quantize", swiglu, S * 2 * I * 2 + S * I + S * (I // 128) * 4),
                ("combine", combine, S * H * 2 + S * 4 + T * H * 2)]
        for name, fn, nbytes in rows:
            us = time_us(fn, reps=20)
            print("T %6d  %-16s %9.1f us  %7.1f MB  %5.2f TB/s" % (T, name, us, nbytes / 1e6, nbytes / us * 1e-6))


if __name__ == "__main__":
    main([int(v) for v in sys.argv[1:]] or [4096, 16384])
