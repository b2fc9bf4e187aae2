#include "plugins/deform_conv2d/deform_conv2d_plugin.h"

#include "kernels/cublaslt.h"
#include "kernels/deform_conv2d.h"
#include "plugins/common/logging.h"

#include <cstring>
#include <memory>
#include <mutex>

using nvinfer1::DataType;
using nvinfer1::Dims;
using nvinfer1::DimensionOperation;
using nvinfer1::IDimensionExpr;
using nvinfer1::PluginField;
using nvinfer1::PluginFieldType;
using nvinfer1::PluginTensorDesc;
using nvinfer1::TensorFormat;

namespace torchtrt_ext
{
namespace plugins
{
namespace
{
constexpr int32_t kMIN_INPUTS = 3; // input, offset, weight
constexpr int32_t kMAX_INPUTS = 5; // + bias, + mask (bias always before mask: 4 inputs = bias)
constexpr int32_t kNB_OUTPUTS = 1;
constexpr int32_t kINPUT = 0;
constexpr int32_t kOFFSET = 1;
constexpr int32_t kWEIGHT = 2;
constexpr int32_t kBIAS = 3;
constexpr int32_t kMASK = 4;
constexpr char const* kINPUT_NAMES[kMAX_INPUTS] = {"input", "offset", "weight", "bias", "mask"};
constexpr int32_t kINPUT_RANKS[kMAX_INPUTS] = {4, 4, 4, 1, 4};

std::string pair(int32_t const (&v)[2])
{
    return std::to_string(v[0]) + "," + std::to_string(v[1]);
}

std::string describe(DeformConv2dAttrs const& a)
{
    return "stride=" + pair(a.stride) + ";padding=" + pair(a.padding) + ";dilation=" + pair(a.dilation)
        + ";groups=" + std::to_string(a.groups) + ";offset_groups=" + std::to_string(a.offsetGroups);
}

std::string dimsText(Dims const& d)
{
    std::string s = "[";
    for (int32_t i = 0; i < d.nbDims; ++i)
    {
        s += (i ? ", " : "") + std::to_string(d.d[i]);
    }
    return s + "]";
}

} // namespace

void DeformConv2dPlugin::checkCounts(int32_t nbInputs, int32_t nbOutputs)
{
    require(nbInputs >= kMIN_INPUTS && nbInputs <= kMAX_INPUTS && nbOutputs == kNB_OUTPUTS,
        "expected 3 to 5 inputs (input, offset, weight[, bias[, mask]]) and 1 output, got " + std::to_string(nbInputs)
            + " inputs and " + std::to_string(nbOutputs) + " outputs");
}

char const* DeformConv2dPlugin::inputName(int32_t index) noexcept
{
    return index >= 0 && index < kMAX_INPUTS ? kINPUT_NAMES[index] : "<input>";
}

namespace
{
bool known(int64_t d)
{
    return d >= 0;
}

//! (size + 2 * pad - dil * (kernel - 1) - 1) / stride + 1 for known sizes; may be < 1 (no output).
int64_t convOut(int64_t size, int64_t kernel, int32_t stride, int32_t pad, int32_t dil)
{
    int64_t const span = size + 2 * static_cast<int64_t>(pad) - static_cast<int64_t>(dil) * (kernel - 1) - 1;
    return span < 0 ? 0 : span / stride + 1;
}

//! The same with IExprBuilder operations, so that dynamic sizes give a symbolic output size.
IDimensionExpr const* convOutExpr(nvinfer1::IExprBuilder& eb, IDimensionExpr const& size, IDimensionExpr const& kernel,
    int32_t stride, int32_t pad, int32_t dil)
{
    IDimensionExpr const* one = eb.constant(1);
    IDimensionExpr const* padded = eb.operation(DimensionOperation::kSUM, size, *eb.constant(2 * static_cast<int64_t>(pad)));
    IDimensionExpr const* taps = eb.operation(DimensionOperation::kSUB, kernel, *one);
    IDimensionExpr const* reach = eb.operation(DimensionOperation::kPROD, *eb.constant(dil), *taps);
    IDimensionExpr const* span = eb.operation(DimensionOperation::kSUB, *eb.operation(DimensionOperation::kSUB, *padded, *reach), *one);
    IDimensionExpr const* steps = eb.operation(DimensionOperation::kFLOOR_DIV, *span, *eb.constant(stride));
    return eb.operation(DimensionOperation::kSUM, *steps, *one);
}

//! The channels-last input formats the launcher reads as they are (no transposed copy): kHWC for float32, kHWC8 for
//! float16/bfloat16 when the channels fill whole vectors of 8 (a known multiple of 8: the layout then has no padding).
bool channelsLastInput(PluginTensorDesc const& d)
{
    bool const fullVectors = d.dims.nbDims == 4 && d.dims.d[1] > 0 && d.dims.d[1] % 8 == 0;
    return (d.format == TensorFormat::kHWC && d.type == DataType::kFLOAT)
        || (d.format == TensorFormat::kHWC8 && (d.type == DataType::kHALF || d.type == DataType::kBF16) && fullVectors);
}

} // namespace

DeformConv2dPlugin::DeformConv2dPlugin(DeformConv2dAttrs const& attrs, std::string pluginNamespace)
    : PluginV3Base(kDEFORM_CONV2D_NAME, kDEFORM_CONV2D_VERSION, std::move(pluginNamespace), describe(attrs))
    , mAttrs(attrs)
{
    require(attrs.stride[0] >= 1 && attrs.stride[1] >= 1,
        "field 'stride' is (" + pair(attrs.stride) + "), expected two values >= 1");
    require(attrs.padding[0] >= 0 && attrs.padding[1] >= 0,
        "field 'padding' is (" + pair(attrs.padding) + "), expected two values >= 0");
    require(attrs.dilation[0] >= 1 && attrs.dilation[1] >= 1,
        "field 'dilation' is (" + pair(attrs.dilation) + "), expected two values >= 1");
    require(attrs.groups >= 1, "field 'groups' is " + std::to_string(attrs.groups) + ", expected a value >= 1");
    require(attrs.offsetGroups >= 1,
        "field 'offset_groups' is " + std::to_string(attrs.offsetGroups) + ", expected a value >= 1");
}

void DeformConv2dPlugin::checkIO(PluginTensorDesc const* in, int32_t nbInputs, PluginTensorDesc const& out) const
{
    for (int32_t i = 0; i < nbInputs; ++i)
    {
        require(in[i].dims.nbDims == kINPUT_RANKS[i],
            std::string(kINPUT_NAMES[i]) + " has shape " + dimsText(in[i].dims) + ", expected rank "
                + std::to_string(kINPUT_RANKS[i]));
        require(in[i].format == TensorFormat::kLINEAR || (i == kINPUT && channelsLastInput(in[i])),
            std::string(kINPUT_NAMES[i]) + " is not LINEAR, expected LINEAR"
                + (i == kINPUT ? " or channels-last (kHWC float32; kHWC8 float16/bfloat16, channels a multiple of 8)"
                               : ""));
    }
    require(out.dims.nbDims == 4, "the output has shape " + dimsText(out.dims) + ", expected rank 4");
    require(out.format == TensorFormat::kLINEAR, "the output is not LINEAR, expected LINEAR");
    DataType const type = in[kINPUT].type;
    require(isFloatType(type),
        std::string("input has type ") + dataTypeName(type) + ", expected kFLOAT, kHALF or kBF16");
    for (int32_t i = 1; i < nbInputs; ++i)
    {
        require(in[i].type == type,
            std::string(kINPUT_NAMES[i]) + " has type " + dataTypeName(in[i].type) + ", expected the input's type "
                + dataTypeName(type));
    }
    require(out.type == type,
        std::string("the output has type ") + dataTypeName(out.type) + ", expected the input's type " + dataTypeName(type));

    Dims const& x = in[kINPUT].dims;
    Dims const& w = in[kWEIGHT].dims;
    int64_t const kh = w.d[2];
    int64_t const kw = w.d[3];
    require(kh >= 1 && kw >= 1,
        "weight has shape " + dimsText(w) + ": its kernel size (dims 2 and 3) must be static and >= 1 (build with a "
            + "constant weight shape)");
    int64_t const taps = kh * kw;
    int64_t const groups = mAttrs.groups;
    int64_t const og = mAttrs.offsetGroups;
    if (known(w.d[0]))
    {
        require(w.d[0] % groups == 0,
            "weight has " + std::to_string(w.d[0]) + " output channels, expected a multiple of groups=" + std::to_string(groups));
    }
    if (known(x.d[1]) && known(w.d[1]))
    {
        require(w.d[1] * groups == x.d[1],
            "weight has shape " + dimsText(w) + " (" + std::to_string(w.d[1]) + " input channels per group), expected C_in/groups = "
                + std::to_string(x.d[1]) + "/" + std::to_string(groups) + " for an input of " + std::to_string(x.d[1])
                + " channels");
    }
    if (known(x.d[1]))
    {
        require(x.d[1] % og == 0,
            "input has " + std::to_string(x.d[1]) + " channels, expected a multiple of offset_groups=" + std::to_string(og));
    }
    Dims const& off = in[kOFFSET].dims;
    if (known(off.d[1]))
    {
        require(off.d[1] == 2 * og * taps,
            "offset has " + std::to_string(off.d[1]) + " channels, expected 2 * offset_groups * kh * kw = 2 * "
                + std::to_string(og) + " * " + std::to_string(kh) + " * " + std::to_string(kw) + " = "
                + std::to_string(2 * og * taps));
    }
    if (nbInputs > kMASK && known(in[kMASK].dims.d[1]))
    {
        require(in[kMASK].dims.d[1] == og * taps,
            "mask has " + std::to_string(in[kMASK].dims.d[1]) + " channels, expected offset_groups * kh * kw = "
                + std::to_string(og * taps));
    }
    if (nbInputs > kBIAS && known(in[kBIAS].dims.d[0]) && known(w.d[0]))
    {
        require(in[kBIAS].dims.d[0] == w.d[0],
            "bias has shape " + dimsText(in[kBIAS].dims) + ", expected [C_out] = [" + std::to_string(w.d[0]) + "]");
    }
    int64_t const outSize[2] = {known(x.d[2]) ? convOut(x.d[2], kh, mAttrs.stride[0], mAttrs.padding[0], mAttrs.dilation[0]) : -1,
        known(x.d[3]) ? convOut(x.d[3], kw, mAttrs.stride[1], mAttrs.padding[1], mAttrs.dilation[1]) : -1};
    for (int32_t a = 0; a < 2; ++a)
    {
        require(outSize[a] != 0,
            "input of spatial size " + dimsText(x) + " gives an empty output for kernel " + std::to_string(kh) + "x"
                + std::to_string(kw) + " and " + mDescription + ", expected an output of at least 1x1");
    }
    for (int32_t i : {kOFFSET, kMASK})
    {
        if (i >= nbInputs)
        {
            continue;
        }
        Dims const& d = in[i].dims;
        require(!known(d.d[0]) || !known(x.d[0]) || d.d[0] == x.d[0],
            std::string(kINPUT_NAMES[i]) + " has batch " + std::to_string(d.d[0]) + ", expected the input's batch "
                + std::to_string(x.d[0]));
        for (int32_t a = 0; a < 2; ++a)
        {
            require(!known(d.d[2 + a]) || outSize[a] < 0 || d.d[2 + a] == outSize[a],
                std::string(kINPUT_NAMES[i]) + " has shape " + dimsText(d) + ", expected the output's spatial size "
                    + std::to_string(outSize[0]) + "x" + std::to_string(outSize[1]));
        }
    }
    int64_t const expected[4] = {x.d[0], w.d[0], outSize[0], outSize[1]};
    for (int32_t a = 0; a < 4; ++a)
    {
        require(!known(out.dims.d[a]) || !known(expected[a]) || out.dims.d[a] == expected[a],
            "the output has shape " + dimsText(out.dims) + ", expected [N, C_out, H_out, W_out] = ["
                + std::to_string(expected[0]) + ", " + std::to_string(expected[1]) + ", " + std::to_string(expected[2])
                + ", " + std::to_string(expected[3]) + "]");
    }
}

bool DeformConv2dPlugin::supportsFormat(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut) const
{
    return (pos == kINPUT && channelsLastInput(inOut[pos].desc))
        || PluginV3Base<DeformConv2dPlugin>::supportsFormat(pos, inOut);
}

TorchtrtExtDeformConv2dDesc DeformConv2dPlugin::launchDesc(
    Dims const& input, Dims const& weight, DataType type, bool channelsLast) const
{
    int32_t const dtype = type == DataType::kFLOAT ? TORCHTRT_EXT_DCN_FLOAT32
        : type == DataType::kHALF                  ? TORCHTRT_EXT_DCN_FLOAT16
                                                   : TORCHTRT_EXT_DCN_BFLOAT16;
    return {input.d[0], input.d[1], input.d[2], input.d[3], weight.d[0], weight.d[2], weight.d[3], mAttrs.stride[0],
        mAttrs.stride[1], mAttrs.padding[0], mAttrs.padding[1], mAttrs.dilation[0], mAttrs.dilation[1], mAttrs.groups,
        mAttrs.offsetGroups, dtype, channelsLast ? TORCHTRT_EXT_DCN_CHANNELS_LAST : TORCHTRT_EXT_DCN_NCHW};
}

int64_t DeformConv2dPlugin::workspaceBytes(TorchtrtExtDeformConv2dDesc const& desc, Dims const& input,
    Dims const& weight) const
{
    int64_t const bytes = torchtrt_ext_deform_conv2d_workspace_size(&desc);
    require(bytes >= 0,
        "the kernel rejects input " + dimsText(input) + " with weight " + dimsText(weight) + " and " + mDescription
            + " (sizes out of range, or channels not divisible by groups/offset_groups)");
    return bytes;
}

void DeformConv2dPlugin::configure(PluginTensorDesc const* in, int32_t nbInputs, PluginTensorDesc const* out)
{
    checkIO(in, nbInputs, out[0]);
    mNbInputs = nbInputs;
}

void DeformConv2dPlugin::outputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs,
    nvinfer1::DimsExprs* outputs, nvinfer1::IExprBuilder& exprBuilder) const
{
    for (int32_t i = 0; i < nbInputs; ++i)
    {
        require(inputs[i].nbDims == kINPUT_RANKS[i],
            std::string(kINPUT_NAMES[i]) + " has rank " + std::to_string(inputs[i].nbDims) + ", expected rank "
                + std::to_string(kINPUT_RANKS[i]));
    }
    nvinfer1::DimsExprs const& x = inputs[kINPUT];
    nvinfer1::DimsExprs const& w = inputs[kWEIGHT];
    nvinfer1::DimsExprs& y = outputs[0];
    y.nbDims = 4;
    y.d[0] = x.d[0];
    y.d[1] = w.d[0];
    y.d[2] = convOutExpr(exprBuilder, *x.d[2], *w.d[2], mAttrs.stride[0], mAttrs.padding[0], mAttrs.dilation[0]);
    y.d[3] = convOutExpr(exprBuilder, *x.d[3], *w.d[3], mAttrs.stride[1], mAttrs.padding[1], mAttrs.dilation[1]);
    require(y.d[2] != nullptr && y.d[3] != nullptr, "the expression builder returned no expression");
    for (int32_t a = 2; a < 4; ++a)
    {
        require(!y.d[a]->isConstant() || y.d[a]->getConstantValue() >= 1,
            "the output size along dim " + std::to_string(a) + " is " + std::to_string(y.d[a]->getConstantValue())
                + " for " + mDescription + ", expected >= 1 (the kernel does not fit the padded input)");
    }
}

size_t DeformConv2dPlugin::workspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs) const
{
    // The largest shapes of the profile: the launcher's workspace never shrinks as N, C, H, W or C_out grow, so
    // this serves every shape the profile allows (the kernel size is static, checked by configurePlugin). Sized for
    // an NCHW input (its transposed copy included), which also holds a channels-last one.
    Dims const& x = inputs[kINPUT].max;
    Dims const& w = inputs[kWEIGHT].max;
    return static_cast<size_t>(workspaceBytes(launchDesc(x, w, inputs[kINPUT].desc.type, false), x, w));
}

