#include "plugins/l2norm/l2norm_plugin.h"

#include "kernels/l2norm.h"

#include <cmath>
#include <cstdio>
#include <memory>

using nvinfer1::DataType;
using nvinfer1::PluginField;
using nvinfer1::PluginFieldType;
using nvinfer1::TensorFormat;

namespace torchtrt_ext
{
namespace plugins
{
namespace
{
constexpr int32_t kNB_INPUTS = 1;
constexpr int32_t kNB_OUTPUTS = 1;

std::string describe(int32_t axis, float eps)
{
    char text[64];
    std::snprintf(text, sizeof(text), "axis=%d;eps=%.9g", static_cast<int>(axis), static_cast<double>(eps));
    return text;
}

std::string formatFloat(float value)
{
    char text[32];
    std::snprintf(text, sizeof(text), "%.9g", static_cast<double>(value));
    return text;
}

bool sameDims(nvinfer1::Dims const& a, nvinfer1::Dims const& b)
{
    if (a.nbDims != b.nbDims)
    {
        return false;
    }
    for (int32_t i = 0; i < a.nbDims; ++i)
    {
        if (a.d[i] != b.d[i])
        {
            return false;
        }
    }
    return true;
}
} // namespace

L2NormPlugin::L2NormPlugin(int32_t axis, float eps, std::string pluginNamespace)
    : PluginV3Base(kL2NORM_NAME, kL2NORM_VERSION, std::move(pluginNamespace), describe(axis, eps))
    , mAxis(axis)
    , mEps(eps)
{
    int32_t const maxDims = nvinfer1::Dims::MAX_DIMS;
    require(axis >= -maxDims && axis < maxDims,
        "field 'axis' is " + std::to_string(axis) + ", expected a value in [" + std::to_string(-maxDims) + ", "
            + std::to_string(maxDims - 1) + "] (TensorRT tensors have at most " + std::to_string(maxDims)
            + " dimensions)");
    require(std::isfinite(eps) && eps > 0.0F, "field 'eps' is " + formatFloat(eps) + ", expected a finite value > 0");
}

int32_t L2NormPlugin::normalizedAxis(int32_t rank) const
{
    require(rank >= 1, "the input has rank " + std::to_string(rank) + ", expected rank >= 1");
    require(mAxis >= -rank && mAxis < rank,
        "axis " + std::to_string(mAxis) + " is out of range for an input of rank " + std::to_string(rank)
            + ", expected a value in [" + std::to_string(-rank) + ", " + std::to_string(rank - 1) + "]");
    return mAxis < 0 ? mAxis + rank : mAxis;
}

void L2NormPlugin::checkCounts(int32_t nbInputs, int32_t nbOutputs)
{
    require(nbInputs == kNB_INPUTS && nbOutputs == kNB_OUTPUTS,
        "expected 1 input and 1 output, got " + std::to_string(nbInputs) + " inputs and " + std::to_string(nbOutputs)
            + " outputs");
}

char const* L2NormPlugin::inputName(int32_t /* index */) noexcept
{
    return "the input";
}

void L2NormPlugin::checkIO(nvinfer1::PluginTensorDesc const& in, nvinfer1::PluginTensorDesc const& out) const
{
    normalizedAxis(in.dims.nbDims);
    require(out.dims.nbDims == in.dims.nbDims,
        "the output has rank " + std::to_string(out.dims.nbDims) + ", expected the input's rank "
            + std::to_string(in.dims.nbDims));
    require(isFloatType(in.type),
        std::string("the input has type ") + dataTypeName(in.type) + ", expected kFLOAT, kHALF or kBF16");
    require(out.type == in.type,
        std::string("the output has type ") + dataTypeName(out.type) + ", expected the input's type "
            + dataTypeName(in.type));
    require(in.format == TensorFormat::kLINEAR && out.format == TensorFormat::kLINEAR,
        "expected LINEAR input and output formats");
}

void L2NormPlugin::configure(
    nvinfer1::PluginTensorDesc const* in, int32_t /* nbInputs */, nvinfer1::PluginTensorDesc const* out) const
{
    checkIO(in[0], out[0]);
}

void L2NormPlugin::outputShapes(nvinfer1::DimsExprs const* inputs, int32_t /* nbInputs */,
    nvinfer1::DimsExprs* outputs, nvinfer1::IExprBuilder& /* exprBuilder */) const
{
    normalizedAxis(inputs[0].nbDims);
    // The output has the input's shape: the same expressions, static or dynamic.
    outputs[0] = inputs[0];
}

void L2NormPlugin::shapesChanged(
    nvinfer1::PluginTensorDesc const* in, int32_t /* nbInputs */, nvinfer1::PluginTensorDesc const* out) const
{
    require(sameDims(in[0].dims, out[0].dims), "the output's dimensions differ from the input's");
}

void L2NormPlugin::run(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
    void const* const* inputs, void* const* outputs, void* /* workspace */, cudaStream_t stream) const
{
    checkIO(inputDesc[0], outputDesc[0]);
    nvinfer1::Dims const& dims = inputDesc[0].dims;
    require(sameDims(dims, outputDesc[0].dims), "the output's dimensions differ from the input's");
    int32_t const axis = normalizedAxis(dims.nbDims);
    int64_t outer = 1;
    int64_t inner = 1;
    for (int32_t i = 0; i < dims.nbDims; ++i)
    {
        require(dims.d[i] >= 0, "dimension " + std::to_string(i) + " is " + std::to_string(dims.d[i])
                + " at enqueue, expected a known size >= 0");
        if (i < axis)
        {
            outer *= dims.d[i];
        }
        else if (i > axis)
        {
            inner *= dims.d[i];
        }
    }
    int64_t const reduced = dims.d[axis];
    if (outer == 0 || reduced == 0 || inner == 0)
    {
        return; // an empty tensor: nothing to compute
    }
    require(inputs[0] != nullptr && outputs[0] != nullptr, "null input or output buffer");
    int32_t status = 0;
    switch (inputDesc[0].type)
    {
    case DataType::kFLOAT:
        status = torchtrt_ext_l2norm_f32(inputs[0], outputs[0], outer, reduced, inner, mEps, stream);
        break;
    case DataType::kHALF:
        status = torchtrt_ext_l2norm_f16(inputs[0], outputs[0], outer, reduced, inner, mEps, stream);
        break;
    case DataType::kBF16:
        status = torchtrt_ext_l2norm_bf16(inputs[0], outputs[0], outer, reduced, inner, mEps, stream);
        break;
    default: throw PluginError(std::string("no kernel for type ") + dataTypeName(inputDesc[0].type));
    }
    checkCuda(static_cast<cudaError_t>(status), "the L2Norm kernel launch");
}

void L2NormPlugin::addFieldsToSerialize(std::vector<PluginField>& fields)
{
    fields.emplace_back(kL2NORM_AXIS_FIELD, &mAxis, PluginFieldType::kINT32, 1);
    fields.emplace_back(kL2NORM_EPS_FIELD, &mEps, PluginFieldType::kFLOAT32, 1);
}

L2NormPluginCreator::L2NormPluginCreator(char const* pluginNamespace)
    : PluginCreatorBase(kL2NORM_NAME, kL2NORM_VERSION, pluginNamespace,
        {PluginField(kL2NORM_AXIS_FIELD, nullptr, PluginFieldType::kINT32, 1),
            PluginField(kL2NORM_EPS_FIELD, nullptr, PluginFieldType::kFLOAT32, 1)})
{
}

std::unique_ptr<nvinfer1::IPluginV3> L2NormPluginCreator::createFromFields(nvinfer1::PluginFieldCollection const* fc)
{
    bool hasAxis = false;
    bool hasEps = false;
    int32_t axis = 0;
    float eps = 0.0F;
    readFields(fc, "'axis' (kINT32) and 'eps' (kFLOAT32)", [&](PluginField const& field, std::string const& name) {
        if (name == kL2NORM_AXIS_FIELD)
        {
            axis = readScalarField<int32_t>(field, PluginFieldType::kINT32);
            hasAxis = true;
        }
        else if (name == kL2NORM_EPS_FIELD)
        {
            eps = readScalarField<float>(field, PluginFieldType::kFLOAT32);
            hasEps = true;
        }
        else
        {
            return false;
        }
        return true;
    });
    require(hasAxis, "missing field 'axis' (kINT32)");
    require(hasEps, "missing field 'eps' (kFLOAT32)");
    return std::make_unique<L2NormPlugin>(axis, eps, getPluginNamespace());
}

} // namespace plugins
} // namespace torchtrt_ext
