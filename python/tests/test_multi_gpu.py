"""hfp4 driving two GPUs from one process, as transformers does with device_map="auto" (a model's
layers spread over the GPUs of one process): every call runs on its operands' device whatever the
current device is, and leaves the current device alone; operands on two devices are refused; the
weight cache and the experts backend's plans keep the devices apart; a CUDA graph captures on the
second GPU. Results on cuda:1 must equal cuda:0's bit for bit (the same kernels on the same
inputs); their correctness is test_deep_gemm_gpu's and test_experts' concern. A launch on the wrong
device would read the other GPU's memory without peer access (never enabled here: no tensor is
copied between the GPUs) and fault.
Marked gpu; skipped below two GPUs that run hfp4's SM90 kernels."""
import numpy as np
import pytest

import hfp4
from hfp4 import host

pytestmark = pytest.mark.gpu

try:
    import torch
    import hfp4.deep_gemm as dg
    import hfp4.experts as X
except ImportError:  # collected but skipped by conftest
    torch = None

DEVICES = ("cuda:0", "cuda:1")


@pytest.fixture(autouse=True)
def _two_gpus():
    if torch.cuda.device_count() < 2 or not all(dg.is_available(d) for d in DEVICES):
        pytest.skip("needs two CUDA devices that run hfp4's SM90 kernels")
    dg.clear_weight_cache()
    with torch.cuda.device(0):  # the current device stays cuda:0 unless a test says otherwise
        yield
    for d in DEVICES:
        torch.cuda.synchronize(d)
    dg.clear_weight_cache()
    dg.release_graph_weights()


