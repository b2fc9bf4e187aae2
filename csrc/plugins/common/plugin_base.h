// Boilerplate shared by every torchtrt_ext plugin: name/version/namespace for the plugin's core capability and
// its creator, every noexcept IPluginV3 entry point (the checks of what TensorRT passes, the catch at the boundary,
// the logged error and the error value) around hooks that hold an op's own logic, the plumbing that is the same for
// every op (capabilities, clone, attachToContext, timing-cache ID, the field collection to serialize), the creator's
// advertised field list and walk over the fields it is given, and typed reads of PluginFields. An op's files then hold
// only its own logic (attributes, shapes, formats, dtype dispatch).
#pragma once

#include "NvInferRuntime.h"
#include "plugins/common/checks.h"

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace torchtrt_ext
{
namespace plugins
{

//! The namespace every torchtrt_ext creator uses unless registered under another (docs/design.md#onnx-contract).
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

//! Log the exception being handled as an error of "<plugin>::<method>" (e.g. "L2Norm::clone"). Call only inside a
//! catch block.
void logCaughtIn(char const* plugin, char const* method) noexcept;

//! The noexcept boundary of a TensorRT entry point: what `body` returns, or `onError` after logging what it threw as
//! an error of "<plugin>::<method>". Nothing escapes.
template <typename Result, typename Body>
Result catchAtBoundary(char const* plugin, char const* method, Result onError, Body&& body) noexcept
{
    try
    {
        return body();
    }
    catch (...)
    {
        logCaughtIn(plugin, method);
    }
    return onError;
}

//! The status a TensorRT entry point returns for a failure (0 is success).
constexpr int32_t kPLUGIN_ERROR = -1;

//! Name, version and namespace of a plugin (Interface = IPluginV3OneCore) or of its creator (IPluginCreatorV3One).
template <typename Interface>
class PluginIdentity : public Interface
{
public:
    PluginIdentity(char const* name, char const* version, std::string pluginNamespace)
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
    PluginIdentity(PluginIdentity const&) = default;
    PluginIdentity& operator=(PluginIdentity const&) = delete;

private:
    char const* mName;
    char const* mVersion;
    std::string mNamespace;
};

//! The core capability of a plugin: its name, version and namespace.
using PluginCoreBase = PluginIdentity<nvinfer1::IPluginV3OneCore>;

//! An IPluginV3 with the core, build and runtime capabilities, holding what every torchtrt_ext plugin does the same
//! way: each noexcept TensorRT entry point (it checks the counts and pointers TensorRT passes, calls the op's hook and
//! logs what that throws as an error of "<plugin>::<method>" before returning the error value), capability lookup,
//! clone (a copy of Derived), attachToContext (no per-context resources: each execution context gets its own
//! independent copy), timing-cache ID and metadata (a description of the creation state) and the
//! PluginFieldCollection of getFieldsToSerialize.
//! Derived (CRTP) is the op's plugin class. It must be copyable and define, for this base only (a friend), hooks that
//! throw PluginError for what they reject; the counts (checkCounts) and pointers are checked before a hook runs:
//!   `static void checkCounts(int32_t nbInputs, int32_t nbOutputs)`: rejects the counts it does not take;
//!   `void addFieldsToSerialize(std::vector<PluginField>& fields)`: appends its attributes with data pointing into
//!       the object (the same list its creator reads);
//!   `void configure(PluginTensorDesc const* in, int32_t nbInputs, PluginTensorDesc const* out)`: the checks of
//!       configurePlugin (-1 for the sizes the profile leaves open) and of onShapeChange (every size known);
//!   `void outputShapes(DimsExprs const* inputs, int32_t nbInputs, DimsExprs* outputs, IExprBuilder& exprBuilder)`:
//!       getOutputShapes (no shape inputs);
//!   `void run(PluginTensorDesc const* inputDesc, PluginTensorDesc const* outputDesc, void const* const* inputs,
//!       void* const* outputs, void* workspace, cudaStream_t stream)`: enqueue.
//! It may also define these, which replace the base's defaults (the rules most ops share: one output, every tensor
//! LINEAR and of one type, float32, float16 or bfloat16):
//!   `void shapesChanged(PluginTensorDesc const* in, int32_t nbInputs, PluginTensorDesc const* out) const`: what
//!       onShapeChange does after configure: nothing;
//!   `size_t workspaceSize(DynamicPluginTensorDesc const* inputs) const`: none;
//!   `void outputDataTypes(DataType* outputTypes, DataType const* inputTypes, int32_t nbInputs) const`: the inputs'
//!       one type (messages name input i by `static char const* inputName(int32_t i) noexcept`, e.g. "weight");
//!   `bool supportsFormat(int32_t pos, DynamicPluginTensorDesc const* inOut) const`: LINEAR, a float type at
//!       position 0 and position 0's type at every later one.
template <typename Derived>
class PluginV3Base : public nvinfer1::IPluginV3,
                     public PluginCoreBase,
                     public nvinfer1::IPluginV3OneBuild,
                     public nvinfer1::IPluginV3OneRuntime
{
public:
    PluginV3Base& operator=(PluginV3Base const&) = delete;
    ~PluginV3Base() override = default;

    // IPluginV3
    nvinfer1::IPluginCapability* getCapabilityInterface(nvinfer1::PluginCapabilityType type) noexcept final
    {
        return catchAtBoundary(getPluginName(), "getCapabilityInterface",
            static_cast<nvinfer1::IPluginCapability*>(nullptr), [&]() -> nvinfer1::IPluginCapability* {
                switch (type)
                {
                case nvinfer1::PluginCapabilityType::kCORE: return static_cast<nvinfer1::IPluginV3OneCore*>(this);
                case nvinfer1::PluginCapabilityType::kBUILD: return static_cast<nvinfer1::IPluginV3OneBuild*>(this);
                case nvinfer1::PluginCapabilityType::kRUNTIME: return static_cast<nvinfer1::IPluginV3OneRuntime*>(this);
                }
                throw PluginError("unknown PluginCapabilityType " + std::to_string(static_cast<int32_t>(type)));
            });
    }
    //! A deep copy: the copy shares no buffer with this plugin.
    nvinfer1::IPluginV3* clone() noexcept final
    {
        return catchAtBoundary(getPluginName(), "clone", static_cast<nvinfer1::IPluginV3*>(nullptr),
            [&]() -> nvinfer1::IPluginV3* { return std::make_unique<Derived>(derived()).release(); });
    }

    // IPluginV3OneBuild
    int32_t getNbOutputs() const noexcept override
    {
        return 1;
    }
    int32_t getOutputDataTypes(nvinfer1::DataType* outputTypes, int32_t nbOutputs, nvinfer1::DataType const* inputTypes,
        int32_t nbInputs) const noexcept final
    {
        return catchAtBoundary(getPluginName(), "getOutputDataTypes", kPLUGIN_ERROR, [&] {
            Derived::checkCounts(nbInputs, nbOutputs);
            require(outputTypes != nullptr && inputTypes != nullptr, "null type arrays");
            derived().outputDataTypes(outputTypes, inputTypes, nbInputs);
            return 0;
        });
    }
    bool supportsFormatCombination(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut, int32_t nbInputs,
        int32_t nbOutputs) noexcept final
    {
        return catchAtBoundary(getPluginName(), "supportsFormatCombination", false, [&] {
            Derived::checkCounts(nbInputs, nbOutputs);
            require(inOut != nullptr, "null tensor descriptions");
            require(pos >= 0 && pos < nbInputs + nbOutputs,
                "position " + std::to_string(pos) + " is out of range, expected [0, "
                    + std::to_string(nbInputs + nbOutputs) + ")");
            return derived().supportsFormat(pos, inOut);
        });
    }
    int32_t configurePlugin(nvinfer1::DynamicPluginTensorDesc const* in, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* out, int32_t nbOutputs) noexcept final
    {
        return catchAtBoundary(getPluginName(), "configurePlugin", kPLUGIN_ERROR, [&] {
            require(in != nullptr && out != nullptr, "null tensor descriptions");
            Derived::checkCounts(nbInputs, nbOutputs);
            std::vector<nvinfer1::PluginTensorDesc> const inputs = buildTimeDescs(in, nbInputs);
            std::vector<nvinfer1::PluginTensorDesc> const outputs = buildTimeDescs(out, nbOutputs);
            derived().configure(inputs.data(), nbInputs, outputs.data());
            return 0;
        });
    }
    int32_t getOutputShapes(nvinfer1::DimsExprs const* inputs, int32_t nbInputs,
        nvinfer1::DimsExprs const* /* shapeInputs */, int32_t nbShapeInputs, nvinfer1::DimsExprs* outputs,
        int32_t nbOutputs, nvinfer1::IExprBuilder& exprBuilder) noexcept final
    {
        return catchAtBoundary(getPluginName(), "getOutputShapes", kPLUGIN_ERROR, [&] {
            Derived::checkCounts(nbInputs, nbOutputs);
            require(nbShapeInputs == 0, "expected no shape inputs, got " + std::to_string(nbShapeInputs));
            require(inputs != nullptr && outputs != nullptr, "null shape arrays");
            derived().outputShapes(inputs, nbInputs, outputs, exprBuilder);
            return 0;
        });
    }
    size_t getWorkspaceSize(nvinfer1::DynamicPluginTensorDesc const* inputs, int32_t nbInputs,
        nvinfer1::DynamicPluginTensorDesc const* /* outputs */, int32_t nbOutputs) const noexcept final
    {
        return catchAtBoundary(getPluginName(), "getWorkspaceSize", size_t{0}, [&] {
            Derived::checkCounts(nbInputs, nbOutputs);
            require(inputs != nullptr, "null tensor descriptions");
            return derived().workspaceSize(inputs);
        });
    }
    //! True for the data types the kernels compute (accumulating in float32): kFLOAT, kHALF, kBF16.
    static bool isFloatType(nvinfer1::DataType type) noexcept
    {
        return type == nvinfer1::DataType::kFLOAT || type == nvinfer1::DataType::kHALF
            || type == nvinfer1::DataType::kBF16;
    }

    char const* getTimingCacheID() noexcept override
    {
        return mDescription.c_str();
    }
    char const* getMetadataString() noexcept override
    {
        return mDescription.c_str();
    }

    // IPluginV3OneRuntime
    int32_t onShapeChange(nvinfer1::PluginTensorDesc const* in, int32_t nbInputs, nvinfer1::PluginTensorDesc const* out,
        int32_t nbOutputs) noexcept final
    {
        return catchAtBoundary(getPluginName(), "onShapeChange", kPLUGIN_ERROR, [&] {
            require(in != nullptr && out != nullptr, "null tensor descriptions");
            Derived::checkCounts(nbInputs, nbOutputs);
            derived().configure(in, nbInputs, out);
            derived().shapesChanged(in, nbInputs, out);
            return 0;
        });
    }
    int32_t enqueue(nvinfer1::PluginTensorDesc const* inputDesc, nvinfer1::PluginTensorDesc const* outputDesc,
        void const* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) noexcept final
    {
        return catchAtBoundary(getPluginName(), "enqueue", kPLUGIN_ERROR, [&] {
            require(inputDesc != nullptr && outputDesc != nullptr && inputs != nullptr && outputs != nullptr,
                "null tensor descriptions or buffers");
            derived().run(inputDesc, outputDesc, inputs, outputs, workspace, stream);
            return 0;
        });
    }
    //! An op that keeps per-context resources (a library handle) replaces this.
    nvinfer1::IPluginV3* attachToContext(nvinfer1::IPluginResourceContext* /* context */) noexcept override
    {
        // No per-context resources: each execution context gets its own independent copy.
        return clone();
    }
    nvinfer1::PluginFieldCollection const* getFieldsToSerialize() noexcept final
    {
        return catchAtBoundary(getPluginName(), "getFieldsToSerialize",
            static_cast<nvinfer1::PluginFieldCollection const*>(nullptr), [&] {
                mFieldsToSerialize.clear();
                derived().addFieldsToSerialize(mFieldsToSerialize);
                mFieldCollection.nbFields = static_cast<int32_t>(mFieldsToSerialize.size());
                mFieldCollection.fields = mFieldsToSerialize.data();
                return static_cast<nvinfer1::PluginFieldCollection const*>(&mFieldCollection);
            });
    }

protected:
    //! `description` ("axis=-1;eps=1e-12"): the timing-cache ID and metadata, from the creation state only.
    PluginV3Base(char const* name, char const* version, std::string pluginNamespace, std::string description)
        : PluginCoreBase(name, version, std::move(pluginNamespace))
        , mDescription(std::move(description))
    {
    }
    PluginV3Base(PluginV3Base const& other)
        : nvinfer1::IPluginV3(other)
        , PluginCoreBase(other)
        , nvinfer1::IPluginV3OneBuild(other)
        , nvinfer1::IPluginV3OneRuntime(other)
        , mDescription(other.mDescription)
    {
        // mFieldsToSerialize points into the object it belongs to: rebuilt on demand, never copied.
    }

    // The defaults Derived may replace (see the class comment).
    void shapesChanged(nvinfer1::PluginTensorDesc const* /* in */, int32_t /* nbInputs */,
        nvinfer1::PluginTensorDesc const* /* out */) const
    {
    }
    size_t workspaceSize(nvinfer1::DynamicPluginTensorDesc const* /* inputs */) const
    {
        return 0;
    }
    void outputDataTypes(nvinfer1::DataType* outputTypes, nvinfer1::DataType const* inputTypes, int32_t nbInputs) const
    {
        require(isFloatType(inputTypes[0]),
            std::string(Derived::inputName(0)) + " has type " + dataTypeName(inputTypes[0])
                + ", expected kFLOAT, kHALF or kBF16 (cast the inputs first)");
        for (int32_t i = 1; i < nbInputs; ++i)
        {
            require(inputTypes[i] == inputTypes[0],
                std::string(Derived::inputName(i)) + " has type " + dataTypeName(inputTypes[i])
                    + ", expected the input's type " + dataTypeName(inputTypes[0]) + " (cast it)");
        }
        outputTypes[0] = inputTypes[0];
    }
    bool supportsFormat(int32_t pos, nvinfer1::DynamicPluginTensorDesc const* inOut) const
    {
        nvinfer1::PluginTensorDesc const& desc = inOut[pos].desc;
        if (desc.format != nvinfer1::TensorFormat::kLINEAR || !isFloatType(desc.type))
        {
            return false;
        }
        // Every later position is asked with the earlier ones already chosen: all must be position 0's type.
        return pos == 0 || desc.type == inOut[0].desc.type;
    }

    std::string const mDescription;

private:
    Derived& derived() noexcept
    {
        return static_cast<Derived&>(*this);
    }
    Derived const& derived() const noexcept
    {
        return static_cast<Derived const&>(*this);
    }
    //! The PluginTensorDesc part of each of `count` build-time descriptions.
    static std::vector<nvinfer1::PluginTensorDesc> buildTimeDescs(
        nvinfer1::DynamicPluginTensorDesc const* descs, int32_t count)
    {
        std::vector<nvinfer1::PluginTensorDesc> result;
        for (int32_t i = 0; i < count; ++i)
        {
            result.push_back(descs[i].desc);
        }
        return result;
    }

    std::vector<nvinfer1::PluginField> mFieldsToSerialize;
    nvinfer1::PluginFieldCollection mFieldCollection{};
};

//! A creator's name, version, namespace and advertised fields (getFieldNames), and createPlugin's handling of the
//! collection: checks, the fields every op ignores, warnings about unknown fields, exceptions caught and logged.
class PluginCreatorBase : public PluginIdentity<nvinfer1::IPluginCreatorV3One>
{
public:
    //! pluginNamespace nullptr: "".
    PluginCreatorBase(char const* name, char const* version, char const* pluginNamespace,
        std::vector<nvinfer1::PluginField> fieldNames);
    PluginCreatorBase(PluginCreatorBase const&) = delete;
    PluginCreatorBase& operator=(PluginCreatorBase const&) = delete;

    nvinfer1::PluginFieldCollection const* getFieldNames() noexcept override
    {
        return &mFieldCollection;
    }

    //! The plugin createFromFields makes; nullptr, with the reason logged, when it throws.
    nvinfer1::IPluginV3* createPlugin(
        char const* name, nvinfer1::PluginFieldCollection const* fc, nvinfer1::TensorRTPhase phase) noexcept final;

protected:
    //! Reads what it needs of `fc` (see readFields) and makes the plugin; throws PluginError on a bad field.
    virtual std::unique_ptr<nvinfer1::IPluginV3> createFromFields(nvinfer1::PluginFieldCollection const* fc) = 0;

    //! Passes each field of `fc`, in order, to `read` (with its name), which returns false for a name it does not
    //! know. Skips `plugin_version` and `plugin_namespace` (the ONNX node carries them for the parser; not
    //! attributes) and warns about, then ignores, an unknown field. Throws PluginError for no collection ("expected
    //! fields <expectedFields>"), a malformed one or a field without a name.
    void readFields(nvinfer1::PluginFieldCollection const* fc, char const* expectedFields,
        std::function<bool(nvinfer1::PluginField const& field, std::string const& name)> const& read) const;

private:
    std::vector<nvinfer1::PluginField> mFieldNames;
    nvinfer1::PluginFieldCollection mFieldCollection{};
};

} // namespace plugins
} // namespace torchtrt_ext
