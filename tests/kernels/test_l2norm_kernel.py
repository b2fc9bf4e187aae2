"""The L2Norm CUDA kernel against a float64 reference (GPU only; skipped with the reason elsewhere).

Every launch writes into an output poisoned with NaN, so an element the kernel forgets fails the check; inputs are
fresh random normals each run. Error = ||out - ref|| / ||ref|| over the tensor, ref = float64 F.normalize.
"""
from __future__ import annotations

import pytest
import torch

from tests.helpers import kernels_library_or_skip
from torchtrt_ext import ops

pytestmark = pytest.mark.gpu

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 1e-2}
EPS = 1e-6

# (shape, axis): NCHW channel axis, last axis, and awkward sizes (C = 1, C = 3, H*W = 1, odd sizes, C = 4096,
# long rows, large outer), ranks 2..5
CASES = [
    ((2, 1, 5, 7), 1),
    ((2, 3, 5, 7), 1),
    ((4, 64, 1, 1), 1),
    ((3, 37, 13, 11), 1),
    ((1, 64, 80, 80), 1),
    ((2, 256, 16, 16), 1),
    ((1, 1024, 8, 8), 1),
    ((2, 4096, 3, 5), 1),
    ((2, 4096, 64), 1),
    ((2, 2048, 33), 1),
    ((8, 16, 1024), 2),
    ((5, 4096), 1),
    ((3, 16385), 1),
    ((2, 33, 17), 2),
    ((7, 1), 1),
    ((3, 5), 0),
    ((3, 5), 1),
    ((2, 3, 4, 5, 6), 0),
    ((2, 3, 4, 5, 6), 2),
    ((2, 3, 4, 5, 6), 4),
    ((300_001, 2, 3), 1),
    ((1 << 17, 7), 1),
    ((1 << 16, 24), 1),
    ((1000, 257), 1),
    ((2, 8192, 8), 1),
    # 512 < C <= 1024 (the pipelined column kernel): a persistent grid looping over tiles, C not a multiple of the
    # 64 threads along C, a last tile only partly inside the row
    ((3, 1024, 48, 64), 1),
    ((6, 600, 20, 24), 1),
    ((2, 513, 7, 8), 1),
    # small tensors (the one-wave kernel with a 2D grid): one row per thread (C <= 32) and 16 (C = 500), rows of the
    # slice that end inside the last tile or inside a block's 8 threads, many outer slices along the grid's y
    ((3, 20, 8, 12), 1),
    ((2, 500, 4, 10), 1),
    ((5, 33, 6, 20), 1),
    ((264, 16, 32), 1),
    # last axis: rows spread over several warps (up to 512 lanes) and rows that end inside a lane's vectors
    ((3, 32768), 1),
    ((4, 1000), 1),
    ((2, 3, 4096), 2),
    # last axis, rows of exactly lanes x 16 elements (the exact-fit kernel, 1 to 512 lanes): row counts that leave
    # the last 128-thread block part empty, and a large grid
    ((1000, 16), 1),
    ((77, 32), 1),
    ((2, 7, 256), 2),
    ((5, 3, 512), 2),
    ((3, 8192), 1),
    ((100_003, 64), 1),
]


@pytest.fixture(scope="module")
def l2norm_cuda():
    from torchtrt_ext.ops._l2norm_cuda import l2norm_cuda

    kernels_library_or_skip()
    return l2norm_cuda


def reference(x: torch.Tensor, axis: int, eps: float = EPS) -> torch.Tensor:
    x64 = x.double()
    return x64 / x64.norm(dim=axis, keepdim=True).clamp_min(eps)


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref).norm() / ref.norm().clamp_min(1e-300)).item()


def poisoned_like(x: torch.Tensor) -> torch.Tensor:
    return torch.full_like(x, float("nan"), memory_format=torch.contiguous_format)


def run_checked(l2norm_cuda, x: torch.Tensor, axis: int, eps: float = EPS) -> torch.Tensor:
    out = poisoned_like(x)
    result = l2norm_cuda(x, axis, eps, out=out)
    torch.cuda.synchronize()
    assert result is out
    assert not out.isnan().any(), f"{int(out.isnan().sum())} elements left unwritten (NaN poison) or NaN"
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).split(".")[-1])
@pytest.mark.parametrize("shape, axis", CASES, ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v))
def test_matches_float64_reference(l2norm_cuda, shape, axis, dtype) -> None:
    x = torch.randn(shape, device="cuda", dtype=dtype)
    out = run_checked(l2norm_cuda, x, axis)
    err = rel_error(out, reference(x, axis))
    assert err < TOL[dtype], f"relative error {err:.2e} >= {TOL[dtype]:.0e} for {dtype} {list(shape)} axis {axis}"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).split(".")[-1])
