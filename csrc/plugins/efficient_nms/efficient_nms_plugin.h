// EfficientNMS as a TensorRT IPluginV3 of ours, with the inputs, outputs and fields of TensorRT's own EfficientNMS_TRT
// plugin (so one ONNX node serves both): boxes [B, A, 4] and scores [B, A, C] (LINEAR; float32, float16 or bfloat16,
// one type) in; num_detections [B, 1] int32, detection_boxes [B, K, 4], detection_scores [B, K] (the input type),
// detection_classes [B, K] int32 out, K = max_output_boxes. For TensorRT-RTX, which ships neither TensorRT's plugin
// library nor an NMS layer; on full TensorRT the node goes to TensorRT's own plugin. The arithmetic lives in
// csrc/kernels/efficient_nms.cu; the semantics are torchtrt_ext/ops/efficient_nms.py's.
#pragma once

#include "NvInferRuntime.h"
#include "kernels/efficient_nms.h"
#include "plugins/common/plugin_base.h"

#include <memory>
#include <string>
#include <vector>

namespace torchtrt_ext
{
namespace plugins
{

constexpr char const* kEFFICIENT_NMS_NAME = "EfficientNMS_TRT";
constexpr char const* kEFFICIENT_NMS_VERSION = "1";

class EfficientNmsPlugin : public PluginV3Base<EfficientNmsPlugin>
{
public:
    //! `fields` holds the attributes (sizes unset); throws PluginError on a value out of range.
    EfficientNmsPlugin(TorchtrtExtEfficientNmsParams const& fields, std::string pluginNamespace);

    //! 4: num_detections, detection_boxes, detection_scores, detection_classes.
    int32_t getNbOutputs() const noexcept override;

private:
    friend class PluginV3Base<EfficientNmsPlugin>;
    // The hooks of PluginV3Base (plugin_base.h), which checks the counts and pointers and catches what they throw.
    // Four outputs of two types: the base's one-output type rules are replaced.
    //! Throws PluginError unless there are 2 inputs (boxes, scores) and 4 outputs.
    static void checkCounts(int32_t nbInputs, int32_t nbOutputs);
    //! The seven fields, with TensorRT's names and types, for getFieldsToSerialize.
    void addFieldsToSerialize(std::vector<nvinfer1::PluginField>& fields);
    //! kINT32, the boxes' type twice, kINT32; boxes and scores of one float type.
    void outputDataTypes(nvinfer1::DataType* outputTypes, nvinfer1::DataType const* inputTypes, int32_t nbInputs) const;
    //! LINEAR; boxes a float type, scores, detection_boxes and detection_scores its type, the others kINT32.
    bool supportsFormat(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut) const;
    void configure(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out) const;
    //! [B, 1], [B, K, 4], [B, K], [B, K]: B the batch, K = max_output_boxes.
    void outputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs, nvinfer1::DimsExprs* outputs,
        nvinfer1::IExprBuilder& exprBuilder) const;
    //! The kernels' workspace at the profile's largest shapes.
    size_t workspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs) const;
    //! At run time also: boxes and scores of one batch and anchor count, sizes the kernels take.
    void shapesChanged(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out) const;
    void run(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) const;

    //! The launcher's params for boxes of `boxes` and scores of `scores` dims (rank 3 each, checked).
    TorchtrtExtEfficientNmsParams paramsFor(nvinfer1::Dims const& boxes, nvinfer1::Dims const& scores) const;
    //! Checks shared by configure and run: ranks, types, formats.
    void checkIO(nvinfer1::PluginTensorDesc const* in, nvinfer1::PluginTensorDesc const* out) const;

    TorchtrtExtEfficientNmsParams mFields;
};

class EfficientNmsPluginCreator : public PluginCreatorBase
{
public:
    explicit EfficientNmsPluginCreator(char const* pluginNamespace = kDEFAULT_NAMESPACE);

protected:
    //! Reads TensorRT's fields: score_threshold, iou_threshold (kFLOAT32), max_output_boxes, background_class,
    //! score_activation, box_coding (kINT32) required, class_agnostic (kINT32) optional (0), as TensorRT's creator.
    std::unique_ptr<nvinfer1::IPluginV3> createFromFields(nvinfer1::PluginFieldCollection const* fc) override;
};

} // namespace plugins
} // namespace torchtrt_ext
