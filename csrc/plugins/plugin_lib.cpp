// Entry points of libtorchtrt_ext_plugins.so, the only symbols it exports besides the kernel launchers:
//
//   getCreators / setLoggerFinder   what IPluginRegistry::loadLibrary, Python's registry.load_library and trtexec
//                                   (--dynamicPlugins, --staticPlugins) look up; creators use namespace "torchtrt_ext"
//   torchtrt_ext_register_plugins   explicit registration into a registry under a namespace of the caller's choice,
//                                   for C++ applications that link the library
#include "NvInferRuntime.h"
#include "plugins/common/logging.h"
#include "plugins/common/plugin_base.h"
#include "plugins/creator_table.h"

#include <deque>
#include <memory>
#include <mutex>
#include <string>

#define TORCHTRT_EXT_PLUGIN_API __attribute__((visibility("default")))

namespace
{
using torchtrt_ext::plugins::CreatorTable;

//! Creator tables made for other namespaces by torchtrt_ext_register_plugins. A registry keeps only pointers, so they
//! live until the library is unloaded; one table per namespace, however often registration is called.
class CreatorStore
{
public:
    CreatorTable& forNamespace(std::string const& pluginNamespace)
    {
        std::lock_guard<std::mutex> lock(mMutex);
        for (auto const& table : mTables)
        {
            if (pluginNamespace == table.first)
            {
                return *table.second;
            }
        }
        mTables.emplace_back(pluginNamespace, nullptr);
        mTables.back().second = std::make_unique<CreatorTable>(mTables.back().first.c_str());
        return *mTables.back().second;
    }

private:
    std::mutex mMutex;
    std::deque<std::pair<std::string, std::unique_ptr<CreatorTable>>> mTables;
};

CreatorStore& creatorStore()
{
    static CreatorStore sStore;
    return sStore;
}
} // namespace

extern "C" TORCHTRT_EXT_PLUGIN_API nvinfer1::IPluginCreatorInterface* const* getCreators(int32_t& nbCreators) noexcept
{
    nbCreators = 0;
    try
    {
        static CreatorTable const sTable{torchtrt_ext::plugins::kDEFAULT_NAMESPACE};
        nbCreators = torchtrt_ext::plugins::kNB_CREATORS;
        return sTable.interfaces();
    }
    catch (...)
    {
        torchtrt_ext::plugins::logCaught("getCreators");
    }
    return nullptr;
}

extern "C" TORCHTRT_EXT_PLUGIN_API void setLoggerFinder(nvinfer1::ILoggerFinder* finder) noexcept
{
    torchtrt_ext::plugins::setLoggerFinder(finder);
}

//! Register every torchtrt_ext creator in `registry` under `pluginNamespace` (nullptr: "torchtrt_ext"). Returns
//! true when each one is registered afterwards (a creator of the same name, version and namespace already there
//! counts as registered); false, with the reason logged, otherwise.
extern "C" TORCHTRT_EXT_PLUGIN_API bool torchtrt_ext_register_plugins(
    nvinfer1::IPluginRegistry* registry, char const* pluginNamespace) noexcept
{
    try
    {
        torchtrt_ext::plugins::require(registry != nullptr, "no plugin registry given");
        std::string const ns = pluginNamespace != nullptr ? pluginNamespace : torchtrt_ext::plugins::kDEFAULT_NAMESPACE;
        for (nvinfer1::IPluginCreatorV3One* creator : creatorStore().forNamespace(ns).creators())
        {
            if (registry->getCreator(creator->getPluginName(), creator->getPluginVersion(), ns.c_str()) != nullptr)
            {
                continue; // already there: counts as registered
            }
            torchtrt_ext::plugins::require(registry->registerCreator(*creator, ns.c_str()),
                std::string("the registry refused creator ") + creator->getPluginName() + " version "
                    + creator->getPluginVersion() + " in namespace '" + ns + "'");
        }
        return true;
    }
    catch (...)
    {
        torchtrt_ext::plugins::logCaught("torchtrt_ext_register_plugins");
    }
    return false;
}
