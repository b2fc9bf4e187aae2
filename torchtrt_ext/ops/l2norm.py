"""L2Norm: ``x / max(||x||_2 over axis, eps)``, the semantics of ``torch.nn.functional.normalize`` (p=2).

A detection head's ``x / x.norm(dim=1, keepdim=True)`` exports as ReduceL2 -> Div, which TensorRT runs
slowly; TensorRT 11 also removed its own Normalize plugin. Any rank >= 2; float32, float16, bfloat16.
The CUDA kernel (csrc/kernels/l2norm.cu) accumulates in FP32; so does the decomposition.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from torchtrt_ext.errors import InvalidAttributeError, InvalidInputError
from torchtrt_ext.ops._l2norm_cuda import l2norm_cuda_unchecked, launch_l2norm
from torchtrt_ext.ops._torch_op import define_op
from torchtrt_ext.ops.spec import Attr, Decomposer, OpSpec, Shape, finite_positive


def _eager(x: torch.Tensor, axis: int, eps: float) -> torch.Tensor:
    norm = torch.linalg.vector_norm(x, ord=2, dim=axis, keepdim=True, dtype=torch.float32)
    y: torch.Tensor = x.float() / norm.clamp_min(eps)
    return y.to(x.dtype)


def _prepare(shapes: list[Shape], dtypes: list[torch.dtype], axis: int, eps: float) -> dict[str, Any]:
    rank = len(shapes[0])
    if rank < 2:
        raise InvalidInputError(f"L2Norm: input 'x' must have rank >= 2, got shape {list(shapes[0])}",
                                remedy="add a batch dimension, e.g. x.unsqueeze(0)")
    if not -rank <= axis < rank:
        raise InvalidAttributeError(f"L2Norm: argument dim={axis} is out of range for a rank-{rank} input. "
                                    f"Allowed: {-rank} to {rank - 1}.")
    return {"axis": axis % rank, "eps": eps}


def _shape_rule(shapes: list[Shape], dtypes: list[torch.dtype], axis: int,
                eps: float) -> list[tuple[Shape, torch.dtype]]:
    return [(shapes[0], dtypes[0])]


def _decompose(d: Decomposer, inputs: list[str], outputs: list[str], axis: int, eps: float) -> None:
    """The sum of squares over ``axis`` as the first element of a reverse CumSum (its axis is a 0-D input, the Gather's
    an attribute, so both take the node's ``axis`` in the ONNX function; a Reduce* needs its axes as a 1-D constant,
    which TensorRT-RTX's parser only takes from a Constant node that cannot hold an int attribute)."""
    x32 = d.op("Cast", inputs[0], to=1)  # FLOAT: accumulate in FP32 whatever the input type
    sums = d.op("CumSum", d.op("Mul", x32, x32), d.const(axis, np.int64), reverse=1)
    norm = d.op("Sqrt", d.op("Gather", sums, d.const([0], np.int64), axis=axis))  # keeps the axis, size 1
    y32 = d.op("Div", x32, d.op("Max", norm, d.const(eps)))
    d.op("CastLike", y32, inputs[0], out=outputs[0])


SPEC = OpSpec(
    name="L2Norm",
    inputs=("x",),
    outputs=("y",),
    attrs=(
        Attr("axis", "int", default=1, doc="axis to normalize over; negative counts from the end", arg="dim",
             allowed="an int in [-rank, rank-1]"),
        Attr("eps", "float", default=1e-6, doc="lower bound of the norm (clamps it, as F.normalize does)",
             check=finite_positive, allowed="a finite float > 0"),
    ),
    eager=_eager,
    shape_rule=_shape_rule,
    decompose=_decompose,
    prepare=_prepare,
    cuda=l2norm_cuda_unchecked,  # the op checked x and axis (once per signature): the launcher need not again
    launch=launch_l2norm,
    doc="y = x / max(||x||_2 over axis, eps)",
)

L2NORM = define_op(SPEC)


def l2norm(x: torch.Tensor, dim: int = 1, eps: float = 1e-6) -> torch.Tensor:
    """``x / max(||x||_2 over dim, eps)`` (``F.normalize`` semantics); exports as one torchtrt_ext L2Norm node."""
    y: torch.Tensor = L2NORM(x, axis=dim, eps=eps)  # the op returns Any: its outputs are the spec's to say
    return y