void DeformConv2dPlugin::shapesChanged(
    PluginTensorDesc const* /* in */, int32_t /* nbInputs */, PluginTensorDesc const* /* out */) const
{
    static std::once_flag logged; // the GEMM library is chosen once per process, where the engine runs
    std::call_once(logged, [] {
        char const* line = torchtrt_ext_gemm_library();
        log(std::strncmp(line, "cuBLASLt", 8) == 0 ? nvinfer1::ILogger::Severity::kINFO
                                                   : nvinfer1::ILogger::Severity::kWARNING,
            std::string("DeformConv2d GEMM: ") + line);
    });
}

void DeformConv2dPlugin::run(PluginTensorDesc const* inputDesc, PluginTensorDesc const* outputDesc,
    void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) const
{
    require(mNbInputs >= kMIN_INPUTS,
        "enqueue before configurePlugin/onShapeChange: the number of inputs (3 to 5) is not known");
    checkIO(inputDesc, mNbInputs, outputDesc[0]);
    Dims const& x = inputDesc[kINPUT].dims;
    Dims const& w = inputDesc[kWEIGHT].dims;
    for (int32_t i = 0; i < mNbInputs; ++i)
    {
        for (int32_t a = 0; a < inputDesc[i].dims.nbDims; ++a)
        {
            require(known(inputDesc[i].dims.d[a]),
                std::string(kINPUT_NAMES[i]) + " has shape " + dimsText(inputDesc[i].dims)
                    + " at enqueue, expected known sizes >= 0");
        }
    }
    Dims const& y = outputDesc[0].dims;
    if (y.d[0] == 0 || y.d[1] == 0 || y.d[2] == 0 || y.d[3] == 0)
    {
        return; // an empty output: nothing to compute
    }
    TorchtrtExtDeformConv2dDesc const desc = launchDesc(x, w, inputDesc[kINPUT].type, channelsLastInput(inputDesc[kINPUT]));
    int64_t const bytes = workspaceBytes(desc, x, w);
    require(inputs[kINPUT] != nullptr && inputs[kOFFSET] != nullptr && inputs[kWEIGHT] != nullptr
            && outputs[0] != nullptr && (mNbInputs <= kBIAS || inputs[kBIAS] != nullptr)
            && (mNbInputs <= kMASK || inputs[kMASK] != nullptr),
        "null input or output buffer");
    require(workspace != nullptr, "no workspace given, expected " + std::to_string(bytes) + " bytes");
    TorchtrtExtDeformConv2dTensors const tensors{inputs[kINPUT], inputs[kOFFSET], inputs[kWEIGHT],
        mNbInputs > kBIAS ? inputs[kBIAS] : nullptr, mNbInputs > kMASK ? inputs[kMASK] : nullptr, outputs[0]};
    int32_t const status = torchtrt_ext_deform_conv2d(&desc, &tensors, workspace, bytes, stream);
    checkCuda(static_cast<cudaError_t>(status), "the DeformConv2d kernel launch");
}

