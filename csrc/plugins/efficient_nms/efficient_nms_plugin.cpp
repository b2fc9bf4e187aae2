#include "plugins/efficient_nms/efficient_nms_plugin.h"


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
constexpr int32_t kNB_INPUTS = 2;
constexpr int32_t kNB_OUTPUTS = 4;
constexpr int32_t kBOXES = 0;
constexpr int32_t kSCORES = 1;

// TensorRT's field names (plugin/efficientNMSPlugin), the node's attributes.
constexpr char const* kSCORE_THRESHOLD = "score_threshold";
constexpr char const* kIOU_THRESHOLD = "iou_threshold";
constexpr char const* kMAX_OUTPUT_BOXES = "max_output_boxes";
constexpr char const* kBACKGROUND_CLASS = "background_class";
constexpr char const* kSCORE_ACTIVATION = "score_activation";
constexpr char const* kCLASS_AGNOSTIC = "class_agnostic";
constexpr char const* kBOX_CODING = "box_coding";

std::string describe(TorchtrtExtEfficientNmsParams const& f)
{
    char text[192];
    std::snprintf(text, sizeof(text),
        "score_threshold=%.9g;iou_threshold=%.9g;max_output_boxes=%d;background_class=%d;score_activation=%d;"
        "class_agnostic=%d;box_coding=%d",
        static_cast<double>(f.score_threshold), static_cast<double>(f.iou_threshold), f.max_output_boxes,
        f.background_class, f.score_activation, f.class_agnostic, f.box_coding);
    return text;
}

void requireFlag(int32_t value, char const* name)
{
    require(value == 0 || value == 1, std::string("field '") + name + "' is " + std::to_string(value) + ", expected 0 or 1");
}

void requireUnit(float value, char const* name)
{
    require(value >= 0.0F && value <= 1.0F,
        std::string("field '") + name + "' is " + std::to_string(value) + ", expected a value in [0, 1]");
}
} // namespace

EfficientNmsPlugin::EfficientNmsPlugin(TorchtrtExtEfficientNmsParams const& fields, std::string pluginNamespace)
    : PluginV3Base(kEFFICIENT_NMS_NAME, kEFFICIENT_NMS_VERSION, std::move(pluginNamespace), describe(fields))
    , mFields(fields)
{
    requireUnit(fields.score_threshold, kSCORE_THRESHOLD);
    requireUnit(fields.iou_threshold, kIOU_THRESHOLD);
    require(fields.max_output_boxes >= 1,
        "field 'max_output_boxes' is " + std::to_string(fields.max_output_boxes) + ", expected a value >= 1");
    require(fields.background_class >= -1,
        "field 'background_class' is " + std::to_string(fields.background_class) + ", expected a value >= -1");
    requireFlag(fields.score_activation, kSCORE_ACTIVATION);
    requireFlag(fields.class_agnostic, kCLASS_AGNOSTIC);
    requireFlag(fields.box_coding, kBOX_CODING);
}

void EfficientNmsPlugin::checkCounts(int32_t nbInputs, int32_t nbOutputs)
{
    require(nbInputs == kNB_INPUTS && nbOutputs == kNB_OUTPUTS,
        "expected 2 inputs (boxes, scores) and 4 outputs, got " + std::to_string(nbInputs) + " inputs and "
            + std::to_string(nbOutputs) + " outputs (the fused box decoder's anchors input is not supported)");
}

TorchtrtExtEfficientNmsParams EfficientNmsPlugin::paramsFor(nvinfer1::Dims const& boxes, nvinfer1::Dims const& scores) const
{
    require(boxes.nbDims == 3 && boxes.d[2] == 4,
        "boxes have rank " + std::to_string(boxes.nbDims) + ", expected [batch, anchors, 4]");
    require(scores.nbDims == 3, "scores have rank " + std::to_string(scores.nbDims) + ", expected [batch, anchors, classes]");
    require(boxes.d[0] == scores.d[0] && boxes.d[1] == scores.d[1],
        "boxes and scores differ in batch or anchors (" + std::to_string(boxes.d[0]) + "x" + std::to_string(boxes.d[1])
            + " and " + std::to_string(scores.d[0]) + "x" + std::to_string(scores.d[1]) + "), expected the same");
    TorchtrtExtEfficientNmsParams params = mFields;
    params.batch = scores.d[0];
    params.anchors = scores.d[1];
    params.classes = scores.d[2];
    return params;
}

