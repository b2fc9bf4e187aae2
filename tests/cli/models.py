"""Models the CLI tests load through model specs (tests.cli.models:<factory>)."""
from __future__ import annotations

import torch

import torchtrt_ext


class TinyHead(torch.nn.Module):
    """A conv and an L2Norm head: the smallest model with a custom op."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torchtrt_ext.nn.L2Norm(dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.conv(x))


def make_head() -> torch.nn.Module:
    return TinyHead()


def not_a_model() -> int:
    return 3


def make_other() -> torch.nn.Module:
    """Same architecture as make_head, other weights: validation against make_head's export must fail."""
    model = TinyHead()
    with torch.no_grad():
        model.conv.weight.mul_(-1.5)
    return model


class ReluNormalize(torch.nn.Module):
    """An unfused ``F.normalize`` after a ReLU: an all-negative row becomes an all-zero vector (0 / eps)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.normalize(torch.relu(x), dim=1)


def make_relu_normalize() -> torch.nn.Module:
    return ReluNormalize()


class NestedOutputs(torch.nn.Module):
    """Outputs nested two levels: a dict holding a tuple and a dict."""

    def forward(self, x: torch.Tensor) -> dict[str, object]:
        return {"a": (x + 1, x * 2), "b": {"c": x - 1}}


def make_nested() -> torch.nn.Module:
    return NestedOutputs()


class DataDependentBranch(torch.nn.Module):
    """An ``if`` on a tensor's value: torch.export rejects it, the legacy tracer fixes the branch taken."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x * 2
        return x - 1


def make_branchy() -> torch.nn.Module:
    return DataDependentBranch()


class IntKeyedOutputs(torch.nn.Module):
    """A dict of per-level outputs keyed by int (as detection necks return them), one level a tuple."""

    def forward(self, x: torch.Tensor) -> dict[int, object]:
        return {3: x + 1, 4: (x * 2, x - 1)}


def make_int_keyed() -> torch.nn.Module:
    return IntKeyedOutputs()


class TokenEmbedding(torch.nn.Module):
    """Token ids -> embeddings, mean over the sequence: an int64 input whose values must lie in [0, 100)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(100, 8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embed(ids).mean(1)


def make_embedding() -> torch.nn.Module:
    return TokenEmbedding()


class FailsAtRunTime(torch.nn.Module):
    """Loads, then raises on every call: a benchmark candidate that fails."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("this candidate always fails")


def make_failing() -> torch.nn.Module:
    return FailsAtRunTime()


class MatMul(torch.nn.Module):
    """Two inputs whose order matters: ``x @ w`` (swapped, the shapes do not multiply)."""

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w


def make_matmul() -> torch.nn.Module:
    return MatMul()
