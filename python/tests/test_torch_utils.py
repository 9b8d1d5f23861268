"""hfp4.deep_gemm on torch CPU tensors (needs torch, no GPU): the utils quantizers (a port of
DeepGEMM's math.py) against the C quantizers, and the layout helpers against the numpy layer."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hfp4.deep_gemm as dg  # noqa: E402
from hfp4 import host  # noqa: E402


def _x(seed, m, k, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g) * torch.exp2(torch.randint(-6, 6, (m, 1), generator=g).float())
    return x.to(dtype)


def _np(t):
    return t.contiguous().view(torch.uint8).numpy() if t.element_size() == 1 else t.numpy()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("gran_k,packed", [(128, False), (32, False), (32, True)])
def test_per_token_cast_to_fp8_matches_c(dtype, gran_k, packed):
    x = _x(1, 33, 300, dtype)
    q, sf = dg.utils.per_token_cast_to_fp8(x, True, gran_k, packed)
    xin = x.float().numpy() if dtype == torch.float32 else x.view(torch.int16).numpy().view(np.uint16)
    hq, hsf = host.per_token_cast_to_fp8(xin, True, gran_k, packed)
    assert q.dtype == torch.float8_e4m3fn and (q.view(torch.uint8).numpy() == hq).all()
    assert (sf.numpy().view(np.uint32) == hsf.view(np.uint32)).all()


@pytest.mark.parametrize("packed", [False, True])
def test_per_token_cast_to_fp4_matches_c(packed):
    x = _x(2, 17, 256)
    q, sf = dg.utils.per_token_cast_to_fp4(x, True, 32, packed)
    hq, hsf = host.per_token_cast_to_fp4(x.numpy(), True, 32, packed)
    assert q.dtype == torch.int8 and (q.view(torch.uint8).numpy() == hq).all()
    assert (sf.numpy().view(np.uint32) == hsf.view(np.uint32)).all()


def test_per_block_cast_to_fp8_matches_c():
    x = _x(3, 200, 300)
    q, sf = dg.utils.per_block_cast_to_fp8(x, True)
    hq, hsf = host.per_block_cast_to_fp8(x.numpy(), True)
    assert (q.view(torch.uint8).numpy() == hq).all() and (sf.numpy() == hsf).all()


def test_layout_helpers_on_cpu_tensors():
    sf = torch.rand(3, 10, 5)
    out = dg.get_mn_major_tma_aligned_tensor(sf)
    assert out.stride() == (12 * 5, 1, 12) and torch.equal(out, sf)
    assert dg.get_mn_major_tma_aligned_tensor(out) is out
    p = torch.exp2(torch.randint(-10, 10, (10, 5)).float())
    packed = dg.get_mn_major_tma_aligned_packed_ue8m0_tensor(p)
    assert packed.dtype == torch.int32 and packed.stride() == (1, 12)
    assert (packed.numpy() == host.get_mn_major_tma_aligned_packed_ue8m0_tensor(p.numpy())).all()
    ones = torch.ones(4, 128, 8)
    t = dg.transform_sf_into_required_layout(ones, 128, 256, (1, 1, 32), num_groups=4, is_sfa=False, arch=120)
    assert t.shape == (4, 128, 2) and t.stride() == (256, 1, 128)
    with pytest.raises(NotImplementedError):
        dg.transform_sf_into_required_layout(torch.ones(128, 4), 128, 256, (1, 1, 64), is_sfa=False, arch=120)