void EfficientNmsPlugin::checkIO(nvinfer1::PluginTensorDesc const* in, nvinfer1::PluginTensorDesc const* out) const
{
    require(in[kBOXES].dims.nbDims == 3 && in[kSCORES].dims.nbDims == 3,
        "expected boxes [batch, anchors, 4] and scores [batch, anchors, classes]");
    DataType const type = in[kBOXES].type;
    require(isFloatType(type), std::string("boxes have type ") + dataTypeName(type) + ", expected kFLOAT, kHALF or kBF16");
    require(in[kSCORES].type == type && out[1].type == type && out[2].type == type,
        "scores, detection_boxes and detection_scores must have the boxes' type");
    require(out[0].type == DataType::kINT32 && out[3].type == DataType::kINT32,
        "num_detections and detection_classes must be kINT32");
    for (int32_t i = 0; i < kNB_INPUTS; ++i)
    {
        require(in[i].format == TensorFormat::kLINEAR, "expected LINEAR inputs");
    }
    for (int32_t i = 0; i < kNB_OUTPUTS; ++i)
    {
        require(out[i].format == TensorFormat::kLINEAR, "expected LINEAR outputs");
    }
}

void EfficientNmsPlugin::configure(
    nvinfer1::PluginTensorDesc const* in, int32_t /* nbInputs */, nvinfer1::PluginTensorDesc const* out) const
{
    checkIO(in, out);
}

void EfficientNmsPlugin::outputDataTypes(DataType* outputTypes, DataType const* inputTypes, int32_t /* nbInputs */) const
{
    require(isFloatType(inputTypes[kBOXES]) && inputTypes[kSCORES] == inputTypes[kBOXES],
        std::string("boxes and scores have types ") + dataTypeName(inputTypes[kBOXES]) + " and "
            + dataTypeName(inputTypes[kSCORES]) + ", expected one of kFLOAT, kHALF, kBF16 for both");
    outputTypes[0] = DataType::kINT32;
    outputTypes[1] = inputTypes[kBOXES];
    outputTypes[2] = inputTypes[kBOXES];
    outputTypes[3] = DataType::kINT32;
}

void EfficientNmsPlugin::outputShapes(nvinfer1::DimsExprs const* inputs, int32_t /* nbInputs */,
    nvinfer1::DimsExprs* outputs, nvinfer1::IExprBuilder& exprBuilder) const
{
    require(inputs[kBOXES].nbDims == 3 && inputs[kSCORES].nbDims == 3,
        "expected boxes [batch, anchors, 4] and scores [batch, anchors, classes]");
    nvinfer1::IDimensionExpr const* batch = inputs[kSCORES].d[0];
    nvinfer1::IDimensionExpr const* k = exprBuilder.constant(mFields.max_output_boxes);
    outputs[0].nbDims = 2;
    outputs[0].d[0] = batch;
    outputs[0].d[1] = exprBuilder.constant(1);
    outputs[1].nbDims = 3;
    outputs[1].d[0] = batch;
    outputs[1].d[1] = k;
    outputs[1].d[2] = exprBuilder.constant(4);
    for (int32_t i = 2; i < kNB_OUTPUTS; ++i)
    {
        outputs[i].nbDims = 2;
        outputs[i].d[0] = batch;
        outputs[i].d[1] = k;
    }
}

bool EfficientNmsPlugin::supportsFormat(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut) const
{
    nvinfer1::PluginTensorDesc const& desc = inOut[pos].desc;
    if (desc.format != TensorFormat::kLINEAR)
    {
        return false;
    }
    switch (pos)
    {
    case 0: return isFloatType(desc.type);
    case 2:
    case 5: return desc.type == DataType::kINT32;
    default: return desc.type == inOut[0].desc.type; // scores, detection_boxes, detection_scores
    }
}

int32_t EfficientNmsPlugin::getNbOutputs() const noexcept
{
    return kNB_OUTPUTS;
}

size_t EfficientNmsPlugin::workspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs) const
{
    // The largest shapes of the profile: the workspace grows with batch, anchors and classes.
    TorchtrtExtEfficientNmsParams const params = paramsFor(inputs[kBOXES].max, inputs[kSCORES].max);
    int64_t const bytes = torchtrt_ext_efficient_nms_workspace_size(&params);
    require(bytes >= 0, "the kernels reject the profile's largest shapes (batch * anchors * classes must be < 2^31)");
    return static_cast<size_t>(bytes);
}

void EfficientNmsPlugin::shapesChanged(
    nvinfer1::PluginTensorDesc const* in, int32_t /* nbInputs */, nvinfer1::PluginTensorDesc const* /* out */) const
{
    paramsFor(in[kBOXES].dims, in[kSCORES].dims);
}

