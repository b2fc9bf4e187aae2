// Checks libtorchtrt_ext_plugins_autoload.so the way Triton's TensorRT backend and ONNX Runtime's TensorRT EP load it:
// a plain dlopen, after which the creators must be in TensorRT's registry. No TensorRT library: this program defines
// getPluginRegistry itself, returning the stand-in registry of test_registry.h
// (through test_doubles.h, which also gives the check reporter and logger finder).
//
//   autoload_check AUTOLOAD PLUGINS registry       built with -rdynamic, so getPluginRegistry is a global symbol the
//                                                  library's weak reference binds to: each creator (L2Norm, DeformConv2d) registered once
//   autoload_check AUTOLOAD PLUGINS nullregistry   the same binary, getPluginRegistry returning null
//   autoload_check AUTOLOAD PLUGINS noregistry     built without -rdynamic: no registry reachable (as when preloaded
//                                                  before libnvinfer); the load must succeed and log the remedy
//   autoload_check AUTOLOAD PLUGINS localnvinfer FAKE
//                                                  built without -rdynamic; FAKE, this file built as a shared library
//                                                  with -DAUTOLOAD_CHECK_FAKE_NVINFER and soname libnvinfer.so.10, is
//                                                  loaded RTLD_LOCAL first, as Triton's backend and ONNX Runtime's
//                                                  provider have libnvinfer: registered once through RTLD_NOLOAD
//
// PLUGINS is the libtorchtrt_ext_plugins.so the autoload library finds beside it. Each check prints "ok   <name>" or
// "FAIL <name>: <detail>", then "autoload <mode>: <n> checks, <f> failed"; the exit status is the number of failures.
#include "NvInferRuntime.h"

#ifdef AUTOLOAD_CHECK_FAKE_NVINFER
// The stand-in libnvinfer: getPluginRegistry returns whatever the test program set.
namespace
{
nvinfer1::IPluginRegistry* gFakeRegistry = nullptr;
}
extern "C" __attribute__((visibility("default"))) void fake_nvinfer_set_registry(nvinfer1::IPluginRegistry* r) noexcept
{
    gFakeRegistry = r;
}
extern "C" __attribute__((visibility("default"))) nvinfer1::IPluginRegistry* getPluginRegistry() noexcept
{
    return gFakeRegistry;
}
#else
#include "test_doubles.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace nvinfer1;
using namespace test_doubles;

