// L2Norm as a TensorRT IPluginV3: y = x / max(||x||_2 over `axis`, eps), one input, one output of the same shape,
// type and format (LINEAR; float32, float16, bfloat16). The arithmetic lives in csrc/kernels/l2norm.cu; this class
// only checks shapes and formats and dispatches on the data type. Inputs, outputs and fields: README.md.
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

constexpr char const* kL2NORM_NAME = "L2Norm";
constexpr char const* kL2NORM_VERSION = "1";
constexpr char const* kL2NORM_AXIS_FIELD = "axis"; //!< kINT32, may be negative (counted from the last dimension)
constexpr char const* kL2NORM_EPS_FIELD = "eps";   //!< kFLOAT32, finite and > 0

class L2NormPlugin : public PluginV3Base<L2NormPlugin>
{
public:
    //! Throws PluginError when axis can fit no rank or eps is not finite and > 0.
    L2NormPlugin(int32_t axis, float eps, std::string pluginNamespace);

private:
    friend class PluginV3Base<L2NormPlugin>;
    // The hooks of PluginV3Base (plugin_base.h), which checks the counts and pointers and catches what they throw.
    //! 1 input and 1 output, else PluginError.
    static void checkCounts(int32_t nbInputs, int32_t nbOutputs);
    //! "the input".
    static char const* inputName(int32_t index) noexcept;
    //! axis (kINT32) and eps (kFLOAT32), for getFieldsToSerialize.
    void addFieldsToSerialize(std::vector<nvinfer1::PluginField>& fields);
    void configure(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out) const;
    //! The input's shape, static or dynamic.
    void outputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs, nvinfer1::DimsExprs* outputs,
        nvinfer1::IExprBuilder& exprBuilder) const;
    //! At run time also: the output's dimensions are the input's.
    void shapesChanged(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out) const;
    //! Launches nothing for an empty tensor.
    void run(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) const;

    //! The axis counted from 0 for a tensor of `rank` dimensions; throws PluginError when it does not fit.
    int32_t normalizedAxis(int32_t rank) const;
    //! Checks shared by configure and run: rank, axis, types, format.
    void checkIO(nvinfer1::PluginTensorDesc const& in, nvinfer1::PluginTensorDesc const& out) const;

    int32_t mAxis;
    float mEps;
};

class L2NormPluginCreator : public PluginCreatorBase
{
public:
    explicit L2NormPluginCreator(char const* pluginNamespace = kDEFAULT_NAMESPACE);

protected:
    //! Reads `axis` (kINT32) and `eps` (kFLOAT32), both required; ignores `plugin_version` and `plugin_namespace`
    //! (the ONNX node carries them for the parser), warns about and ignores other fields; createPlugin returns nullptr
    //! and logs why on a missing field, a wrong field type or length, or a bad value.
    std::unique_ptr<nvinfer1::IPluginV3> createFromFields(nvinfer1::PluginFieldCollection const* fc) override;
};

} // namespace plugins
} // namespace torchtrt_ext
