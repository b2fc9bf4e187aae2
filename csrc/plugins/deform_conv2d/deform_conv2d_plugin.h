// DeformConv2d as a TensorRT IPluginV3: modulated deformable convolution (DCNv2), torchvision.ops.deform_conv2d
// semantics. Inputs (node order): input [N, C_in, H, W], offset [N, 2*offset_groups*kh*kw, H_out, W_out], weight
// [C_out, C_in/groups, kh, kw], then optionally bias [C_out] and mask [N, offset_groups*kh*kw, H_out, W_out]. The op
// definition (torchtrt_ext/ops/deform_conv2d.py) always puts bias before mask and inserts a zero bias when only a mask
// is given, so 3 inputs = neither, 4 inputs = bias, 5 inputs = bias and mask. One output [N, C_out, H_out, W_out] of
// the input's type. LINEAR (the input also channels-last: kHWC float32, kHWC8 float16/bfloat16 with channels a
// multiple of 8, read as it is); float32, float16 or bfloat16, every tensor the same type. The arithmetic lives in
// csrc/kernels/deform_conv2d.cu (torchtrt_ext_deform_conv2d, the launcher the eager op calls too); this class checks shapes and
// formats, sizes the workspace and dispatches on the data type. Inputs, outputs and fields: README.md.
#pragma once

#include "NvInferRuntime.h"
#include "kernels/deform_conv2d.h"
#include "plugins/common/plugin_base.h"

#include <memory>
#include <string>
#include <vector>

namespace torchtrt_ext
{
namespace plugins
{

constexpr char const* kDEFORM_CONV2D_NAME = "DeformConv2d";
constexpr char const* kDEFORM_CONV2D_VERSION = "1";
constexpr char const* kDEFORM_CONV2D_STRIDE_FIELD = "stride";               //!< kINT32 x 2 (h, w), each >= 1
constexpr char const* kDEFORM_CONV2D_PADDING_FIELD = "padding";             //!< kINT32 x 2 (h, w), each >= 0
constexpr char const* kDEFORM_CONV2D_DILATION_FIELD = "dilation";           //!< kINT32 x 2 (h, w), each >= 1
constexpr char const* kDEFORM_CONV2D_GROUPS_FIELD = "groups";               //!< kINT32, >= 1
constexpr char const* kDEFORM_CONV2D_OFFSET_GROUPS_FIELD = "offset_groups"; //!< kINT32, >= 1

//! The attributes of one DeformConv2d node (the defaults are the op definition's).
struct DeformConv2dAttrs
{
    int32_t stride[2]{1, 1};
    int32_t padding[2]{0, 0};
    int32_t dilation[2]{1, 1};
    int32_t groups{1};
    int32_t offsetGroups{1};
};

class DeformConv2dPlugin : public PluginV3Base<DeformConv2dPlugin>
{
public:
    //! Throws PluginError for a stride or dilation < 1, a padding < 0, groups or offset_groups < 1.
    DeformConv2dPlugin(DeformConv2dAttrs const& attrs, std::string pluginNamespace);

private:
    friend class PluginV3Base<DeformConv2dPlugin>;
    // The hooks of PluginV3Base (plugin_base.h), which checks the counts and pointers and catches what they throw.
    //! 3 to 5 inputs and 1 output, else PluginError.
    static void checkCounts(int32_t nbInputs, int32_t nbOutputs);
    //! "input", "offset", "weight", "bias", "mask".
    static char const* inputName(int32_t index) noexcept;
    //! stride, padding, dilation (kINT32 x 2), groups, offset_groups (kINT32), for getFieldsToSerialize.
    void addFieldsToSerialize(std::vector<nvinfer1::PluginField>& fields);
    //! checkIO, and the input count for run.
    void configure(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out);
    //! [N, C_out, H_out, W_out], H_out and W_out built with IExprBuilder operations (symbolic for dynamic sizes).
    void outputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs, nvinfer1::DimsExprs* outputs,
        nvinfer1::IExprBuilder& exprBuilder) const;
    //! From torchtrt_ext_deform_conv2d_workspace_size at the profile's largest shapes (DynamicPluginTensorDesc::max).
    size_t workspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs) const;
    //! At run time also: once per process, the log line naming the GEMM library.
    void shapesChanged(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out) const;
    //! Needs configure first (the input count); launches nothing for an empty output.
    void run(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) const;

    //! The base's (LINEAR, every tensor the input's float type), and for the input also channels-last formats.
    bool supportsFormat(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut) const;
    //! Checks shared by configure and run on dims where -1 means "not known yet": ranks, one
    //! supported type, formats, static kernel size, channel relations, batch and output sizes.
    void checkIO(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const& out) const;
    //! The launcher's descriptor of these sizes (NCHW or channels-last input, this plugin's attributes).
    TorchtrtExtDeformConv2dDesc launchDesc(
        nvinfer1::Dims const& input, nvinfer1::Dims const& weight, nvinfer1::DataType type, bool channelsLast) const;
    //! Bytes of workspace for `desc`; throws PluginError, naming the shapes, when the launcher would reject them.
    int64_t workspaceBytes(
        TorchtrtExtDeformConv2dDesc const& desc, nvinfer1::Dims const& input, nvinfer1::Dims const& weight) const;

    DeformConv2dAttrs mAttrs;
    int32_t mNbInputs{0}; //!< 3, 4 or 5 once configure has run (enqueue is not told the count)
};

class DeformConv2dPluginCreator : public PluginCreatorBase
{
public:
    explicit DeformConv2dPluginCreator(char const* pluginNamespace = kDEFAULT_NAMESPACE);

protected:
    //! Reads stride, padding, dilation (kINT32 x 2) and groups, offset_groups (kINT32 x 1); a missing field takes the
    //! op definition's default (1,1 / 0,0 / 1,1 / 1 / 1). Ignores `plugin_version` and `plugin_namespace` (the ONNX
    //! node carries them for the parser), warns about and ignores other fields; createPlugin returns nullptr and logs
    //! why on a wrong field type or length, or a bad value.
    std::unique_ptr<nvinfer1::IPluginV3> createFromFields(nvinfer1::PluginFieldCollection const* fc) override;
};

} // namespace plugins
} // namespace torchtrt_ext
