"""TRTModule's input checks (runtime.check_inputs), run against an engine's recorded input specs and profiles with
no engine and no GPU: the inputs are FakeTensors on "cuda" devices (torch's own fake tensors: a device, a dtype and
a shape, no memory), a test double for the CUDA tensors a user passes. Every error names the input and what the
engine expects."""
from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from torchtrt_ext.backend.engine import TensorInfo
from torchtrt_ext.backend.profiles import Profile
from torchtrt_ext.errors import InvalidInputError
from torchtrt_ext.runtime import check_inputs

INPUTS = (TensorInfo("images", "float32", (-1, 3, 16, 16)), TensorInfo("scale", "float16", (-1, 1)))
PROFILES = (Profile({"images": ((1, 3, 16, 16), (4, 3, 16, 16), (8, 3, 16, 16)), "scale": ((1, 1), (4, 1), (8, 1))}),
            Profile({"images": ((9, 3, 16, 16), (16, 3, 16, 16), (32, 3, 16, 16)),
                     "scale": ((9, 1), (16, 1), (32, 1))}))


@pytest.fixture
def fake() -> Iterator[FakeTensorMode]:
    with FakeTensorMode() as mode:
        yield mode


def inputs(batch: int = 2, device: str = "cuda:0", images: dict | None = None, scale: dict | None = None) -> list:
    return [torch.empty(**{"size": (batch, 3, 16, 16), "dtype": torch.float32, "device": device, **(images or {})}),
            torch.empty(**{"size": (batch, 1), "dtype": torch.float16, "device": device, **(scale or {})})]


def test_fitting_inputs_give_their_device_and_the_first_profile_holding_them(fake: FakeTensorMode) -> None:
    assert check_inputs(INPUTS, PROFILES, inputs(batch=2)) == (torch.device("cuda:0"), 0)
    assert check_inputs(INPUTS, PROFILES, inputs(batch=20, device="cuda:1")) == (torch.device("cuda:1"), 1)


def test_a_cpu_input_is_refused_with_the_remedy(fake: FakeTensorMode) -> None:
    with pytest.raises(InvalidInputError, match=r"input 'images' \(shape \(2, 3, 16, 16\)\) is on cpu.*a CUDA "
                                                r"tensor.*images\.cuda\(\)"):
        check_inputs(INPUTS, PROFILES, inputs(device="cpu"))


def test_inputs_on_two_gpus_are_refused(fake: FakeTensorMode) -> None:
    with pytest.raises(InvalidInputError, match=r"input 'scale' is on cuda:1, another input on cuda:0.*one GPU"):
        check_inputs(INPUTS, PROFILES, inputs(scale={"device": "cuda:1"}))


def test_a_non_tensor_is_refused(fake: FakeTensorMode) -> None:
    with pytest.raises(InvalidInputError, match=r"input 'scale' is a list.*a torch\.Tensor"):
        check_inputs(INPUTS, PROFILES, [inputs()[0], [1.0, 2.0]])


@pytest.mark.parametrize("name,dtype", [("images", torch.float16), ("scale", torch.float32)])
def test_a_wrong_dtype_is_refused_naming_the_engines_type(fake: FakeTensorMode, name: str, dtype: torch.dtype) -> None:
    expected = {"images": "torch.float32", "scale": "torch.float16"}[name]
    with pytest.raises(InvalidInputError, match=rf"input '{name}' has dtype {dtype}.*{expected} \(the engine's "
                                                rf"input type\).*\.to\({expected}\)"):
        check_inputs(INPUTS, PROFILES, inputs(**{name: {"dtype": dtype}}))


@pytest.mark.parametrize("shape,rank", [((3, 16, 16), 3), ((16, 16), 2), ((1, 2, 3, 16, 16), 5)])
def test_another_rank_is_refused_as_a_rank_error(fake: FakeTensorMode, shape: tuple, rank: int) -> None:
    """A lower rank too (an unbatched image is the usual one), not left to the profile check's message."""
    with pytest.raises(InvalidInputError, match=rf"input 'images' has shape {re.escape(str(shape))} \(rank {rank}\).*"
                                                r"rank 4, shape like \[-1, 3, 16, 16\] \(-1: dynamic\)"):
        check_inputs(INPUTS, PROFILES, inputs(images={"size": shape}))


@pytest.mark.parametrize("batch", [0, 33])
def test_shapes_outside_every_profile_name_the_inputs_and_every_range(fake: FakeTensorMode, batch: int) -> None:
    with pytest.raises(InvalidInputError) as info:
        check_inputs(INPUTS, PROFILES, inputs(batch=batch))
    message = str(info.value)
    assert f"input shapes images ({batch}, 3, 16, 16), scale ({batch}, 1) fit no optimization profile" in message
    assert ("profile 0: images min (1, 3, 16, 16), opt (4, 3, 16, 16), max (8, 3, 16, 16), scale min (1, 1), "
            "opt (4, 1), max (8, 1); profile 1: images min (9, 3, 16, 16)") in message
    assert "compile(..., profiles=...)" in message
