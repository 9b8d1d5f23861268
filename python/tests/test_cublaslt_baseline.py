"""hfp4.deep_gemm's cublaslt_gemm_{nt,nn,tn,tt} (hfp4/_cublaslt.py): DeepGEMM's unscaled baseline
GEMM, D = A B^T (+ C), FP8 e4m3 or BF16 operands, FP32 accumulation, one rounding into D. Checked
element by element against the float64 product of the same operands; on the CPU (the exact FP64
path) and, marked gpu, through torch's cuBLASLt calls. The K-grouped FP8 GEMMs exist and fall back."""
import pytest

import hfp4

torch = pytest.importorskip("torch")
import hfp4.deep_gemm as dg  # noqa: E402

FP8 = getattr(torch, "float8_e4m3fn", None)


def _operands(dtype, m, n, k, device, seed):
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(m, k, generator=g) * 2).to(dtype).to(device)
    b = (torch.randn(n, k, generator=g) * 2).to(dtype).to(device)
    c = torch.randn(m, n, generator=g).to(device)
    return a, b, c


def _check(d, a, b, c, fp32_sums):
    """|d - r| within D's rounding and the FP32 roundings of the product (k terms of |a b| where the sums
    are FP32) of r = a b^T (+ c) in FP64"""
    ad, bd = a.double().cpu(), b.double().cpu()
    r = ad @ bd.t() + (c.double().cpu() if c is not None else 0)
    # (the product is rounded to FP32 before C is added; on the GPU its k terms are summed in FP32)
    bound = (ad.abs() @ bd.abs().t()) * ((a.shape[1] + 1) * 2.0 ** -23 if fp32_sums else 2.0 ** -23)
    eps = 2.0 ** -8 if d.dtype == torch.bfloat16 else 2.0 ** -23
    err = (d.double().cpu() - r).abs()
    ok = err <= eps * r.abs() + bound + 1e-30
    assert bool(ok.all()), "max error %g at %s" % (float(err.max()), (~ok).nonzero()[:3].tolist())