def test_zero_vectors_give_zeros_not_nan(l2norm_cuda, dtype) -> None:
    for shape, axis in [((2, 64, 9, 9), 1), ((4, 1024), 1), ((3, 5000, 4), 1), ((2, 3, 4), 1), ((2, 800, 16, 16), 1)]:
        x = torch.randn(shape, device="cuda", dtype=dtype)
        index = [slice(None)] * len(shape)
        index[0] = 0
        x[tuple(index)] = 0  # first outer slice: every vector in it is zero
        out = run_checked(l2norm_cuda, x, axis)
        assert torch.equal(out[0], torch.zeros_like(out[0])), f"zero vectors not mapped to zeros for {shape}"
        assert rel_error(out[1:], reference(x[1:], axis)) < TOL[dtype]
        zeros = run_checked(l2norm_cuda, torch.zeros(shape, device="cuda", dtype=dtype), axis)
        assert not zeros.any()


def test_norm_below_eps_divides_by_eps(l2norm_cuda) -> None:
    x = torch.randn(4, 32, 7, 7, device="cuda") * 1e-9  # norms ~6e-9, below eps
    out = run_checked(l2norm_cuda, x, 1, eps=1e-6)
    assert rel_error(out, reference(x, 1, 1e-6)) < 1e-6


def test_nan_in_a_vector_propagates_like_torch(l2norm_cuda) -> None:
    x = torch.randn(2, 16, 4, 4, device="cuda")
    x[0, 3, 1, 2] = float("nan")
    out = l2norm_cuda(x, 1, EPS)
    expected = torch.nn.functional.normalize(x, dim=1, eps=EPS)
    assert torch.equal(out.isnan(), expected.isnan())


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).split(".")[-1])
def test_non_contiguous_and_misaligned_inputs(l2norm_cuda, dtype) -> None:
    base = torch.randn(4, 6, 40, 32, device="cuda", dtype=dtype)
    views = {
        "channels_last": base.contiguous(memory_format=torch.channels_last),
        "permuted": base.permute(0, 3, 1, 2),
        "strided": base[:, ::2, :, 1::3],
        "transposed_2d": base[0, 0].t(),
    }
    for name, x in views.items():
        for axis in range(x.dim()):
            out = l2norm_cuda(x, axis, EPS)
            assert out.is_contiguous() and out.shape == x.shape
            err = rel_error(out, reference(x, axis))
            assert err < TOL[dtype], f"{name} axis {axis}: relative error {err:.2e}"
    flat = torch.randn(1 + 8 * 64 * 10, device="cuda", dtype=dtype)
    misaligned = flat[1:].view(8, 64, 10)  # data pointer 1 element past a 16-byte boundary: scalar loads
    assert misaligned.data_ptr() % 16 != 0
    for axis in range(3):
        out = run_checked(l2norm_cuda, misaligned, axis)
        assert rel_error(out, reference(misaligned, axis)) < TOL[dtype]
    rows = flat[1:1 + 4 * 1024].view(4, 1024)  # a power-of-two row length, misaligned: not the exact-fit kernel
    assert rel_error(run_checked(l2norm_cuda, rows, 1), reference(rows, 1)) < TOL[dtype]


def test_in_place_output(l2norm_cuda) -> None:
    for shape, axis in [((2, 64, 20, 20), 1), ((64, 1024), 1), ((2, 4096, 3, 5), 1), ((3, 1024, 48, 64), 1)]:
        x = torch.randn(shape, device="cuda")
        ref = reference(x, axis)
        l2norm_cuda(x, axis, EPS, out=x)
        assert rel_error(x, ref) < 1e-6


def test_runs_on_the_current_stream(l2norm_cuda) -> None:
    stream = torch.cuda.Stream()
    x = torch.randn(8, 256, 64, 64, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(50_000_000)  # keep the side stream busy: a launch on another stream would finish first
        out = l2norm_cuda(x, 1, EPS)
        done = torch.cuda.Event()
        done.record(stream)
    assert not done.query(), "the side stream finished too early for this check to mean anything"
    torch.cuda.synchronize()
    assert rel_error(out, reference(x, 1)) < 1e-6


def test_output_does_not_fit_is_rejected(l2norm_cuda) -> None:
    from torchtrt_ext.errors import InvalidInputError

    x = torch.randn(2, 3, 4, device="cuda")
    with pytest.raises(InvalidInputError, match="out is"):
        l2norm_cuda(x, 1, EPS, out=torch.empty(2, 3, 5, device="cuda"))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).split(".")[-1])
def test_public_op_uses_the_kernel_on_cuda(l2norm_cuda, dtype) -> None:
    x = torch.randn(2, 48, 10, 12, device="cuda", dtype=dtype)
    for dim in (1, -1):
        ours = l2norm_cuda(x, dim % x.dim(), EPS)
        assert torch.equal(ops.l2norm(x, dim=dim, eps=EPS), ours)
        expected = torch.nn.functional.normalize(x.double(), dim=dim, eps=EPS)
        assert rel_error(ours, expected) < TOL[dtype]


def test_public_op_gradient_on_cuda(l2norm_cuda) -> None:
    x = torch.randn(2, 16, 5, 5, device="cuda", requires_grad=True)
    g = torch.randn(2, 16, 5, 5, device="cuda")
    (ops.l2norm(x, dim=1) * g).sum().backward()
    x_ref = x.detach().clone().requires_grad_(True)
    (torch.nn.functional.normalize(x_ref, dim=1, eps=EPS) * g).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-5, atol=1e-6)
