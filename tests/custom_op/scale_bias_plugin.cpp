#include "custom_op/scale_bias_plugin.h"

#include "custom_op/scale_bias.h"

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
std::string describe(float scale, float bias)
{
    char text[64];
    std::snprintf(text, sizeof(text), "scale=%.9g;bias=%.9g", static_cast<double>(scale), static_cast<double>(bias));
    return text;
}

void checkIO(nvinfer1::PluginTensorDesc const& in, nvinfer1::PluginTensorDesc const& out)
{
    require(in.type == DataType::kFLOAT && out.type == DataType::kFLOAT, "expected kFLOAT input and output");
    require(in.format == TensorFormat::kLINEAR && out.format == TensorFormat::kLINEAR, "expected LINEAR formats");
}
} // namespace

ScaleBiasPlugin::ScaleBiasPlugin(float scale, float bias, std::string pluginNamespace)
    : PluginV3Base(kSCALE_BIAS_NAME, kSCALE_BIAS_VERSION, std::move(pluginNamespace), describe(scale, bias))
    , mScale(scale)
    , mBias(bias)
{
}

void ScaleBiasPlugin::outputDataTypes(DataType* outputTypes, DataType const* inputTypes, int32_t /* nbInputs */) const
{
    require(inputTypes[0] == DataType::kFLOAT, "expected a kFLOAT input");
    outputTypes[0] = DataType::kFLOAT;
}

bool ScaleBiasPlugin::supportsFormat(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut) const
{
    return inOut[pos].desc.format == TensorFormat::kLINEAR && inOut[pos].desc.type == DataType::kFLOAT;
}

void ScaleBiasPlugin::configure(
    nvinfer1::PluginTensorDesc const* in, int32_t /* nbInputs */, nvinfer1::PluginTensorDesc const* out) const
{
    checkIO(in[0], out[0]);
}

void ScaleBiasPlugin::outputShapes(nvinfer1::DimsExprs const* inputs, int32_t /* nbInputs */,
    nvinfer1::DimsExprs* outputs, nvinfer1::IExprBuilder& /* exprBuilder */) const
{
    outputs[0] = inputs[0];
}

void ScaleBiasPlugin::run(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
    void const* const* inputs, void* const* outputs, void* /* workspace */, cudaStream_t stream) const
{
    checkIO(inputDesc[0], outputDesc[0]);
    int64_t count = 1;
    for (int32_t i = 0; i < inputDesc[0].dims.nbDims; ++i)
    {
        require(inputDesc[0].dims.d[i] >= 0, "expected known dimensions at enqueue");
        count *= inputDesc[0].dims.d[i];
    }
    int32_t const status = test_scale_bias_f32(
        static_cast<float const*>(inputs[0]), static_cast<float*>(outputs[0]), count, mScale, mBias, stream);
    checkCuda(static_cast<cudaError_t>(status), "the TestScaleBias kernel launch");
}

void ScaleBiasPlugin::checkCounts(int32_t nbInputs, int32_t nbOutputs)
{
    require(nbInputs == 1 && nbOutputs == 1, "expected 1 input and 1 output");
}

void ScaleBiasPlugin::addFieldsToSerialize(std::vector<PluginField>& fields)
{
    fields.emplace_back("scale", &mScale, PluginFieldType::kFLOAT32, 1);
    fields.emplace_back("bias", &mBias, PluginFieldType::kFLOAT32, 1);
}

ScaleBiasPluginCreator::ScaleBiasPluginCreator(char const* pluginNamespace)
    : PluginCreatorBase(kSCALE_BIAS_NAME, kSCALE_BIAS_VERSION, pluginNamespace,
        {PluginField("scale", nullptr, PluginFieldType::kFLOAT32, 1),
            PluginField("bias", nullptr, PluginFieldType::kFLOAT32, 1)})
{
}

std::unique_ptr<nvinfer1::IPluginV3> ScaleBiasPluginCreator::createFromFields(nvinfer1::PluginFieldCollection const* fc)
{
    bool hasScale = false;
    bool hasBias = false;
    float scale = 0.0F;
    float bias = 0.0F;
    readFields(fc, "'scale' and 'bias' (kFLOAT32)", [&](PluginField const& field, std::string const& name) {
        if (name == "scale")
        {
            scale = readScalarField<float>(field, PluginFieldType::kFLOAT32);
            hasScale = true;
            return true;
        }
        if (name == "bias")
        {
            bias = readScalarField<float>(field, PluginFieldType::kFLOAT32);
            hasBias = true;
            return true;
        }
        return false;
    });
    require(hasScale && hasBias, "missing field 'scale' or 'bias' (kFLOAT32)");
    return std::make_unique<ScaleBiasPlugin>(scale, bias, getPluginNamespace());
}

} // namespace plugins
} // namespace torchtrt_ext
