"""The ctypes layer: loader, function table against the headers, structure layouts against a C
compiler, and the status -> exception mapping."""
import ctypes
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import hfp4
from hfp4 import _lib as L

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADERS = [os.path.join(REPO, "include", h) for h in ("hfp4.h", "hfp4_sf_layout.h")]
have_headers = all(os.path.exists(h) for h in HEADERS)


def _prototypes():
    """name -> number of parameters, for every HFP4_API function of the two headers."""
    protos = {}
    for h in HEADERS:
        text = open(h).read()
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        for m in re.finditer(r"HFP4_API\s+[^;()]*?\b(hfp4_\w+)\s*\(([^;]*?)\)\s*;", text, flags=re.S):
            params = m.group(2).strip()
            depth, count = 0, 1
            for ch in params:
                depth += ch == "("
                depth -= ch == ")"
                count += ch == "," and depth == 0
            protos[m.group(1)] = 0 if params in ("void", "") else count
    return protos


@pytest.mark.skipif(not have_headers, reason="needs the source tree's include/")
def test_function_table_matches_headers():
    protos = _prototypes()
    assert len(protos) >= 50
    table = {name: len(argtypes) for name, _, argtypes in L.FUNCTIONS}
    assert table == protos


def test_every_declared_function_is_exported():
    lib = L.lib()
    for name, restype, argtypes in L.FUNCTIONS:
        fn = getattr(lib, name)
        assert fn.argtypes == argtypes and fn.restype == restype


@pytest.mark.skipif(not have_headers or shutil.which("cc") is None and shutil.which("gcc") is None,
                    reason="needs the headers and a C compiler")
def test_structures_match_the_c_layout(tmp_path):
    structs = [L.hfp4_scales, L.hfp4_matrix, L.hfp4_output, L.hfp4_gemm_problem, L.hfp4_moe_forward_problem,
               L.hfp4_device_info,
               L.hfp4_sf_tensor, L.hfp4_sf_recipe, L.hfp4_sf_psum, L.hfp4_sf_options, L.hfp4_sf_k_groups,
               L.hfp4_sf_transform_request, L.hfp4_sf_pair_request, L.hfp4_sf_pair_result]
    lines = []
    for s in structs:
        lines.append('printf("%s sizeof %%zu\\n", sizeof(%s));' % (s.__name__, s.__name__))
        for f in s._fields_:
            lines.append('printf("%s %s %%zu\\n", offsetof(%s, %s));' % (s.__name__, f[0], s.__name__, f[0]))
    src = tmp_path / "layout.c"
    src.write_text("#include <stdio.h>\n#include <stddef.h>\n#include \"hfp4.h\"\nint main(void) {\n%s\nreturn 0;\n}\n"
                   % "\n".join(lines))
    exe = tmp_path / "layout"
    cc = shutil.which("cc") or shutil.which("gcc")
    subprocess.run([cc, "-std=c11", "-I", os.path.join(REPO, "include"), str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    want = {}
    for s in structs:
        want["%s sizeof" % s.__name__] = ctypes.sizeof(s)
        for f in s._fields_:
            want["%s %s" % (s.__name__, f[0])] = getattr(s, f[0]).offset
    got = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in out if line}
    assert got == want


def test_version_and_names():
    assert hfp4.version() == "%d.%d.%d" % (hfp4.version_number() // 10000, hfp4.version_number() // 100 % 100,
                                          hfp4.version_number() % 100)
    assert hfp4.version_number() // 10000 == L.ABI_MAJOR
    assert os.path.exists(hfp4.library_path())
    assert hfp4.status_name(2) == "HFP4_ERR_UNSUPPORTED"
    assert hfp4.dtype_name(L.DTYPE_FP4_E2M1) == "fp4_e2m1"
    assert L.lib().hfp4_dtype_storage_bytes(L.DTYPE_UE8M0_PACKED) == 4


def test_exception_hierarchy():
    assert issubclass(hfp4.InvalidArgument, hfp4.HFP4Error)
    assert issubclass(hfp4.InvalidArgument, ValueError)
    assert issubclass(hfp4.InvalidArgument, RuntimeError)
    assert issubclass(hfp4.Unsupported, NotImplementedError)
    assert issubclass(hfp4.Unsupported, hfp4.HFP4Error)
    for cls in (hfp4.NoDevice, hfp4.CudaError, hfp4.OutOfMemory, hfp4.InternalError):
        assert issubclass(cls, hfp4.HFP4Error) and issubclass(cls, RuntimeError)
    assert issubclass(hfp4.LibraryNotFound, ImportError)
    # no GPU (or a CPU-only build) lets callers fall back, like Unsupported; a CUDA error does not
    assert issubclass(hfp4.NoDevice, NotImplementedError)
    assert not issubclass(hfp4.CudaError, NotImplementedError)


@pytest.mark.parametrize("status,cls", [(1, hfp4.InvalidArgument), (2, hfp4.Unsupported), (3, hfp4.CudaError),
                                        (4, hfp4.OutOfMemory), (5, hfp4.NoDevice), (6, hfp4.InternalError),
                                        (7, hfp4.IOFailure)])
def test_status_mapping(status, cls):
    e = L.make_error(status, "detail text")
    assert type(e) is cls and e.status == status and e.detail == "detail text"
    assert "detail text" in str(e)
    assert e.status_name == hfp4.status_name(status)
    if cls is hfp4.InvalidArgument:
        assert "Assertion" in str(e)


def test_c_error_names_the_argument():
    lib = L.lib()
    out = ctypes.c_int64()
    with pytest.raises(hfp4.InvalidArgument) as ei:
        L.check(lib.hfp4_sf_get_tma_aligned_size(10, 3, ctypes.byref(out)))
    assert "element_size" in str(ei.value) and "Assertion" in str(ei.value)
    assert ei.value.status == L.ERR_INVALID_ARGUMENT


def test_device_query_answers_no_device_or_info():
    try:
        info = hfp4.device_info(0)
    except hfp4.NoDevice as e:
        assert e.status == L.ERR_NO_DEVICE and "hfp4_device_query" in str(e)
    else:
        assert info["cc_major"] >= 1 and info["name"]


def _run(code, **env):
    e = dict(os.environ)
    e.update(env)
    e["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e, capture_output=True, text=True)


def test_import_needs_no_library_and_a_bad_path_is_reported():
    r = _run("""
        import hfp4, hfp4.deep_gemm
        try:
            hfp4.version()
        except ImportError as e:
            print("LibraryNotFound" if isinstance(e, hfp4.LibraryNotFound) else "other", e)
        """, HFP4_LIBRARY="/nonexistent/libhfp4.so")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("LibraryNotFound") and "/nonexistent/libhfp4.so" in r.stdout


def test_library_found_without_env_in_the_source_tree():
    if not os.path.exists(os.path.join(REPO, "build", "libhfp4.so")):
        pytest.skip("no build/libhfp4.so in this source tree")
    env = {k: v for k, v in os.environ.items() if k != "HFP4_LIBRARY"}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", "import hfp4; print(hfp4.library_path())"], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert os.path.samefile(r.stdout.strip(), os.path.join(REPO, "build", "libhfp4.so"))
