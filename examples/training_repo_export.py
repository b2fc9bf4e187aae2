"""Export in the training repository, build on the serving machine from the ONNX file alone.

Step 1, ``export`` (runs where the model code and weights live): load the trained model, export it with a dynamic
batch, check the export against PyTorch on onnxruntime, write ``model.onnx``.

Step 2, ``build`` (runs on the serving machine, with no model code): read ``model.onnx``, build the engine, save it,
and write a Triton model repository. With a GPU and full TensorRT the build uses ``backend="tensorrt"`` and the
plugins; on a CPU-only machine it uses ``backend="tensorrt_rtx", plugins="decompose"`` and says so.

    python examples/training_repo_export.py all   --out /tmp/deploy    # both steps; step 2 in a fresh process
    python examples/training_repo_export.py export --out /tmp/deploy
    python examples/training_repo_export.py build  --out /tmp/deploy
"""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path


def export_step(out: Path) -> Path:
    """The training repository's side: model code, weights, torch."""
    import torch

    import torchtrt_ext
    from torchtrt_ext.validate import validate

    class Embedder(torch.nn.Module):  # stands for the repository's own model class
        def __init__(self) -> None:
            super().__init__()
            self.encoder = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
                                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                               torch.nn.Linear(16, 32))
            self.norm = torchtrt_ext.nn.L2Norm(dim=1)  # unit-length embeddings

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            return self.norm(self.encoder(image))

    torch.manual_seed(0)
    model = Embedder().eval()  # in a real repository: load the checkpoint here
    example = torch.randn(2, 3, 32, 32)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "model.onnx"
    onnx_model = torchtrt_ext.export_onnx(model, (example,), path)  # dim 0 dynamic ("batch") by default
    report = validate(model, onnx_model, example)
    print(report)
    if not report.passed:
        raise SystemExit("FAIL: the export does not match PyTorch")
    print(f"export step: wrote {path} ({path.stat().st_size} bytes)")
    return path


def build_step(out: Path) -> Path:
    """The serving machine's side: only the ONNX file and torchtrt_ext (no model code is imported here)."""
    import torch

    from torchtrt_ext import deploy
    from torchtrt_ext.backend import build_engine

    onnx_path = out / "model.onnx"
    if torch.cuda.is_available() and importlib.util.find_spec("tensorrt") is not None:
        backend, plugins = "tensorrt", "auto"
    elif importlib.util.find_spec("tensorrt_rtx") is not None:
        backend, plugins = "tensorrt_rtx", "decompose"
        print("build step: no GPU with full TensorRT here: building with backend='tensorrt_rtx', plugins='decompose' "
              "(standard ONNX ops instead of the L2Norm plugin)")
    else:
        raise SystemExit("build step: skipped: neither full TensorRT with a GPU nor tensorrt_rtx is installed "
                         "(pip install 'torchtrt_ext[rtx]' builds on a CPU)")
    engine = build_engine(onnx_path, backend=backend, plugins=plugins, max_batch=16, progress=False)
    engine_path = engine.save(out / "model.engine")
    print(f"build step: {engine} -> {engine_path}")
    repo = deploy.triton_repository(engine, out / "model_repository", "embedder", max_batch_size=16,
                                    print_command=False)
    print(f"build step: Triton repository {repo.root}; serve with: {repo.command}")
    print("skipped: serving and running the engine (needs the target GPU and TensorRT runtime)" if backend != "tensorrt"
          else "run it with torchtrt_ext.runtime.load(...) or the C++ example")
    return engine_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("all", "export", "build"))
    parser.add_argument("--out", type=Path, default=Path("deploy_out"), help="folder for the files (default ./deploy_out)")
    args = parser.parse_args()
    if args.step in ("all", "export"):
        export_step(args.out)
    if args.step == "build":
        build_step(args.out)
    if args.step == "all":  # a fresh process, as on the serving machine: nothing of step 1 is in memory
        subprocess.run([sys.executable, __file__, "build", "--out", str(args.out)], check=True)
        print("training_repo_export OK")


if __name__ == "__main__":
    main()
