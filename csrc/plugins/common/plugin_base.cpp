#include "plugins/common/plugin_base.h"

#include "plugins/common/logging.h"

namespace torchtrt_ext
{
namespace plugins
{

// Only the enumerators present since TensorRT 10.0 are named, so the library also builds against older headers.

char const* fieldTypeName(nvinfer1::PluginFieldType type) noexcept
{
    using T = nvinfer1::PluginFieldType;
    switch (type)
    {
    case T::kFLOAT16: return "kFLOAT16";
    case T::kFLOAT32: return "kFLOAT32";
    case T::kFLOAT64: return "kFLOAT64";
    case T::kINT8: return "kINT8";
    case T::kINT16: return "kINT16";
    case T::kINT32: return "kINT32";
    case T::kCHAR: return "kCHAR";
    case T::kDIMS: return "kDIMS";
    case T::kUNKNOWN: return "kUNKNOWN";
    case T::kBF16: return "kBF16";
    case T::kINT64: return "kINT64";
    default: return "another PluginFieldType";
    }
}

char const* dataTypeName(nvinfer1::DataType type) noexcept
{
    using T = nvinfer1::DataType;
    switch (type)
    {
    case T::kFLOAT: return "kFLOAT";
    case T::kHALF: return "kHALF";
    case T::kBF16: return "kBF16";
    case T::kINT8: return "kINT8";
    case T::kINT32: return "kINT32";
    case T::kINT64: return "kINT64";
    case T::kBOOL: return "kBOOL";
    case T::kUINT8: return "kUINT8";
    case T::kFP8: return "kFP8";
    default: return "another DataType";
    }
}

void logCaughtIn(char const* plugin, char const* method) noexcept
{
    try
    {
        std::string const where = std::string(plugin != nullptr ? plugin : "<plugin>") + "::" + method;
        logCaught(where.c_str()); // still inside the caller's catch block: logCaught rethrows what it caught
    }
    catch (...)
    {
        // Formatting the message itself failed (out of memory): nothing may escape a noexcept boundary.
    }
}

PluginCreatorBase::PluginCreatorBase(char const* name, char const* version, char const* pluginNamespace,
    std::vector<nvinfer1::PluginField> fieldNames)
    : PluginIdentity(name, version, pluginNamespace != nullptr ? pluginNamespace : "")
    , mFieldNames(std::move(fieldNames))
{
    mFieldCollection.nbFields = static_cast<int32_t>(mFieldNames.size());
    mFieldCollection.fields = mFieldNames.data();
}

nvinfer1::IPluginV3* PluginCreatorBase::createPlugin(
    char const* /* name */, nvinfer1::PluginFieldCollection const* fc, nvinfer1::TensorRTPhase /* phase */) noexcept
{
    return catchAtBoundary(getPluginName(), "createPlugin", static_cast<nvinfer1::IPluginV3*>(nullptr),
        [&] { return createFromFields(fc).release(); });
}

void PluginCreatorBase::readFields(nvinfer1::PluginFieldCollection const* fc, char const* expectedFields,
    std::function<bool(nvinfer1::PluginField const& field, std::string const& name)> const& read) const
{
    require(fc != nullptr, std::string("no field collection given, expected fields ") + expectedFields);
    require(fc->nbFields >= 0 && (fc->nbFields == 0 || fc->fields != nullptr), "malformed field collection");
    for (int32_t i = 0; i < fc->nbFields; ++i)
    {
        nvinfer1::PluginField const& field = fc->fields[i];
        require(field.name != nullptr, "field " + std::to_string(i) + " has no name");
        std::string const name = field.name;
        if (name == "plugin_version" || name == "plugin_namespace")
        {
            continue; // carried by the ONNX node so that parsers find this creator; not a plugin attribute
        }
        if (!read(field, name))
        {
            std::string known;
            for (nvinfer1::PluginField const& advertised : mFieldNames)
            {
                known += (known.empty() ? "" : ", ") + std::string(advertised.name);
            }
            log(nvinfer1::ILogger::Severity::kWARNING, std::string(getPluginName()) + "::createPlugin: ignoring unknown field '"
                    + name + "' (known fields: " + known + ")");
        }
    }
}

} // namespace plugins
} // namespace torchtrt_ext