namespace
{
TestRegistry gRegistry;
bool gNullRegistry = false;

class RecordingLogger : public ILogger
{
public:
    void log(Severity severity, AsciiChar const* msg) noexcept override
    {
        if (severity <= Severity::kWARNING)
        {
            mText += std::string(msg != nullptr ? msg : "") + "\n";
        }
    }
    std::string mText;
};

//! Creators of libtorchtrt_ext_plugins.so: L2Norm, DeformConv2d and EfficientNMS_TRT.
constexpr int32_t kNB_CREATORS = 3;

std::string registryContents()
{
    std::string text;
    for (auto const& entry : gRegistry.mEntries)
    {
        IPluginCreatorV3One* c = TestRegistry::asV3(entry.first);
        text += c != nullptr ? std::string(c->getPluginName()) + " " + c->getPluginVersion() + " " + entry.second
                             : std::string("<not a V3 creator>");
        text += "; ";
    }
    return text.empty() ? "<empty>" : text;
}

int32_t withRegistry(Checker& c, char const* autoloadPath, char const* pluginsPath)
{
    // The plugin library alone registers nothing: it has no static initializer (loadLibrary would see doubles).
    void* plugins = dlopen(pluginsPath, RTLD_NOW | RTLD_LOCAL);
    c.check(plugins != nullptr, "dlopen libtorchtrt_ext_plugins.so", plugins == nullptr ? dlerror() : "");
    c.check(gRegistry.registerCalls == 0, "loading libtorchtrt_ext_plugins.so registers nothing by itself",
        registryContents());

    void* autoload = dlopen(autoloadPath, RTLD_NOW | RTLD_LOCAL);
    if (!c.check(autoload != nullptr, "dlopen libtorchtrt_ext_plugins_autoload.so", autoload == nullptr ? dlerror() : ""))
    {
        return c.failures;
    }
    int32_t n = -1;
    gRegistry.getAllCreators(&n);
    c.check(gRegistry.registerCalls == kNB_CREATORS && n == kNB_CREATORS,
        "the load registered each creator exactly once (L2Norm, DeformConv2d)", registryContents());
    c.check(gRegistry.getCreator("DeformConv2d", "1", "torchtrt_ext") != nullptr,
        "registry holds DeformConv2d version 1 in namespace torchtrt_ext", registryContents());
    IPluginCreatorV3One* creator = TestRegistry::asV3(gRegistry.getCreator("L2Norm", "1", "torchtrt_ext"));
    c.check(creator != nullptr && std::strcmp(creator->getPluginName(), "L2Norm") == 0
            && std::strcmp(creator->getPluginVersion(), "1") == 0
            && std::strcmp(creator->getPluginNamespace(), "torchtrt_ext") == 0,
        "registry holds L2Norm version 1 in namespace torchtrt_ext (IPluginCreatorV3One)", registryContents());
    if (creator != nullptr)
    {
        int32_t axis = 1;
        float eps = 1e-6F;
        std::vector<PluginField> fields{PluginField("axis", &axis, PluginFieldType::kINT32, 1),
            PluginField("eps", &eps, PluginFieldType::kFLOAT32, 1)};
        PluginFieldCollection collection{static_cast<int32_t>(fields.size()), fields.data()};
        IPluginV3* plugin = creator->createPlugin("L2Norm", &collection, TensorRTPhase::kRUNTIME);
        c.check(plugin != nullptr, "the registered creator makes a plugin (axis=1, eps=1e-6, kRUNTIME)");
        delete plugin;
    }

    void* again = dlopen(autoloadPath, RTLD_NOW | RTLD_LOCAL);
    c.check(again == autoload && gRegistry.registerCalls == kNB_CREATORS, "a second dlopen registers nothing more",
        registryContents());
    if (again != nullptr)
    {
        dlclose(again);
    }
    c.check(plugins != nullptr
            && dlsym(autoload, "torchtrt_ext_register_plugins") == dlsym(plugins, "torchtrt_ext_register_plugins"),
        "the autoload library uses the libtorchtrt_ext_plugins.so beside it (the one given)");

    // Handed to IPluginRegistry::loadLibrary by mistake: its own getCreators lists nothing, so no doubles.
    auto getCreators = reinterpret_cast<GetCreatorsFn>(dlsym(autoload, "getCreators"));
    int32_t nb = -1;
    IPluginCreatorInterface* const* listed = getCreators != nullptr ? getCreators(nb) : nullptr;
    c.check(getCreators != nullptr && listed != nullptr && nb == 0
            && getCreators != reinterpret_cast<GetCreatorsFn>(dlsym(plugins, "getCreators")),
        "its getCreators (what loadLibrary calls) lists no creator", "nb=" + std::to_string(nb));
    auto pluginsGetCreators = reinterpret_cast<GetCreatorsFn>(dlsym(plugins, "getCreators"));
    nb = -1;
    c.check(pluginsGetCreators != nullptr && pluginsGetCreators(nb) != nullptr && nb >= 1,
        "libtorchtrt_ext_plugins.so still lists its creators through getCreators", "nb=" + std::to_string(nb));

    // setLoggerFinder of the autoload library reaches the plugins' logger.
    auto setFinder = reinterpret_cast<SetLoggerFinderFn>(dlsym(autoload, "setLoggerFinder"));
    RecordingLogger logger;
    TestLoggerFinder finder(&logger);
    if (c.check(setFinder != nullptr, "setLoggerFinder is exported") && creator != nullptr)
    {
        setFinder(&finder);
        float eps = -1.0F;
        int32_t axis = 1;
        std::vector<PluginField> fields{PluginField("axis", &axis, PluginFieldType::kINT32, 1),
            PluginField("eps", &eps, PluginFieldType::kFLOAT32, 1)};
        PluginFieldCollection collection{static_cast<int32_t>(fields.size()), fields.data()};
        IPluginV3* plugin = creator->createPlugin("L2Norm", &collection, TensorRTPhase::kBUILD);
        c.check(plugin == nullptr && logger.mText.find("eps") != std::string::npos,
            "after setLoggerFinder through the autoload library, plugin errors reach that logger",
            logger.mText.empty() ? "<nothing logged>" : logger.mText);
        delete plugin;
        setFinder(nullptr); // the finder dies with this function
    }
    return c.failures;
}

int32_t withLocalNvinfer(Checker& c, char const* autoloadPath, char const* fakePath)
{
    void* nvinfer = dlopen(fakePath, RTLD_NOW | RTLD_LOCAL);
    if (!c.check(nvinfer != nullptr, "dlopen the stand-in libnvinfer.so.10 (RTLD_LOCAL)", nvinfer == nullptr ? dlerror() : ""))
    {
        return c.failures;
    }
    using SetFn = void (*)(IPluginRegistry*);
    auto set = reinterpret_cast<SetFn>(dlsym(nvinfer, "fake_nvinfer_set_registry"));
    c.check(set != nullptr && dlsym(RTLD_DEFAULT, "getPluginRegistry") == nullptr,
        "getPluginRegistry is not a global symbol (libnvinfer sits in a local scope)");
    if (set != nullptr)
    {
        set(&gRegistry);
    }
    void* autoload = dlopen(autoloadPath, RTLD_NOW | RTLD_LOCAL);
    c.check(autoload != nullptr, "dlopen libtorchtrt_ext_plugins_autoload.so", autoload == nullptr ? dlerror() : "");
    int32_t n = -1;
    gRegistry.getAllCreators(&n);
    c.check(gRegistry.registerCalls == kNB_CREATORS && n == kNB_CREATORS
            && gRegistry.getCreator("L2Norm", "1", "torchtrt_ext") != nullptr
            && gRegistry.getCreator("DeformConv2d", "1", "torchtrt_ext") != nullptr,
        "L2Norm 1 and DeformConv2d 1 registered exactly once in the registry of the already loaded libnvinfer.so.10",
        registryContents());
    return c.failures;
}

int32_t withoutRegistry(Checker& c, char const* autoloadPath, char const* what)
{
    void* autoload = dlopen(autoloadPath, RTLD_NOW | RTLD_LOCAL);
    c.check(autoload != nullptr, std::string("dlopen succeeds ") + what, autoload == nullptr ? dlerror() : "");
    c.check(gRegistry.registerCalls == 0, "nothing was registered", registryContents());
    std::fflush(stderr);
    return c.failures;
}
} // namespace

