"""The user's side of "bring your own op" (docs/byo-op.md): ``libmycorp_plugins.so``, built once per session from
this folder's sources with nvcc and the TensorRT headers (marker trt_headers), and ``Scale2``, an autograd.Function
whose ``symbolic`` emits ``mycorp::Scale2``."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch

from tests.plugins._plugin_harness import compiler, cuda_home, cuda_lib_dir

HERE = Path(__file__).resolve().parent


class Scale2(torch.autograd.Function):
    """A team's existing op: eager math in ``forward``, its plugin's node in ``symbolic``."""

    @staticmethod
    def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
        return x * 3.0

    @staticmethod
    def symbolic(g: torch.Graph, x: torch.Value) -> torch.Value:
        return g.op("mycorp::Scale2", x, factor_f=3.0)


class ConvScale2(torch.nn.Module):
    """A conv, then the user's op, then a ReLU (the issue's model)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(Scale2.apply(self.conv(x)))


@pytest.fixture(scope="session")
def mycorp_library(tmp_path_factory: pytest.TempPathFactory, trt_include: Path) -> Path:
    """libmycorp_plugins.so: mycorp_plugins.cpp (g++) and scale2_kernel.cu (nvcc), linked against libcudart."""
    out = tmp_path_factory.mktemp("mycorp")
    home = cuda_home()
    kernel, plugin = out / "scale2_kernel.o", out / "mycorp_plugins.o"
    subprocess.run([str(home / "bin" / "nvcc"), "-c", "-std=c++17", "-Xcompiler", "-fPIC",
                    str(HERE / "scale2_kernel.cu"), "-o", str(kernel)], check=True)
    subprocess.run([compiler(), "-std=c++17", "-O1", "-fPIC", "-fvisibility=hidden", "-isystem", str(trt_include),
                    "-isystem", str(home / "include"), "-c", str(HERE / "mycorp_plugins.cpp"), "-o", str(plugin)],
                   check=True)
    library = out / "libmycorp_plugins.so"
    libdir = cuda_lib_dir(home)
    subprocess.run([compiler(), "-shared", str(plugin), str(kernel), "-o", str(library), f"-L{libdir}", "-lcudart",
                    f"-Wl,-rpath,{libdir}"], check=True)
    return library


def make_conv_scale2() -> ConvScale2:
    """The model spec the CLI tests name (tests.byo_op.conftest:make_conv_scale2)."""
    return ConvScale2().eval()
