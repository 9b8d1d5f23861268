"""The scale-factor layout toolkit's CPU calls through the numpy layer (DeepGEMM's layout
utilities; docs/SF_LAYOUT.md)."""
import numpy as np
import pytest

import hfp4
from hfp4 import host
import dg_math_ref as R


def _pow2(rng, shape, lo=-20, hi=20):
    return np.exp2(rng.integers(lo, hi, size=shape)).astype(np.float32)


def _elem_strides(a):
    return tuple(s // a.itemsize for s in a.strides)


def test_pr403_sm120_example():
    # DeepGEMM PR #403: transform_sf_into_required_layout(torch.ones(4, 128, 8), 128, 256, (1, 1, 32),
    # num_groups=4, is_sfa=False) on SM120 -> int32 shape (4, 128, 2), strides (256, 1, 128).
    sf = np.ones((4, 128, 8), np.float32)
    out = host.transform_sf_into_required_layout(sf, 128, 256, (1, 1, 32), num_groups=4, is_sfa=False, arch=120)
    assert out.dtype == np.int32 and out.shape == (4, 128, 2)
    assert _elem_strides(out) == (256, 1, 128)
    assert (out.view(np.uint32) == 0x7F7F7F7F).all()   # four exponent bytes of 1.0 per word
    out100 = host.transform_sf_into_required_layout(sf, 128, 256, (1, 1, 32), num_groups=4, is_sfa=False, arch=100)
    assert (out100 == out).all() and _elem_strides(out100) == (256, 1, 128)


def test_tma_aligned_size():
    assert host.get_tma_aligned_size(5, 4) == 8
    assert host.get_tma_aligned_size(5, 2) == 8
    assert host.get_tma_aligned_size(5, 1) == 16
    assert host.get_tma_aligned_size(0, 4) == 0
    assert host.get_tma_aligned_size(128, 4) == 128
    with pytest.raises(hfp4.InvalidArgument) as ei:
        host.get_tma_aligned_size(5, 3)
    assert "element_size" in str(ei.value)


@pytest.mark.parametrize("shape", [(5, 3), (8, 1), (2, 5, 3), (1, 7, 2)])
def test_mn_major_tma_aligned_tensor(shape):
    rng = np.random.default_rng(0)
    sf = rng.standard_normal(shape).astype(np.float32)
    out = host.get_mn_major_tma_aligned_tensor(sf)
    mn, sk = shape[-2], shape[-1]
    t = R.align(mn, 4)
    assert out.shape == sf.shape and (out == sf).all()
    want = ((t * sk,) if len(shape) == 3 else ()) + (1, t)
    got = _elem_strides(out)
    assert got[-1] == want[-1] and (mn == 1 or got[-2] == 1) and (len(shape) == 2 or shape[0] == 1 or got[0] == want[0])
    # padding rows are zeros
    g = shape[0] if len(shape) == 3 else 1
    whole = np.lib.stride_tricks.as_strided(out, shape=(g, sk, t), strides=(t * sk * 4, t * 4, 4))
    assert (whole[:, :, mn:] == 0).all()
    # already in the layout: returned as is (DeepGEMM's pass-through)
    assert host.get_mn_major_tma_aligned_tensor(out) is out


def test_packed_ue8m0_tensor():
    rng = np.random.default_rng(1)
    mn, sk = 6, 5
    e = rng.integers(100, 150, size=(mn, sk))
    sf = np.exp2(e - 127.0).astype(np.float32)
    out = host.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf)
    assert out.dtype == np.int32 and out.shape == (mn, 2) and _elem_strides(out) == (1, 8)
    b = np.ascontiguousarray(out).view(np.uint8).reshape(mn, 2, 4)
    want = np.zeros((mn, 8), np.uint8)
    want[:, :sk] = e
    assert (b.reshape(mn, 8) == want).all()   # missing K-groups are 0 bytes
    bad = sf.copy()
    bad[2, 3] = 0.3
    with pytest.raises(hfp4.InvalidArgument) as ei:
        host.get_mn_major_tma_aligned_packed_ue8m0_tensor(bad)
    assert "power of two" in str(ei.value) and "mn = 2" in str(ei.value)
    up = host.get_mn_major_tma_aligned_packed_ue8m0_tensor(bad, round_up=True)
    assert np.ascontiguousarray(up).view(np.uint8).reshape(mn, 8)[2, 3] == 126  # 0.3 -> 0.5