@pytest.mark.skipif(FP8 is None, reason="torch without float8_e4m3fn")
@pytest.mark.parametrize("dtype", ["fp8", "bf16"])
@pytest.mark.parametrize("out", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("with_c", [False, True])
def test_cpu_exact_path(dtype, out, with_c, monkeypatch):
    monkeypatch.setenv("HFP4_DEEP_GEMM_FALLBACK", "0")  # (never an installed DeepGEMM)
    dt = FP8 if dtype == "fp8" else torch.bfloat16
    a, b, c = _operands(dt, 37, 45, 200, "cpu", 1)
    d = torch.full((37, 45), float("nan"), dtype=out)
    c = c.to(out) if with_c else None  # (C has D's dtype, as DeepGEMM requires)
    dg.cublaslt_gemm_nt(a, b, d, c=c)
    _check(d, a, b, c, fp32_sums=False)


def test_empty_k_gives_c(monkeypatch):
    monkeypatch.setenv("HFP4_DEEP_GEMM_FALLBACK", "0")
    a, b, c = _operands(torch.bfloat16, 5, 7, 0, "cpu", 6)
    d = torch.full((5, 7), float("nan"))
    dg.cublaslt_gemm_nt(a, b, d, c=c)
    assert torch.equal(d, c)
    dg.cublaslt_gemm_nt(a, b, d)
    assert torch.equal(d, torch.zeros(5, 7))


def test_layouts_transpose_as_deep_gemm(monkeypatch):
    monkeypatch.setenv("HFP4_DEEP_GEMM_FALLBACK", "0")
    a, b, _ = _operands(torch.bfloat16, 16, 24, 32, "cpu", 2)
    ref = torch.empty(16, 24, dtype=torch.float32)
    dg.cublaslt_gemm_nt(a, b, ref)
    for fn, x, y in ((dg.cublaslt_gemm_nn, a, b.t()), (dg.cublaslt_gemm_tn, a.t(), b.t()),
                     (dg.cublaslt_gemm_tt, a.t(), b)):
        d = torch.full_like(ref, float("nan"))
        fn(x, y, d)
        assert torch.allclose(d, ref, rtol=2.0 ** -22, atol=0), fn.__name__


def test_bad_arguments_name_the_operand(monkeypatch):
    monkeypatch.setenv("HFP4_DEEP_GEMM_FALLBACK", "0")
    a, b, _ = _operands(torch.bfloat16, 8, 16, 32, "cpu", 3)
    d = torch.empty(8, 16, dtype=torch.bfloat16)
    with pytest.raises(hfp4.InvalidArgument, match="b.shape"):
        dg.cublaslt_gemm_nt(a, b[:, :16], d)
    with pytest.raises(hfp4.InvalidArgument, match="d .shape"):
        dg.cublaslt_gemm_nt(a, b, d[:4])
    with pytest.raises(hfp4.InvalidArgument, match="a.dtype"):
        dg.cublaslt_gemm_nt(a.float(), b, d)
    with pytest.raises(hfp4.InvalidArgument, match="c .shape"):
        dg.cublaslt_gemm_nt(a, b, d, c=d[:, :8])
    with pytest.raises(hfp4.InvalidArgument, match="d's dtype"):  # (DeepGEMM's rule: C has D's dtype)
        dg.cublaslt_gemm_nt(a, b, d, c=d.float())
    with pytest.raises(hfp4.InvalidArgument, match="N-major"):
        dg.cublaslt_gemm_nt(a, b, torch.empty(16, 8, dtype=torch.bfloat16).t())
    with pytest.raises(hfp4.InvalidArgument, match="2-D"):
        dg.cublaslt_gemm_nt(a[None], b, d)
    with pytest.raises(ValueError):  # (InvalidArgument is a ValueError and "Assertion error ..." text)
        dg.cublaslt_gemm_nt(a, b, d.int())


def test_k_grouped_names_exist_and_fall_back(monkeypatch):
    monkeypatch.setenv("HFP4_DEEP_GEMM_FALLBACK", "0")
    for name in ("k_grouped_fp8_gemm_nt_contiguous", "k_grouped_fp8_gemm_tn_contiguous", "cublaslt_gemm_nt",
                 "cublaslt_gemm_nn", "cublaslt_gemm_tn", "cublaslt_gemm_tt"):
        assert name in dg.__all__ and callable(getattr(dg, name)), name
    with pytest.raises(NotImplementedError):
        dg.k_grouped_fp8_gemm_nt_contiguous(None, None, None, [128], None)


@pytest.mark.gpu
@pytest.mark.skipif(FP8 is None, reason="torch without float8_e4m3fn")
@pytest.mark.parametrize("dtype", ["fp8", "bf16"])
@pytest.mark.parametrize("shape", [(256, 512, 1024), (33, 40, 72)])  # (the second: FP8 takes the exact path)
@pytest.mark.parametrize("with_c", [False, True])
def test_gpu_cublaslt(dtype, shape, with_c, monkeypatch):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    monkeypatch.setenv("HFP4_DEEP_GEMM_FALLBACK", "0")
    m, n, k = shape
    dt = FP8 if dtype == "fp8" else torch.bfloat16
    a, b, c = _operands(dt, m, n, k, "cuda", 4)
    for out in (torch.bfloat16, torch.float32):
        d = torch.full((m, n), float("nan"), dtype=out, device="cuda")
        cd = c.to(out) if with_c else None
        dg.cublaslt_gemm_nt(a, b, d, c=cd)
        torch.cuda.synchronize()
        _check(d, a, b, cd, fp32_sums=True)


def test_testing_names():
    from hfp4.deep_gemm.testing import calc_diff, count_bytes, ignore_env, get_arch_major, bench_kineto  # noqa: F401
    import os
    x = torch.randn(64, 32)
    assert float(calc_diff(x, x)) == pytest.approx(0.0, abs=1e-15)
    assert calc_diff(x, -x).item() == pytest.approx(2.0)  # (a 0-d tensor, as DeepGEMM's)
    assert float(calc_diff(torch.zeros(3), torch.zeros(3))) == 0.0
    y = x + 1e-3 * torch.randn(64, 32)
    ref = float(((x.double() - y.double()) ** 2).sum() / (x.double() ** 2 + y.double() ** 2).sum())
    assert float(calc_diff(x, y)) == pytest.approx(ref, rel=1e-6)
    assert count_bytes(x, None, (torch.empty(4, dtype=torch.bfloat16), [torch.empty(2, dtype=torch.int8)])) == \
        64 * 32 * 4 + 8 + 2
    os.environ["HFP4_TEST_IGNORED"] = "1"
    seen = []
    ignore_env("HFP4_TEST_IGNORED", lambda: True)(lambda: seen.append(os.environ.get("HFP4_TEST_IGNORED")))()
    ignore_env("HFP4_TEST_IGNORED", lambda: False)(lambda: seen.append(os.environ.get("HFP4_TEST_IGNORED")))()
    assert seen == [None, "1"] and os.environ.pop("HFP4_TEST_IGNORED") == "1"
    os.environ["DG_USE_NVIDIA_TOOLS"] = "1"
    try:
        assert bench_kineto(lambda: None, ("a", "b")) == (1, 1) and bench_kineto(lambda: None, "a") == 1
    finally:
        del os.environ["DG_USE_NVIDIA_TOOLS"]
    with pytest.raises(ValueError):
        bench_kineto(lambda: None, ["gemm_"])


@pytest.mark.gpu
def test_bench_kineto_times_the_cublaslt_baseline(monkeypatch):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from hfp4.deep_gemm.testing import bench_kineto, get_arch_major
    monkeypatch.setenv("HFP4_DEEP_GEMM_FALLBACK", "0")
    assert get_arch_major() >= 9
    a, b, _ = _operands(FP8, 2048, 2048, 2048, "cuda", 5)
    d = torch.empty(2048, 2048, dtype=torch.bfloat16, device="cuda")
    t, split_k = bench_kineto(lambda: dg.cublaslt_gemm_nt(a, b, d), ("nvjet", "reduce"), num_tests=5,
                              suppress_kineto_output=True)
    # (DeepGEMM's test times its baseline by these names: cuBLASLt's kernels must be what ran)
    assert 1e-6 < t < 1e-2, t
    assert split_k >= 0


@pytest.mark.gpu
@pytest.mark.skipif(FP8 is None, reason="torch without float8_e4m3fn")
def test_fp8_without_c_runs_one_gemm_kernel(monkeypatch):
    """FP8 without C: cuBLASLt writes D itself (no FP32 product copied into D by a second kernel)"""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    monkeypatch.setenv("HFP4_DEEP_GEMM_FALLBACK", "0")
    a, b, _ = _operands(FP8, 256, 512, 1024, "cuda", 6)
    for out in (torch.bfloat16, torch.float32):
        d = torch.full((256, 512), float("nan"), dtype=out, device="cuda")
        dg.cublaslt_gemm_nt(a, b, d)  # (warm: the unit scale made once, outside the profile)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            dg.cublaslt_gemm_nt(a, b, d)
            torch.cuda.synchronize()
        kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                   and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
        assert len(kernels) == 1, kernels
        _check(d, a, b, None, fp32_sums=True)


def test_kineto_output_silenced_at_fd_level(capfd):
    import os
    from hfp4._testing import _silenced
    with _silenced():
        os.write(1, b"from C++ stdout\n")
        os.write(2, b"from C++ stderr\n")
        print("from python")
    print("after")
    out, err = capfd.readouterr()
    assert out == "after\n" and err == ""
