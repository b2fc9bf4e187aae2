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

private:
    friend class PluginV3Base<ScaleBiasPlugin>;
    // The hooks of PluginV3Base (plugin_base.h), which checks the counts and pointers and catches what they throw.
    static void checkCounts(int32_t nbInputs, int32_t nbOutputs);
    void addFieldsToSerialize(std::vector<nvinfer1::PluginField>& fields);
    void outputDataTypes(nvinfer1::DataType* outputTypes, nvinfer1::DataType const* inputTypes, int32_t nbInputs) const;
    bool supportsFormat(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut) const;
    void configure(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out) const;
    void outputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs, nvinfer1::DimsExprs* outputs,
        nvinfer1::IExprBuilder& exprBuilder) const;
    void run(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) const;

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
