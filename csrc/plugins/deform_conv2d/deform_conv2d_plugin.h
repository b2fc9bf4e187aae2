// DeformConv2d as a TensorRT IPluginV3: modulated deformable convolution (DCNv2), torchvision.ops.deform_conv2d
// semantics. Inputs (node order): input [N, C_in, H, W], offset [N, 2*offset_groups*kh*kw, H_out, W_out], weight
// [C_out, C_in/groups, kh, kw], then optionally bias [C_out] and mask [N, offset_groups*kh*kw, H_out, W_out]. The op
// definition (torchtrt_ext/ops/deform_conv2d.py) always puts bias before mask and inserts a zero bias when only a mask
// is given, so 3 inputs = neither, 4 inputs = bias, 5 inputs = bias and mask. One output [N, C_out, H_out, W_out] of
// the input's type. LINEAR; float32, float16 or bfloat16, every tensor the same type. The arithmetic lives in
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

    // IPluginV3OneBuild
    int32_t configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept override;
    int32_t getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs, nvinfer1::DimsExprs const* shapeInputs,
        int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs, int32_t nbOutputs,
        nvinfer1::IExprBuilder& exprBuilder) noexcept override;
    //! From torchtrt_ext_deform_conv2d_workspace_size at the profile's largest shapes (DynamicPluginTensorDesc::max).
    size_t getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* outputs, int32_t nbOutputs) const noexcept override;

    // IPluginV3OneRuntime
    int32_t onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out,
        int32_t nbOutputs) noexcept override;
    int32_t enqueue(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) noexcept override;

private:
    friend class PluginV3Base<DeformConv2dPlugin>;
    //! 3 to 5 inputs and 1 output, else PluginError.
    static void checkCounts(int32_t nbInputs, int32_t nbOutputs);
    //! "input", "offset", "weight", "bias", "mask".
    static char const* inputName(int32_t index) noexcept;
    //! stride, padding, dilation (kINT32 x 2), groups, offset_groups (kINT32), for getFieldsToSerialize.
    void addFieldsToSerialize(std::vector<nvinfer1::PluginField>& fields);
    //! Checks shared by configurePlugin, onShapeChange and enqueue on dims where -1 means "not known yet": counts,
    //! ranks, one supported type, LINEAR, static kernel size, channel relations, batch and output sizes.
    void checkIO(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const& out,
        int32_t nbOutputs) const;
    //! The launcher's descriptor of these sizes (NCHW input, this plugin's attributes).
    TorchtrtExtDeformConv2dDesc launchDesc(
        nvinfer1::Dims const& input, nvinfer1::Dims const& weight, nvinfer1::DataType type) const;
    //! Bytes of workspace for `desc`; throws PluginError, naming the shapes, when the launcher would reject them.
    int64_t workspaceBytes(
        TorchtrtExtDeformConv2dDesc const& desc, nvinfer1::Dims const& input, nvinfer1::Dims const& weight) const;

    DeformConv2dAttrs mAttrs;
    int32_t mNbInputs{0}; //!< 3, 4 or 5 once configurePlugin/onShapeChange has run (enqueue is not told the count)
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