void DeformConv2dPlugin::addFieldsToSerialize(std::vector<PluginField>& fields)
{
    fields.emplace_back(kDEFORM_CONV2D_STRIDE_FIELD, mAttrs.stride, PluginFieldType::kINT32, 2);
    fields.emplace_back(kDEFORM_CONV2D_PADDING_FIELD, mAttrs.padding, PluginFieldType::kINT32, 2);
    fields.emplace_back(kDEFORM_CONV2D_DILATION_FIELD, mAttrs.dilation, PluginFieldType::kINT32, 2);
    fields.emplace_back(kDEFORM_CONV2D_GROUPS_FIELD, &mAttrs.groups, PluginFieldType::kINT32, 1);
    fields.emplace_back(kDEFORM_CONV2D_OFFSET_GROUPS_FIELD, &mAttrs.offsetGroups, PluginFieldType::kINT32, 1);
}

DeformConv2dPluginCreator::DeformConv2dPluginCreator(char const* pluginNamespace)
    : PluginCreatorBase(kDEFORM_CONV2D_NAME, kDEFORM_CONV2D_VERSION, pluginNamespace,
        {PluginField(kDEFORM_CONV2D_STRIDE_FIELD, nullptr, PluginFieldType::kINT32, 2),
            PluginField(kDEFORM_CONV2D_PADDING_FIELD, nullptr, PluginFieldType::kINT32, 2),
            PluginField(kDEFORM_CONV2D_DILATION_FIELD, nullptr, PluginFieldType::kINT32, 2),
            PluginField(kDEFORM_CONV2D_GROUPS_FIELD, nullptr, PluginFieldType::kINT32, 1),
            PluginField(kDEFORM_CONV2D_OFFSET_GROUPS_FIELD, nullptr, PluginFieldType::kINT32, 1)})
{
}

