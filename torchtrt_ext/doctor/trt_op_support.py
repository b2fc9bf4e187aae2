"""Which ONNX operators TensorRT's ONNX parser supports: the table the doctor (``torchtrt_ext.doctor``) falls back to when
it cannot ask a real parser.

Source: onnx/onnx-tensorrt ``docs/operators.md`` at commit 96e781103cfc4adf4a6bb557e94bac8e693f6f4c ("ONNX-TensorRT
10.1 GA release", June 2024), whose header reads "TensorRT 10.0 supports operators in the inclusive range of opset 9
to opset 20". NVIDIA's ONNX Opset Guide (docs.nvidia.com/deeplearning/tensorrt/latest/reference/onnx-opset-guide.html)
gives opset 25 as the maximum for TensorRT 11.x, whose operator list is the same operators.md on a newer branch.
Restrictions are summarized, not quoted. Update ``TABLE_SOURCE`` and the sets together when refreshing from a newer
operators.md; ``tests/test_doctor.py`` cross-checks the table against TensorRT-RTX's parser where installed.
"""
from __future__ import annotations

TABLE_SOURCE = "onnx-tensorrt docs/operators.md, ONNX-TensorRT 10.1 GA (TensorRT 10.x, opsets 9-20)"
MIN_OPSET = 9
MAX_OPSET = 20  # of the table's TensorRT 10.x; TensorRT 11.x parses up to opset 25

SUPPORTED: frozenset[str] = frozenset({
    "Abs", "Acos", "Acosh", "Add", "And", "ArgMax", "ArgMin", "Asin", "Asinh", "Atan", "Atanh", "AveragePool",
    "BatchNormalization", "Cast", "CastLike", "Ceil", "Celu", "Clip", "Concat", "Constant", "ConstantOfShape",
    "Conv", "ConvTranspose", "Cos", "Cosh", "CumSum", "DeformConv", "DepthToSpace", "DequantizeLinear", "Div",
    "Dropout", "Einsum", "Elu", "Equal", "Erf", "Exp", "Expand", "EyeLike", "Flatten", "Floor", "GRU", "Gather",
    "GatherElements", "GatherND", "Gelu", "Gemm", "GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool", "Greater",
    "GreaterOrEqual", "GridSample", "GroupNormalization", "HardSigmoid", "HardSwish", "Hardmax", "Identity", "If",
    "ImageScaler", "InstanceNormalization", "IsInf", "IsNaN", "LRN", "LSTM", "LayerNormalization", "LeakyRelu",
    "Less", "LessOrEqual", "Log", "LogSoftmax", "Loop", "LpNormalization", "LpPool", "MatMul", "Max", "MaxPool",
    "Mean", "MeanVarianceNormalization", "Min", "Mish", "Mod", "Mul", "Neg", "NonMaxSuppression", "NonZero", "Not",
    "OneHot", "Or", "PRelu", "Pad", "ParametricSoftplus", "Pow", "QuantizeLinear", "RNN", "RandomNormal",
    "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Range", "Reciprocal", "ReduceL1", "ReduceL2",
    "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum",
    "ReduceSumSquare", "Relu", "Reshape", "Resize", "ReverseSequence", "RoiAlign", "Round", "ScaledTanh", "Scan",
    "Scatter", "ScatterElements", "ScatterND", "Selu", "Shape", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Size",
    "Slice", "Softmax", "Softplus", "Softsign", "SpaceToDepth", "Split", "Sqrt", "Squeeze", "Sub", "Sum", "Tan",
    "Tanh", "ThresholdedRelu", "Tile", "TopK", "Transpose", "Trilu", "Unsqueeze", "Upsample", "Where", "Xor",
})

# Supported operators with conditions (summarized from the Restrictions column).
RESTRICTIONS: dict[str, str] = {
    "AveragePool": "2D or 3D pooling only; dilations empty or all ones",
    "Constant": "sparse_value, value_string and value_strings are unsupported",
    "CumSum": "axis must be an initializer",
    "DeformConv": "1D or 2D spatial input; begin and end pads equal per axis",
    "DequantizeLinear": "x_zero_point must be zero; per-tensor, per-axis or block scales",
    "Dropout": "is_training must be a constant False (export in eval mode)",
    "EyeLike": "input must have static dimensions",
    "GridSample": "4D input only",
    "GRU": "bidirectional: the same activations in both directions",
    "Hardmax": "the axis dimension must be known at build time",
    "If": "both branches' outputs must have the same rank and distinct names",
    "LayerNormalization": "only the first output Y",
    "Loop": "scan outputs of static length; carried shapes constant across iterations",
    "LSTM": "bidirectional: the same activations in both directions; input_forget=0; layout=0",
    "LpPool": "dilations empty or all ones",
    "MaxPool": "2D or 3D pooling only; no Indices output; dilations empty or all ones",
    "OneHot": "depth must be known at build time",
    "Pad": "axes must be an initializer",
    "QuantizeLinear": "y_zero_point must be zero; per-tensor, per-axis or block scales",
    "RandomNormal": "seed is ignored",
    "RandomNormalLike": "seed is ignored",
    "RandomUniform": "seed is ignored",
    "RandomUniformLike": "seed is ignored",
    "Resize": "modes nearest/linear; coordinate modes half_pixel, pytorch_half_pixel, tf_half_pixel_for_nn, "
              "asymmetric, align_corners; no antialiasing",
    "RNN": "bidirectional: the same activations in both directions",
    "ScatterND": "reduction is not supported",
    "TopK": "sorted must be 1; K below 3840",
    **{op: "axes must be an initializer" for op in (
        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
        "ReduceProd", "ReduceSum", "ReduceSumSquare", "Slice", "Squeeze", "Unsqueeze")},
}

