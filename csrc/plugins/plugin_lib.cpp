// Entry points of libtorchtrt_ext_plugins.so, the only symbols it exports besides the kernel launchers:
//
//   getCreators / setLoggerFinder   what IPluginRegistry::loadLibrary, Python's registry.load_library and trtexec
//                                   (--dynamicPlugins, --staticPlugins) look up; creators use namespace "torchtrt_ext"
//   torchtrt_ext_register_plugins   explicit registration into a registry under a namespace of the caller's choice,
//                                   for C++ applications that link the library
#include "NvInferRuntime.h"
#include "plugins/common/logging.h"
#include "plugins/common/plugin_base.h"
#include "plugins/deform_conv2d/deform_conv2d_plugin.h"
#include "plugins/efficient_nms/efficient_nms_plugin.h"
#include "plugins/l2norm/l2norm_plugin.h"

#include <deque>
#include <memory>
#include <mutex>
#include <string>

#define TORCHTRT_EXT_PLUGIN_API __attribute__((visibility("default")))

namespace
{
using torchtrt_ext::plugins::DeformConv2dPluginCreator;
using torchtrt_ext::plugins::EfficientNmsPluginCreator;
using torchtrt_ext::plugins::L2NormPluginCreator;

//! One creator per op, all for one namespace; the list getCreators returns and registration walks.
struct Creators
{
    explicit Creators(char const* pluginNamespace)
        : l2norm(pluginNamespace)
        , deformConv2d(pluginNamespace)
        , efficientNms(pluginNamespace)
        , all{&l2norm, &deformConv2d, &efficientNms}
    {
    }
    Creators(Creators const&) = delete;
    Creators& operator=(Creators const&) = delete;

    L2NormPluginCreator l2norm;
    DeformConv2dPluginCreator deformConv2d;
    EfficientNmsPluginCreator efficientNms;
    nvinfer1::IPluginCreatorV3One* const all[3];
};

//! Creators made for other namespaces by torchtrt_ext_register_plugins. A registry keeps only pointers, so they live
//! until the library is unloaded; one set of creators per namespace, however often registration is called.
class CreatorStore
{
public:
    Creators& forNamespace(std::string const& pluginNamespace)
    {
        std::lock_guard<std::mutex> lock(mMutex);
        for (auto const& creators : mCreators)
        {
            if (pluginNamespace == creators->l2norm.getPluginNamespace())
            {
                return *creators;
            }
        }
        mCreators.push_back(std::make_unique<Creators>(pluginNamespace.c_str()));
        return *mCreators.back();
    }

private:
    std::mutex mMutex;
    std::deque<std::unique_ptr<Creators>> mCreators;
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
        static L2NormPluginCreator sL2NormCreator{torchtrt_ext::plugins::kDEFAULT_NAMESPACE};
        static DeformConv2dPluginCreator sDeformConv2dCreator{torchtrt_ext::plugins::kDEFAULT_NAMESPACE};
        static EfficientNmsPluginCreator sEfficientNmsCreator{torchtrt_ext::plugins::kDEFAULT_NAMESPACE};
        static nvinfer1::IPluginCreatorInterface* const kCREATORS[]
            = {&sL2NormCreator, &sDeformConv2dCreator, &sEfficientNmsCreator};
        nbCreators = static_cast<int32_t>(sizeof(kCREATORS) / sizeof(kCREATORS[0]));
        return kCREATORS;
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
        for (nvinfer1::IPluginCreatorV3One* creator : creatorStore().forNamespace(ns).all)
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
