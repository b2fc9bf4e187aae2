"""Module wrappers of the custom ops, for drop-in use in model code."""
from __future__ import annotations

import torch

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
