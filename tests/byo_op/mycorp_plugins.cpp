// A stand-in for a team's own plugin library (tests/byo_op): one IPluginV3, Scale2 (y = x * factor, float32) in
// namespace "mycorp", written against TensorRT's headers only, with the two entry points IPluginRegistry::loadLibrary
// looks up (getCreators, setLoggerFinder). It shares no code with torchtrt_ext's own plugin library on purpose.
#include "NvInferRuntime.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

extern "C" int32_t mycorp_scale2_f32(float const* x, float* y, int64_t count, float factor, cudaStream_t stream);

namespace mycorp
{
using namespace nvinfer1;

constexpr char const* kNAME = "Scale2";
constexpr char const* kVERSION = "1";
constexpr char const* kNAMESPACE = "mycorp";

class Scale2Plugin : public IPluginV3, public IPluginV3OneCore, public IPluginV3OneBuild, public IPluginV3OneRuntime
{
public:
    explicit Scale2Plugin(float factor)
        : mFactor(factor)
    {
        mField = PluginField("factor", &mFactor, PluginFieldType::kFLOAT32, 1);
        mFields.nbFields = 1;
        mFields.fields = &mField;
    }

    IPluginCapability* getCapabilityInterface(PluginCapabilityType type) noexcept override
    {
        switch (type)
        {
        case PluginCapabilityType::kCORE: return static_cast<IPluginV3OneCore*>(this);
        case PluginCapabilityType::kBUILD: return static_cast<IPluginV3OneBuild*>(this);
        case PluginCapabilityType::kRUNTIME: return static_cast<IPluginV3OneRuntime*>(this);
        }
        return nullptr;
    }

    IPluginV3* clone() noexcept override
    {
        return new (std::nothrow) Scale2Plugin(mFactor);
    }

    AsciiChar const* getPluginName() const noexcept override
    {
        return kNAME;
    }
    AsciiChar const* getPluginVersion() const noexcept override
    {
        return kVERSION;
    }
    AsciiChar const* getPluginNamespace() const noexcept override
    {
        return kNAMESPACE;
    }

    int32_t configurePlugin(DynamicPluginTensorDesc const*, int32_t, DynamicPluginTensorDesc const*,
        int32_t) noexcept override
    {
        return 0;
    }
    int32_t getOutputDataTypes(
        DataType* outputTypes, int32_t nbOutputs, DataType const* inputTypes, int32_t nbInputs) const noexcept override
    {
        if (nbOutputs != 1 || nbInputs != 1)
        {
            return -1;
        }
        outputTypes[0] = inputTypes[0];
        return 0;
    }
    int32_t getOutputShapes(DimsExprs const* inputs, int32_t nbInputs, DimsExprs const*, int32_t, DimsExprs* outputs,
        int32_t nbOutputs, IExprBuilder&) noexcept override
    {
        if (nbOutputs != 1 || nbInputs != 1)
        {
            return -1;
        }
        outputs[0] = inputs[0];
        return 0;
    }
    bool supportsFormatCombination(
        int32_t pos, DynamicPluginTensorDesc const* inOut, int32_t, int32_t) noexcept override
    {
        return inOut[pos].desc.type == DataType::kFLOAT && inOut[pos].desc.format == TensorFormat::kLINEAR;
    }
    int32_t getNbOutputs() const noexcept override
    {
        return 1;
    }

    int32_t onShapeChange(PluginTensorDesc const*, int32_t, PluginTensorDesc const*, int32_t) noexcept override
    {
        return 0;
    }
    int32_t enqueue(PluginTensorDesc const* inputDesc, PluginTensorDesc const*, void const* const* inputs,
        void* const* outputs, void*, cudaStream_t stream) noexcept override
    {
        int64_t count = 1;
        for (int32_t i = 0; i < inputDesc[0].dims.nbDims; ++i)
        {
            count *= inputDesc[0].dims.d[i];
        }
        return mycorp_scale2_f32(
            static_cast<float const*>(inputs[0]), static_cast<float*>(outputs[0]), count, mFactor, stream);
    }
    IPluginV3* attachToContext(IPluginResourceContext*) noexcept override
    {
        return clone();
    }
    PluginFieldCollection const* getFieldsToSerialize() noexcept override
    {
        return &mFields;
    }

private:
    float mFactor;
    PluginField mField;
    PluginFieldCollection mFields{};
};

class Scale2Creator : public IPluginCreatorV3One
{
public:
    Scale2Creator()
    {
        mField = PluginField("factor", nullptr, PluginFieldType::kFLOAT32, 1);
        mFields.nbFields = 1;
        mFields.fields = &mField;
    }

    IPluginV3* createPlugin(AsciiChar const*, PluginFieldCollection const* fc, TensorRTPhase) noexcept override
    {
        float factor = 1.F;
        for (int32_t i = 0; fc != nullptr && i < fc->nbFields; ++i)
        {
            PluginField const& field = fc->fields[i];
            if (std::strcmp(field.name, "factor") == 0 && field.type == PluginFieldType::kFLOAT32 && field.length == 1)
            {
                factor = *static_cast<float const*>(field.data);
            }
        }
        return new (std::nothrow) Scale2Plugin(factor);
    }
    PluginFieldCollection const* getFieldNames() noexcept override
    {
        return &mFields;
    }
    AsciiChar const* getPluginName() const noexcept override
    {
        return kNAME;
    }
    AsciiChar const* getPluginVersion() const noexcept override
    {
        return kVERSION;
    }
    AsciiChar const* getPluginNamespace() const noexcept override
    {
        return kNAMESPACE;
    }

private:
    PluginField mField;
    PluginFieldCollection mFields{};
};
} // namespace mycorp

extern "C" __attribute__((visibility("default"))) nvinfer1::IPluginCreatorInterface* const* getCreators(
    int32_t& nbCreators) noexcept
{
    static mycorp::Scale2Creator creator;
    static nvinfer1::IPluginCreatorInterface* const creators[] = {&creator};
    nbCreators = 1;
    return creators;
}

extern "C" __attribute__((visibility("default"))) void setLoggerFinder(nvinfer1::ILoggerFinder*) noexcept {}