void EfficientNmsPlugin::run(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
    void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) const
{
    checkIO(inputDesc, outputDesc);
    TorchtrtExtEfficientNmsParams const params = paramsFor(inputDesc[kBOXES].dims, inputDesc[kSCORES].dims);
    int64_t const bytes = torchtrt_ext_efficient_nms_workspace_size(&params);
    require(bytes >= 0, "the kernels reject these shapes (batch * anchors * classes must be < 2^31)");
    int32_t status = 0;
    switch (inputDesc[kBOXES].type)
    {
    case DataType::kFLOAT:
        status = torchtrt_ext_efficient_nms_f32(&params, inputs[kBOXES], inputs[kSCORES], outputs[0], outputs[1],
            outputs[2], outputs[3], workspace, bytes, stream);
        break;
    case DataType::kHALF:
        status = torchtrt_ext_efficient_nms_f16(&params, inputs[kBOXES], inputs[kSCORES], outputs[0], outputs[1],
            outputs[2], outputs[3], workspace, bytes, stream);
        break;
    case DataType::kBF16:
        status = torchtrt_ext_efficient_nms_bf16(&params, inputs[kBOXES], inputs[kSCORES], outputs[0], outputs[1],
            outputs[2], outputs[3], workspace, bytes, stream);
        break;
    default: throw PluginError(std::string("no kernel for type ") + dataTypeName(inputDesc[kBOXES].type));
    }
    checkCuda(static_cast<cudaError_t>(status), "the EfficientNMS kernels");
}

void EfficientNmsPlugin::addFieldsToSerialize(std::vector<PluginField>& fields)
{
    fields.emplace_back(kSCORE_THRESHOLD, &mFields.score_threshold, PluginFieldType::kFLOAT32, 1);
    fields.emplace_back(kIOU_THRESHOLD, &mFields.iou_threshold, PluginFieldType::kFLOAT32, 1);
    fields.emplace_back(kMAX_OUTPUT_BOXES, &mFields.max_output_boxes, PluginFieldType::kINT32, 1);
    fields.emplace_back(kBACKGROUND_CLASS, &mFields.background_class, PluginFieldType::kINT32, 1);
    fields.emplace_back(kSCORE_ACTIVATION, &mFields.score_activation, PluginFieldType::kINT32, 1);
    fields.emplace_back(kCLASS_AGNOSTIC, &mFields.class_agnostic, PluginFieldType::kINT32, 1);
    fields.emplace_back(kBOX_CODING, &mFields.box_coding, PluginFieldType::kINT32, 1);
}

EfficientNmsPluginCreator::EfficientNmsPluginCreator(char const* pluginNamespace)
    : PluginCreatorBase(kEFFICIENT_NMS_NAME, kEFFICIENT_NMS_VERSION, pluginNamespace,
        {PluginField(kSCORE_THRESHOLD, nullptr, PluginFieldType::kFLOAT32, 1),
            PluginField(kIOU_THRESHOLD, nullptr, PluginFieldType::kFLOAT32, 1),
            PluginField(kMAX_OUTPUT_BOXES, nullptr, PluginFieldType::kINT32, 1),
            PluginField(kBACKGROUND_CLASS, nullptr, PluginFieldType::kINT32, 1),
            PluginField(kSCORE_ACTIVATION, nullptr, PluginFieldType::kINT32, 1),
            PluginField(kCLASS_AGNOSTIC, nullptr, PluginFieldType::kINT32, 1),
            PluginField(kBOX_CODING, nullptr, PluginFieldType::kINT32, 1)})
{
}

std::unique_ptr<nvinfer1::IPluginV3> EfficientNmsPluginCreator::createFromFields(nvinfer1::PluginFieldCollection const* fc)
{
    TorchtrtExtEfficientNmsParams fields{};
    int32_t seen = 0; // one bit per required field
    readFields(fc,
        "score_threshold, iou_threshold (kFLOAT32), max_output_boxes, background_class, score_activation, box_coding "
        "(kINT32), class_agnostic (kINT32, optional)",
        [&](PluginField const& field, std::string const& name) {
            struct Int
            {
                char const* name;
                int32_t* value;
                int32_t bit;
            };
            Int const ints[] = {{kMAX_OUTPUT_BOXES, &fields.max_output_boxes, 4},
                {kBACKGROUND_CLASS, &fields.background_class, 8}, {kSCORE_ACTIVATION, &fields.score_activation, 16},
                {kBOX_CODING, &fields.box_coding, 32}, {kCLASS_AGNOSTIC, &fields.class_agnostic, 0}};
            if (name == kSCORE_THRESHOLD || name == kIOU_THRESHOLD)
            {
                bool const score = name == kSCORE_THRESHOLD;
                (score ? fields.score_threshold : fields.iou_threshold)
                    = readScalarField<float>(field, PluginFieldType::kFLOAT32);
                seen |= score ? 1 : 2;
                return true;
            }
            for (Int const& item : ints)
            {
                if (name == item.name)
                {
                    *item.value = readScalarField<int32_t>(field, PluginFieldType::kINT32);
                    seen |= item.bit;
                    return true;
                }
            }
            return false;
        });
    char const* const required[] = {kSCORE_THRESHOLD, kIOU_THRESHOLD, kMAX_OUTPUT_BOXES, kBACKGROUND_CLASS,
        kSCORE_ACTIVATION, kBOX_CODING};
    for (int32_t i = 0; i < 6; ++i)
    {
        require((seen >> i) & 1, std::string("missing field '") + required[i] + "'");
    }
    return std::make_unique<EfficientNmsPlugin>(fields, getPluginNamespace());
}

} // namespace plugins
} // namespace torchtrt_ext