def _fp4_weights(seed, groups, n, k):
    """FP4 weights [groups, n, k/2] with UE8M0 scales per 32, on the host"""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((groups * n, k)) * 0.05).astype(np.float32)
    q, sf = host.per_token_cast_to_fp4(w, True, 32, False, ue8m0_bytes=True)
    q = torch.from_numpy(q.reshape(groups, n, k // 2)).view(torch.int8)
    sf = torch.from_numpy(np.ascontiguousarray(sf.reshape(groups, n, sf.shape[-1])))
    e8m0 = getattr(torch, "float8_e8m0fnu", None)
    return q, (sf.view(e8m0) if e8m0 is not None else sf)


def _fp8_acts(seed, rows, k, device):
    x = torch.randn(rows, k, generator=torch.Generator().manual_seed(seed)).to(device)
    return dg.per_token_cast_to_fp8(x, True, 128, False)


def _three_gemms(device, w, sf):
    """dense, m-grouped contiguous (with padding rows) and masked GEMMs on `device`'s tensors"""
    G, n, k = w.shape[0], w.shape[1], 2 * w.shape[2]
    w, sf = w.to(device), sf.to(device)
    a, sfa = _fp8_acts(1, 96, k, device)
    dense = torch.empty(96, n, dtype=torch.bfloat16, device=device)
    dg.fp8_fp4_gemm_nt((a, sfa), (w[0], sf[0]), dense)
    rows = torch.tensor([128, 100, 0, 37])[:G]  # real rows a group; segments padded to 128
    layout = torch.cat([torch.cat([torch.full((int(r),), g, dtype=torch.int32),
                                   torch.full((128 * ((int(r) + 127) // 128) - int(r),), -1, dtype=torch.int32)])
                        for g, r in enumerate(rows)]).to(device)
    ac, sfc = _fp8_acts(2, layout.numel(), k, device)
    cont = torch.empty(layout.numel(), n, dtype=torch.bfloat16, device=device)
    dg.m_grouped_fp8_fp4_gemm_nt_contiguous((ac, sfc), (w, sf), cont, layout)
    am, sfm = _fp8_acts(3, G * 16, k, device)
    masked_m = torch.tensor([16, 3, 0, 9][:G], dtype=torch.int32, device=device)
    masked = torch.empty(G, 16, n, dtype=torch.bfloat16, device=device)
    dg.m_grouped_fp8_fp4_gemm_nt_masked((am.view(G, 16, k), sfm.view(G, 16, -1)), (w, sf), masked, masked_m, 8)
    keep = torch.arange(16, device=device)[None, :] < masked_m[:, None]  # (rows past masked_m: unwritten)
    return dense, cont[layout >= 0], masked[keep]


def test_gemms_run_on_their_operands_device():
    w, sf = _fp4_weights(10, 4, 256, 512)
    runs = []
    for device in ("cuda:1", "cuda:0", "cuda:1"):  # cuda:1 first: its per-device state set up before cuda:0's
        runs.append([t.cpu() for t in _three_gemms(device, w, sf)])
        assert torch.cuda.current_device() == 0
    for run in runs[1:]:
        for a0, a1 in zip(runs[0], run):
            assert torch.isfinite(a0.float()).all()
            assert torch.equal(a0, a1)
    with torch.cuda.device(1):  # and the other way round: current cuda:1, operands on cuda:0
        again = [t.cpu() for t in _three_gemms("cuda:0", w, sf)]
        assert torch.cuda.current_device() == 1
    for a0, a1 in zip(runs[0], again):
        assert torch.equal(a0, a1)


def test_operands_on_two_devices_are_refused():
    w, sf = _fp4_weights(11, 1, 256, 512)
    a, sfa = _fp8_acts(4, 32, 512, "cuda:1")
    d0 = torch.empty(32, 256, dtype=torch.bfloat16, device="cuda:0")
    with pytest.raises(hfp4.InvalidArgument, match="d is on cuda:0, expected cuda:1"):
        dg.fp8_fp4_gemm_nt((a, sfa), (w[0].to("cuda:1"), sf[0].to("cuda:1")), d0)
    d1 = torch.empty(32, 256, dtype=torch.bfloat16, device="cuda:1")
    with pytest.raises(hfp4.InvalidArgument, match="on cuda:0, expected cuda:1"):
        dg.fp8_fp4_gemm_nt((a, sfa), (w[0].to("cuda:0"), sf[0].to("cuda:0")), d1)


def test_weight_cache_keeps_devices_apart():
    w, sf = _fp4_weights(12, 1, 256, 512)
    outs, kept = [], []  # (kept: the device copies stay alive; the cache lets freed weights' entries go)
    for device in DEVICES:
        a, sfa = _fp8_acts(5, 32, 512, device)
        d = torch.empty(32, 256, dtype=torch.bfloat16, device=device)
        kept.append((w[0].to(device), sf[0].to(device)))
        dg.fp8_fp4_gemm_nt((a, sfa), kept[-1], d)
        outs.append(d.cpu())
    assert dg.weight_cache_info()["entries"] == 2  # the same bytes on two devices: two repacks
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("glue", ["library", "fused"])
def test_experts_layers_on_two_devices(monkeypatch, glue):
    from test_experts import _Experts, _use_glue  # (the same stand-in for transformers' FP8Experts)
    E, H, I, T, k = 8, 512, 256, 5, 4
    mods = {dev: _Experts(E, H, I, 80, wrap=lambda t, dev=dev: t.to(dev)) for dev in DEVICES}
    for mod in mods.values():
        _use_glue(monkeypatch, mod, glue)
    g = torch.Generator().manual_seed(81)
    x = torch.randn(T, H, generator=g).to(torch.bfloat16)
    idx = torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(T)])
    wts = torch.rand(T, k, generator=g)
    eager = {}
    for step in range(2):  # alternating layers on the two GPUs, as a pipeline over device_map does
        for dev, mod in mods.items():
            out = X.experts_forward(mod, x.to(dev), idx.to(dev), wts.to(dev))
            assert out.device == torch.device(dev) and torch.cuda.current_device() == 0
            eager.setdefault(dev, out.cpu())
            assert torch.equal(out.cpu(), eager[dev])
    assert torch.isfinite(eager["cuda:0"].float()).all()
    assert torch.equal(eager["cuda:0"], eager["cuda:1"])
    # a decode step captured on the second GPU
    x1, idx1, w1 = x.to("cuda:1"), idx.to("cuda:1"), wts.to("cuda:1")
    with torch.cuda.device(1):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = X.experts_forward(mods["cuda:1"], x1, idx1, w1)
        graph.replay()
        torch.cuda.synchronize()
    assert torch.equal(out.cpu(), eager["cuda:1"])
    pinned = dg.weight_cache_info()["graph_pinned"]
    assert pinned >= 2  # (the graph's w13 and w2)
    dg.release_graph_weights("cuda:0")  # nothing of cuda:1's goes
    assert dg.weight_cache_info()["graph_pinned"] == pinned
    del graph
    dg.release_graph_weights("cuda:1")
    assert dg.weight_cache_info()["graph_pinned"] == 0
