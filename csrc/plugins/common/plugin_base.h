// Boilerplate shared by every torchtrt_ext plugin: name/version/namespace for the plugin's core capability and
// its creator, the creator's advertised field list, and typed reads of PluginFields. An op's files then hold only
// its own logic (shapes, formats, dtype dispatch).
#pragma once

#include "NvInferRuntime.h"
#include "plugins/common/checks.h"

#include <cstring>
#include <string>
#include <vector>

namespace torchtrt_ext
{
namespace plugins
{

//! The namespace every torchtrt_ext creator uses unless registered under another (DESIGN.md §3).
constexpr char const* kDEFAULT_NAMESPACE = "torchtrt_ext";

//! Human-readable name of a PluginFieldType, for error messages ("kINT32").
char const* fieldTypeName(nvinfer1::PluginFieldType type) noexcept;

//! Human-readable name of a DataType, for error messages ("kHALF").
char const* dataTypeName(nvinfer1::DataType type) noexcept;

//! Read a one-element field of type `expected` (T must match it, e.g. int32_t for kINT32); throws PluginError
//! naming the field when the type, length or data pointer is wrong.
template <typename T>
T readScalarField(nvinfer1::PluginField const& field, nvinfer1::PluginFieldType expected)
{
    std::string const name = field.name != nullptr ? field.name : "<unnamed>";
    require(field.type == expected,
        "field '" + name + "' has type " + fieldTypeName(field.type) + ", expected " + fieldTypeName(expected));
    require(field.length == 1, "field '" + name + "' has " + std::to_string(field.length) + " elements, expected 1");
    require(field.data != nullptr, "field '" + name + "' has no data");
    T value{};
    std::memcpy(&value, field.data, sizeof(T));
    return value;
}

//! Read a field of exactly N elements of type `expected` (T must match it) into `values`; throws PluginError naming
//! the field when the type, length or data pointer is wrong.
template <typename T, size_t N>
void readArrayField(nvinfer1::PluginField const& field, nvinfer1::PluginFieldType expected, T (&values)[N])
{
    std::string const name = field.name != nullptr ? field.name : "<unnamed>";
    require(field.type == expected,
        "field '" + name + "' has type " + fieldTypeName(field.type) + ", expected " + fieldTypeName(expected));
    require(field.length == static_cast<int32_t>(N),
        "field '" + name + "' has " + std::to_string(field.length) + " elements, expected " + std::to_string(N));
    require(field.data != nullptr, "field '" + name + "' has no data");
    std::memcpy(values, field.data, sizeof(T) * N);
}

//! The core capability of a plugin: its name, version and namespace.
class PluginCoreBase : public nvinfer1::IPluginV3OneCore
{
public:
    PluginCoreBase(char const* name, char const* version, std::string pluginNamespace)
        : mName(name)
        , mVersion(version)
        , mNamespace(std::move(pluginNamespace))
    {
    }

    char const* getPluginName() const noexcept override
    {
        return mName;
    }
    char const* getPluginVersion() const noexcept override
    {
        return mVersion;
    }
    char const* getPluginNamespace() const noexcept override
    {
        return mNamespace.c_str();
    }

protected:
    PluginCoreBase(PluginCoreBase const&) = default;
    PluginCoreBase& operator=(PluginCoreBase const&) = delete;

private:
    char const* mName;
    char const* mVersion;
    std::string mNamespace;
};

//! A creator's name, version, namespace and advertised fields (getFieldNames).
class PluginCreatorBase : public nvinfer1::IPluginCreatorV3One
{
public:
    PluginCreatorBase(char const* name, char const* version, std::string pluginNamespace,
        std::vector<nvinfer1::PluginField> fieldNames)
        : mName(name)
        , mVersion(version)
        , mNamespace(std::move(pluginNamespace))
        , mFieldNames(std::move(fieldNames))
    {
        mFieldCollection.nbFields = static_cast<int32_t>(mFieldNames.size());
        mFieldCollection.fields = mFieldNames.data();
    }
    PluginCreatorBase(PluginCreatorBase const&) = delete;
    PluginCreatorBase& operator=(PluginCreatorBase const&) = delete;

    char const* getPluginName() const noexcept override
    {
        return mName;
    }
    char const* getPluginVersion() const noexcept override
    {
        return mVersion;
    }
    char const* getPluginNamespace() const noexcept override
    {
        return mNamespace.c_str();
    }
    nvinfer1::PluginFieldCollection const* getFieldNames() noexcept override
    {
        return &mFieldCollection;
    }

private:
    char const* mName;
    char const* mVersion;
    std::string mNamespace;
    std::vector<nvinfer1::PluginField> mFieldNames;
    nvinfer1::PluginFieldCollection mFieldCollection{};
};

} // namespace plugins
} // namespace torchtrt_ext
