"""Module wrappers of the custom ops, for drop-in use in model code."""
from __future__ import annotations

import math

import torch

from torchtrt_ext.errors import InvalidAttributeError
from torchtrt_ext.ops.deform_conv2d import SPEC as _DCN_SPEC
from torchtrt_ext.ops.deform_conv2d import deform_conv2d
from torchtrt_ext.ops.l2norm import SPEC as _L2NORM_SPEC
from torchtrt_ext.ops.l2norm import l2norm


class L2Norm(torch.nn.Module):
    """``x / max(||x||_2 over dim, eps)``; exports as one torchtrt_ext L2Norm node (attributes checked here)."""

    def __init__(self, dim: int = 1, eps: float = 1e-6) -> None:
        super().__init__()
        checked = _L2NORM_SPEC.validate_attrs({"axis": dim, "eps": eps})
        self.dim, self.eps = checked["axis"], checked["eps"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return l2norm(x, dim=self.dim, eps=self.eps)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, eps={self.eps}"


def _pair(value: int | tuple[int, int], name: str) -> tuple[int, int]:
    """``value`` as (h, w): an int for both, or a pair of ints (as torch.nn.Conv2d takes them)."""
    pair = (value, value) if isinstance(value, int) else tuple(value) if isinstance(value, (tuple, list)) else ()
    if len(pair) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair):
        raise InvalidAttributeError(f"DeformConv2d: {name}={value!r} is not an int or a pair of ints",
                                    remedy=f"pass {name}=3 or {name}=(3, 3)")
    return pair[0], pair[1]


class DeformConv2d(torch.nn.Module):
    """Modulated deformable convolution (torchvision semantics); owns weight and bias, takes offset and mask.

    Exports as one torchtrt_ext DeformConv2d node.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, int],
                 stride: int | tuple[int, int] = 1, padding: int | tuple[int, int] = 0,
                 dilation: int | tuple[int, int] = 1, groups: int = 1, bias: bool = True) -> None:
        super().__init__()
        kh, kw = _pair(kernel_size, "kernel_size")
        sizes = {"in_channels": in_channels, "out_channels": out_channels, "kernel_size": kernel_size}
        bad = {k: v for k, v in sizes.items() if min((kh, kw) if k == "kernel_size" else (v,)) < 1}
        if bad:
            raise InvalidAttributeError(f"DeformConv2d: {', '.join(f'{k}={v!r}' for k, v in bad.items())} must be "
                                        ">= 1. Remedy: pass positive channel counts and kernel sizes")
        checked = _DCN_SPEC.validate_attrs({"stride": _pair(stride, "stride"), "padding": _pair(padding, "padding"),
                                            "dilation": _pair(dilation, "dilation"), "groups": groups})
        if in_channels % groups or out_channels % groups:
            raise InvalidAttributeError(f"DeformConv2d: in_channels={in_channels} and out_channels={out_channels} "
                                        f"must be divisible by groups={groups}")
        self.stride, self.padding, self.dilation = checked["stride"], checked["padding"], checked["dilation"]
        self.groups = groups
        self.weight = torch.nn.Parameter(torch.empty(out_channels, in_channels // groups, kh, kw))
        self.bias = torch.nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torchvision's DeformConv2d initialization (kaiming uniform, a=sqrt(5))."""
        torch.nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * self.weight.shape[2] * self.weight.shape[3]
            torch.nn.init.uniform_(self.bias, -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))

    def forward(self, input: torch.Tensor, offset: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return deform_conv2d(input, offset, self.weight, self.bias, mask=mask, stride=self.stride,
                             padding=self.padding, dilation=self.dilation, groups=self.groups)
