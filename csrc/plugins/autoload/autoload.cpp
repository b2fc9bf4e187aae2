// libtorchtrt_ext_plugins_autoload.so: registers the creators of libtorchtrt_ext_plugins.so when it is merely loaded.
//
// Some loaders only dlopen a plugin library and expect it to register its creators by itself: Triton's TensorRT
// backend (--backend-config=tensorrt,plugins=<lib>) and ONNX Runtime's TensorRT EP (trt_extra_plugin_lib_paths, which
// then lists the registry's creators). libtorchtrt_ext_plugins.so cannot do that: it is loaded through getCreators by
// IPluginRegistry::loadLibrary, registry.load_library and trtexec, which would then see every creator twice. So this
// second library, linked against it (found beside it through RUNPATH $ORIGIN), does the registration in a static
// initializer, through torchtrt_ext_register_plugins and namespace "torchtrt_ext".
//
// TensorRT's registry is found without linking libnvinfer (whose soname depends on the TensorRT version):
//   1. the weak reference getPluginRegistry, bound when libnvinfer is in the global scope (an application linking
//      TensorRT, a library loaded RTLD_GLOBAL);
//   2. dlopen(libnvinfer.so.N, RTLD_NOLOAD): libnvinfer already loaded in a local scope, as in Triton's backend and
//      ONNX Runtime's provider, which dlopen their plugin libraries with RTLD_LOCAL. RTLD_NOLOAD never loads it.
// When neither finds a registry (preloaded with LD_PRELOAD before TensorRT is loaded, or no TensorRT in the process)
// the library registers nothing and says so on stderr, with the remedy. It never crashes the loading process.
//
// It also exports getCreators (an empty list) and setLoggerFinder (forwarded to the plugin library), so handing this
// library to IPluginRegistry::loadLibrary or trtexec --dynamicPlugins by mistake does not register the creators twice.
#include "NvInferRuntime.h"
#include "plugins/common/logging.h"

#include <dlfcn.h>

#include <cstdint>
#include <string>

#define TORCHTRT_EXT_PLUGIN_API __attribute__((visibility("default")))

// The registration entry point of libtorchtrt_ext_plugins.so (plugin_lib.cpp), resolved through the link against it.
extern "C" bool torchtrt_ext_register_plugins(nvinfer1::IPluginRegistry* registry, char const* pluginNamespace) noexcept;

// TensorRT's registry, declared weak: null unless a libnvinfer (or a test's stand-in) is visible in the global scope.
extern "C" nvinfer1::IPluginRegistry* getPluginRegistry() noexcept __attribute__((weak));

namespace
{
using torchtrt_ext::plugins::log;
using Severity = nvinfer1::ILogger::Severity;
using GetPluginRegistryFn = nvinfer1::IPluginRegistry* (*) () noexcept;

#define TORCHTRT_EXT_STRINGIFY_IMPL(x) #x
#define TORCHTRT_EXT_STRINGIFY(x) TORCHTRT_EXT_STRINGIFY_IMPL(x)

//! Sonames of TensorRT's runtime library, the one the headers were built with first.
constexpr char const* kNVINFER_SONAMES[]
    = {"libnvinfer.so." TORCHTRT_EXT_STRINGIFY(NV_TENSORRT_MAJOR), "libnvinfer.so.10", "libnvinfer.so.11", "libnvinfer.so"};

constexpr char const* kREMEDY
    = "This library must be loaded after TensorRT by a loader that dlopens it: Triton "
      "--backend-config=tensorrt,plugins=<path>/libtorchtrt_ext_plugins_autoload.so (not LD_PRELOAD, which loads it "
      "before libnvinfer), or ONNX Runtime's TensorRT EP option trt_extra_plugin_lib_paths. Where you call TensorRT "
      "yourself, load libtorchtrt_ext_plugins.so with IPluginRegistry::loadLibrary or trtexec --staticPlugins instead.";

//! TensorRT's plugin registry, or nullptr; `source` says where it came from (or what was tried).
nvinfer1::IPluginRegistry* findRegistry(std::string& source) noexcept
{
    if (getPluginRegistry != nullptr)
    {
        if (nvinfer1::IPluginRegistry* registry = getPluginRegistry())
        {
            source = "getPluginRegistry (global symbol)";
            return registry;
        }
        source = "getPluginRegistry() returned null; ";
    }
    else
    {
        source = "getPluginRegistry is not a global symbol; ";
    }
    for (char const* soname : kNVINFER_SONAMES)
    {
        void* handle = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD); // kept open: our creators live in its registry
        if (handle == nullptr)
        {
            continue;
        }
        void* symbol = dlsym(handle, "getPluginRegistry");
        GetPluginRegistryFn fn = reinterpret_cast<GetPluginRegistryFn>(symbol);
        nvinfer1::IPluginRegistry* registry = fn != nullptr ? fn() : nullptr;
        if (registry != nullptr)
        {
            source = std::string("getPluginRegistry of the loaded ") + soname;
            return registry;
        }
        source += std::string(soname) + " is loaded but gives no registry; ";
        dlclose(handle);
    }
    source += "no libnvinfer.so.{10,11} is loaded in this process";
    return nullptr;
}