// TensorRT's entry point, played by this program. Exported only when it is linked with -rdynamic.
extern "C" IPluginRegistry* getPluginRegistry() noexcept
{
    return gNullRegistry ? nullptr : &gRegistry;
}

int main(int argc, char** argv)
{
    if (argc != 4 && argc != 5)
    {
        std::fprintf(stderr, "usage: %s AUTOLOAD PLUGINS {registry|nullregistry|noregistry|localnvinfer FAKE}\n", argv[0]);
        return 2;
    }
    std::string const mode = argv[3];
    Checker c;
    if (mode == "registry")
    {
        withRegistry(c, argv[1], argv[2]);
    }
    else if (mode == "nullregistry")
    {
        gNullRegistry = true;
        withoutRegistry(c, argv[1], "when getPluginRegistry() returns null");
    }
    else if (mode == "localnvinfer" && argc == 5)
    {
        withLocalNvinfer(c, argv[1], argv[4]);
    }
    else if (mode == "noregistry")
    {
        withoutRegistry(c, argv[1], "without a reachable registry");
    }
    else
    {
        std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
        return 2;
    }
    std::printf("autoload %s: %d checks, %d failed\n", mode.c_str(), c.count, c.failures);
    return c.failures < 100 ? c.failures : 100;
}
#endif // AUTOLOAD_CHECK_FAKE_NVINFER