std::unique_ptr<nvinfer1::IPluginV3> DeformConv2dPluginCreator::createFromFields(nvinfer1::PluginFieldCollection const* fc)
{
    DeformConv2dAttrs attrs;
    readFields(fc, "stride, padding, dilation (kINT32 x 2), groups, offset_groups (kINT32)",
        [&](PluginField const& field, std::string const& name) {
            if (name == kDEFORM_CONV2D_STRIDE_FIELD)
            {
                readArrayField(field, PluginFieldType::kINT32, attrs.stride);
            }
            else if (name == kDEFORM_CONV2D_PADDING_FIELD)
            {
                readArrayField(field, PluginFieldType::kINT32, attrs.padding);
            }
            else if (name == kDEFORM_CONV2D_DILATION_FIELD)
            {
                readArrayField(field, PluginFieldType::kINT32, attrs.dilation);
            }
            else if (name == kDEFORM_CONV2D_GROUPS_FIELD)
            {
                attrs.groups = readScalarField<int32_t>(field, PluginFieldType::kINT32);
            }
            else if (name == kDEFORM_CONV2D_OFFSET_GROUPS_FIELD)
            {
                attrs.offsetGroups = readScalarField<int32_t>(field, PluginFieldType::kINT32);
            }
            else
            {
                return false;
            }
            return true;
        });
    return std::make_unique<DeformConv2dPlugin>(attrs, getPluginNamespace());
}

} // namespace plugins
} // namespace torchtrt_ext