//! Runs once, when the dynamic loader initializes this library.
void registerOnLoad() noexcept
{
    try
    {
        std::string source;
        nvinfer1::IPluginRegistry* registry = findRegistry(source);
        if (registry == nullptr)
        {
            log(Severity::kERROR,
                "libtorchtrt_ext_plugins_autoload.so: no TensorRT plugin registry is reachable (" + source
                    + "), so the torchtrt_ext plugins were NOT registered. " + kREMEDY);
            return;
        }
        if (!torchtrt_ext_register_plugins(registry, nullptr))
        {
            log(Severity::kERROR,
                "libtorchtrt_ext_plugins_autoload.so: registering the torchtrt_ext plugins in TensorRT's registry "
                "(found through "
                    + source + ") failed; the reason is logged above");
            return;
        }
        log(Severity::kINFO,
            "libtorchtrt_ext_plugins_autoload.so: torchtrt_ext plugins registered in namespace torchtrt_ext (registry "
            "found through "
                + source + ")");
    }
    catch (...)
    {
        torchtrt_ext::plugins::logCaught("libtorchtrt_ext_plugins_autoload.so");
    }
}

//! The static initializer: constructed when the library is loaded, before dlopen returns.
struct RegisterOnLoad
{
    RegisterOnLoad() noexcept
    {
        registerOnLoad();
    }
};
RegisterOnLoad const gRegisterOnLoad;
} // namespace

//! An empty creator list: the creators are registered at load time already; listing them here too would make
//! IPluginRegistry::loadLibrary register each one a second time.
extern "C" TORCHTRT_EXT_PLUGIN_API nvinfer1::IPluginCreatorInterface* const* getCreators(int32_t& nbCreators) noexcept
{
    static nvinfer1::IPluginCreatorInterface* const kNONE[1] = {nullptr};
    nbCreators = 0;
    return kNONE;
}

//! Forwarded to libtorchtrt_ext_plugins.so, whose plugins then log through TensorRT's logger. Its setLoggerFinder has
//! the same name as this one, so it is looked up in that library (found from the address of its registration
//! function), never through the symbol name, which would resolve to this function.
extern "C" TORCHTRT_EXT_PLUGIN_API void setLoggerFinder(nvinfer1::ILoggerFinder* finder) noexcept
{
    torchtrt_ext::plugins::setLoggerFinder(finder);
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&torchtrt_ext_register_plugins), &info) == 0 || info.dli_fname == nullptr)
    {
        return;
    }
    void* handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr)
    {
        return;
    }
    using SetLoggerFinderFn = void (*)(nvinfer1::ILoggerFinder*) noexcept;
    auto forward = reinterpret_cast<SetLoggerFinderFn>(dlsym(handle, "setLoggerFinder"));
    if (forward != nullptr && forward != &setLoggerFinder)
    {
        forward(finder);
    }
    dlclose(handle); // only drops the reference taken above: the plugin library stays loaded as our dependency
}
