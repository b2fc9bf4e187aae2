// A stand-in for TensorRT's plugin registry, shared by the test programs of tests/plugins (harness_l2norm.cpp,
// autoload_check.cpp): it keeps (creator, namespace) pairs and refuses a second creator of the same name, version and
// namespace, as TensorRT's registry does.
#pragma once

#include "NvInferRuntime.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace test_doubles
{
using namespace nvinfer1;

//! Keeps (creator, namespace) pairs, as TensorRT's registry does.
class TestRegistry final : public IPluginRegistry
{
public:
    ~TestRegistry() noexcept override = default;
    void setErrorRecorder(IErrorRecorder* const) noexcept override {}
    IErrorRecorder* getErrorRecorder() const noexcept override
    {
        return nullptr;
    }
    bool isParentSearchEnabled() const override
    {
        return false;
    }
    void setParentSearchEnabled(bool const) override {}
    PluginLibraryHandle loadLibrary(AsciiChar const*) noexcept override
    {
        return nullptr;
    }
    void deregisterLibrary(PluginLibraryHandle) noexcept override {}
    bool registerCreator(IPluginCreatorInterface& creator, AsciiChar const* const pluginNamespace) noexcept override
    {
        auto* v3 = asV3(&creator);
        if (v3 == nullptr || getCreator(v3->getPluginName(), v3->getPluginVersion(), pluginNamespace) != nullptr)
        {
            return false;
        }
        mEntries.push_back({&creator, pluginNamespace != nullptr ? pluginNamespace : ""});
        mAll.push_back(&creator);
        ++registerCalls;
        return true;
    }
    IPluginCreatorInterface* const* getAllCreators(int32_t* const numCreators) const noexcept override
    {
        *numCreators = static_cast<int32_t>(mAll.size());
        return mAll.data();
    }
    IPluginCreatorInterface* getCreator(AsciiChar const* const name, AsciiChar const* const version,
        AsciiChar const* const pluginNamespace = "") noexcept override
    {
        for (auto const& entry : mEntries)
        {
            auto* v3 = asV3(entry.first);
            if (std::strcmp(v3->getPluginName(), name) == 0 && std::strcmp(v3->getPluginVersion(), version) == 0
                && entry.second == (pluginNamespace != nullptr ? pluginNamespace : ""))
            {
                return entry.first;
            }
        }
        return nullptr;
    }
    bool deregisterCreator(IPluginCreatorInterface const&) noexcept override
    {
        return false;
    }
    IPluginResource* acquirePluginResource(AsciiChar const*, IPluginResource*) noexcept override
    {
        return nullptr;
    }
    int32_t releasePluginResource(AsciiChar const*) noexcept override
    {
        return -1;
    }
    IPluginCreatorInterface* const* getAllCreatorsRecursive(int32_t* const numCreators) noexcept override
    {
        return getAllCreators(numCreators);
    }

    static IPluginCreatorV3One* asV3(IPluginCreatorInterface* creator)
    {
        if (creator == nullptr || std::strcmp(creator->getInterfaceInfo().kind, "PLUGIN CREATOR_V3ONE") != 0)
        {
            return nullptr;
        }
        return static_cast<IPluginCreatorV3One*>(creator);
    }

    int32_t registerCalls{0};
    std::vector<std::pair<IPluginCreatorInterface*, std::string>> mEntries;

private:
    std::vector<IPluginCreatorInterface*> mAll;
};

} // namespace test_doubles