def test_packed_ue8m0_tensor_psum_and_broadcast():
    rng = np.random.default_rng(2)
    mn, sk = 12, 4
    sf = _pow2(rng, (mn, sk))
    sf[3] = np.nan          # rows outside every group are never read
    sf[9:] = np.nan
    ends = np.array([3, 9], np.int32)
    out = host.get_mn_major_tma_aligned_packed_ue8m0_tensor(sf, ends, alignment=4)
    words = np.ascontiguousarray(out)[:, 0].view(np.uint8).reshape(mn, 4)
    want = R.ue8m0_bytes(np.nan_to_num(sf))
    inside = np.zeros(mn, bool)
    inside[0:3] = inside[4:9] = True
    assert (words[inside] == want[inside]).all() and (words[~inside] == 0).all()
    # row broadcast (gran_mn = 128 block scales -> per-row packed scales)
    blocks = _pow2(rng, (2, 3))
    out = host.get_mn_major_tma_aligned_packed_ue8m0_tensor(blocks, mn=200, gran_mn=128)
    got = np.ascontiguousarray(out)[:, 0].view(np.uint8).reshape(200, 4)[:, :3]
    assert (got == R.ue8m0_bytes(blocks)[np.arange(200) // 128]).all()


def test_transform_sm90_branches():
    rng = np.random.default_rng(3)
    m, n, k = 10, 256, 512
    # FP32 (1, 128) activations -> MN-major FP32
    sfa = rng.random((m, k // 128), dtype=np.float32)
    out = host.transform_sf_into_required_layout(sfa, m, k, (1, 128, 128), is_sfa=True, arch=90)
    assert out.dtype == np.float32 and (out == sfa).all() and _elem_strides(out) == (1, 12)
    # FP32 (128, 128) weights, K-major contiguous -> passed through unchanged
    sfb = rng.random((n // 128, k // 128), dtype=np.float32)
    assert host.transform_sf_into_required_layout(sfb, n, k, (1, 128, 128), is_sfa=False, arch=90) is sfb
    # hfp4: FP32 (1, 32) weight scales on SM90 -> MN-major FP32 (3D, grouped)
    sfw = rng.random((3, n, k // 32), dtype=np.float32)
    out = host.transform_sf_into_required_layout(sfw, n, k, (1, 32), num_groups=3, arch=90)
    assert out.shape == sfw.shape and (out == sfw).all() and _elem_strides(out) == (n * (k // 32), 1, n)
    # hfp4: packed int32 (1, 32) on SM90 -> MN-major int32
    packed = rng.integers(0, 2 ** 31, size=(m, k // 128), dtype=np.int32)
    out = host.transform_sf_into_required_layout(packed, m, k, (1, 32), arch=90)
    assert out.dtype == np.int32 and (out == packed).all() and _elem_strides(out) == (1, 12)


def test_transform_errors():
    with pytest.raises(hfp4.InvalidArgument) as ei:          # shaped for gran 32, recipe says 64
        host.transform_sf_into_required_layout(np.ones((128, 8), np.float32), 128, 256, (1, 1, 64), is_sfa=False,
                                               arch=120)
    assert "sf_k = 8" in str(ei.value)
    with pytest.raises(hfp4.Unsupported) as ei:              # shaped for 64: no layout exists
        host.transform_sf_into_required_layout(np.ones((128, 4), np.float32), 128, 256, (1, 1, 64), is_sfa=False,
                                               arch=120)
    assert "no SF layout" in str(ei.value) and isinstance(ei.value, NotImplementedError)
    sf = np.ones((128, 4), np.float32)
    with pytest.raises(hfp4.InvalidArgument) as ei:
        host.transform_sf_into_required_layout(sf, 128, 128, (1, 1, 32), arch=90)
    assert "is_sfa" in str(ei.value)
    with pytest.raises(hfp4.InvalidArgument) as ei:
        host.transform_sf_into_required_layout(sf, 128, 128, (0, 1, 32), is_sfa=True, arch=90)
    assert "> 0" in str(ei.value)
    with pytest.raises(hfp4.Unsupported):
        host.transform_sf_into_required_layout(sf, 128, 128, (1, 1, 32), is_sfa=False, disable_ue8m0_cast=True,
                                               arch=100)


def test_default_recipe_and_check_layout():
    assert host.get_default_recipe(np.float32, np.float32, 90) == (1, 128, 128)
    assert host.get_default_recipe(np.float32, np.int32, 100) == (1, 1, 128)
    assert host.get_default_recipe(np.float32, np.float32, 120) == (1, 128, 128)
    with pytest.raises(hfp4.Unsupported):
        host.get_default_recipe(np.int32, np.int32, 90)
    sf = np.ones((8, 2), np.float32)
    assert host.check_sf_layout(sf, 8, 256, 1, 128) is sf
    with pytest.raises(hfp4.InvalidArgument) as ei:
        host.check_sf_layout(sf, 8, 256, 1, 128, tma_stride_check=True)
    assert "Assertion" in str(ei.value)
    mn_major = host.get_mn_major_tma_aligned_tensor(sf)
    assert host.check_sf_layout(mn_major, 8, 256, 1, 128, tma_stride_check=True) is mn_major


def test_k_grouped_packed():
    rng = np.random.default_rng(4)
    mn, gran_k = 8, 32
    ks = [64, 160, 0, 32]                                   # K-groups: 2, 5, 0, 1
    n_g = [R.ceil_div(x, gran_k) for x in ks]
    sf_k = sum(n_g)
    e = rng.integers(110, 140, size=(sf_k, mn))
    sf = np.exp2(e - 127.0).astype(np.float32)              # [sf_k, mn]
    out = host.get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf, np.array(ks, np.int32), ks, gran_k, 128)
    rows = sum(R.ceil_div(x, 4) for x in n_g)
    assert out.shape == (rows, mn) and out.flags.c_contiguous
    got = out.view(np.uint8).reshape(rows, mn, 4)
    r_in = q = 0
    for g, cnt in enumerate(n_g):
        for p in range(R.ceil_div(cnt, 4)):
            for byte in range(4):
                j = 4 * p + byte
                want = e[r_in + j] if j < cnt else np.zeros(mn)
                assert (got[q + p, :, byte] == want).all()
        r_in += cnt
        q += R.ceil_div(cnt, 4)


def test_transpose_for_utccp():
    sf = np.arange(2 * 256 * 3, dtype=np.int32).reshape(2, 256, 3)
    out = host.transpose_sf_for_utccp(sf)
    assert out.shape == sf.shape and _elem_strides(out) == (256 * 3, 1, 256)
    want = sf.reshape(2, 2, 4, 32, 3).transpose(0, 1, 3, 2, 4).reshape(2, 256, 3)
    assert (out == want).all()
    with pytest.raises(hfp4.Unsupported):
        host.transpose_sf_for_utccp(np.zeros((100, 2), np.int32))