# Unsupported operators, with what usually produces them in PyTorch and a mapping at export that avoids them.
UNSUPPORTED: dict[str, str] = {
    "AffineGrid": "F.affine_grid: compute the grid with MatMul on a constant base grid, then GridSample",
    "Bernoulli": "random sampling in the graph: export in eval() mode, or sample outside the engine",
    "BitShift": "integer shifts: multiply or divide by powers of two",
    "BitwiseAnd": "bitwise ops on integers: use bool tensors and And/Or/Not, or do it outside the engine",
    "BitwiseNot": "bitwise ops on integers: use bool tensors and Not, or do it outside the engine",
    "BitwiseOr": "bitwise ops on integers: use bool tensors and Or, or do it outside the engine",
    "BitwiseXor": "bitwise ops on integers: use bool tensors and Xor, or do it outside the engine",
    "BlackmanWindow": "torch.blackman_window: precompute the window as a constant",
    "CenterCropPad": "center crop/pad: express it with Slice and Pad",
    "Col2Im": "F.fold: express it with ConvTranspose on a one-hot kernel, or use a plugin",
    "Compress": "boolean-mask indexing x[mask]: use torch.where, or gather static indices",
    "ConcatFromSequence": "a Python list of tensors built in a loop: torch.stack/cat a fixed number of tensors",
    "ConvInteger": "integer convolution (QOperator format): export QuantizeLinear/DequantizeLinear (QDQ format) instead",
    "DFT": "torch.fft: express the transform as MatMul/Conv with a constant DFT basis",
    "Det": "torch.linalg.det: compute it outside the engine, or with a plugin",
    "DynamicQuantizeLinear": "dynamic quantization: use static (calibrated) QuantizeLinear/DequantizeLinear",
    "HammingWindow": "torch.hamming_window: precompute the window as a constant",
    "HannWindow": "torch.hann_window: precompute the window as a constant",
    "ImageDecoder": "image decoding: decode outside the engine",
    "MatMulInteger": "integer matmul (QOperator format): export QuantizeLinear/DequantizeLinear (QDQ format) instead",
    "MaxRoiPool": "torchvision roi_pool: use RoiAlign where acceptable, or a plugin",
    "MaxUnpool": "F.max_unpool: use ScatterElements with the pooling indices, or Resize",
    "MelWeightMatrix": "mel filter bank: precompute it as a constant",
    "Multinomial": "torch.multinomial: sample outside the engine",
    "NegativeLogLikelihoodLoss": "a loss in the inference graph: export the model without its loss",
    "Optional": "Optional values: export with a fixed set of inputs",
    "OptionalGetElement": "Optional values: export with a fixed set of inputs",
    "OptionalHasElement": "Optional values: export with a fixed set of inputs",
    "QLinearConv": "QOperator quantization: export QuantizeLinear/DequantizeLinear (QDQ format) instead",
    "QLinearMatMul": "QOperator quantization: export QuantizeLinear/DequantizeLinear (QDQ format) instead",
    "RegexFullMatch": "string processing: do it outside the engine",
    "STFT": "torch.stft: express it as Conv1d with a constant windowed DFT basis",
    "SequenceAt": "tensor sequences (Python lists): return or stack a fixed number of tensors",
    "SequenceConstruct": "tensor sequences (Python lists): return or stack a fixed number of tensors",
    "SequenceEmpty": "tensor sequences (Python lists): return or stack a fixed number of tensors",
    "SequenceErase": "tensor sequences (Python lists): return or stack a fixed number of tensors",
    "SequenceInsert": "tensor sequences (Python lists): return or stack a fixed number of tensors",
    "SequenceLength": "tensor sequences (Python lists): return or stack a fixed number of tensors",
    "SequenceMap": "tensor sequences (Python lists): return or stack a fixed number of tensors",
    "SoftmaxCrossEntropyLoss": "a loss in the inference graph: export the model without its loss",
    "SplitToSequence": "torch.split/unbind into a list: use a fixed number of outputs (Split)",
    "StringConcat": "string processing: do it outside the engine",
    "StringNormalizer": "string processing: do it outside the engine",
    "StringSplit": "string processing: do it outside the engine",
    "TfIdfVectorizer": "text features: compute them outside the engine",
    "Unique": "torch.unique: data-dependent output size; do it outside the engine, or with a plugin",
}


def status(op_type: str) -> str:
    """'supported', 'restricted' (supported with conditions), 'unsupported', or 'unknown' (not in the table)."""
    if op_type in RESTRICTIONS:
        return "restricted"
    if op_type in SUPPORTED:
        return "supported"
    if op_type in UNSUPPORTED:
        return "unsupported"
    return "unknown"
