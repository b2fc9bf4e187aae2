// TestScaleBias as a TensorRT IPluginV3 (the test op of tests/custom_op): y = x * scale + bias, float32, LINEAR,
// any shape. Built on plugins/common/plugin_base.h like the library's own ops; the kernel is scale_bias.cu, float32
// only, so the type rules of the base (float32, float16, bfloat16) are narrowed here.
#pragma once

#include "NvInferRuntime.h"
#include "plugins/common/plugin_base.h"

#include <memory>
#include <string>
#include <vector>

namespace torchtrt_ext
{
namespace plugins
{

constexpr char const* kSCALE_BIAS_NAME = "TestScaleBias";
constexpr char const* kSCALE_BIAS_VERSION = "1";

class ScaleBiasPlugin : public PluginV3Base<ScaleBiasPlugin>
{
public:
    ScaleBiasPlugin(float scale, float bias, std::string pluginNamespace);

    int32_t configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept override;
    int32_t getOutputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs,
        nvinfer1::DataType const* inputTypes, int32_t nbInputs) const noexcept override;
    int32_t getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs, nvinfer1::DimsExprs const* shapeInputs,
        int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs, int32_t nbOutputs,
        nvinfer1::IExprBuilder& exprBuilder) noexcept override;
    bool supportsFormatCombination(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs,
        int32_t nbOutputs) noexcept override;
    size_t getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* outputs, int32_t nbOutputs) const noexcept override;
    int32_t onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out,
        int32_t nbOutputs) noexcept override;
    int32_t enqueue(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) noexcept override;

private:
    friend class PluginV3Base<ScaleBiasPlugin>;
    void addFieldsToSerialize(std::vector<nvinfer1::PluginField>& fields);
    static void checkCounts(int32_t nbInputs, int32_t nbOutputs);
    static char const* inputName(int32_t index) noexcept;

    float mScale;
    float mBias;
};

class ScaleBiasPluginCreator : public PluginCreatorBase
{
public:
    explicit ScaleBiasPluginCreator(char const* pluginNamespace = kDEFAULT_NAMESPACE);

protected:
    //! Reads `scale` and `bias` (kFLOAT32, both required).
    std::unique_ptr<nvinfer1::IPluginV3> createFromFields(nvinfer1::PluginFieldCollection const* fc) override;
};

} // namespace plugins
} // namespace torchtrt_ext
