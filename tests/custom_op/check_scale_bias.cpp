// The C++ side of the TestScaleBias walk-through: a plugin library built from csrc/plugins with one more line in its
// creator table, driven as TensorRT drives it (tests/plugins/test_doubles.h): `check_scale_bias LIBRARY cpu`.
#include "NvInferRuntime.h"
#include "plugins/creator_table.h"
#include "test_doubles.h"
#include "test_registry.h"

#include <cstdint>
#include <cstring>
#include <string>

using namespace test_doubles;

namespace
{
int32_t cpu(Library const& lib, TestLogger& /* logger */, TestLoggerFinder& /* finder */)
{
    Checker c;
    int32_t n = -1;
    c.check(lib.getCreators(n) != nullptr && n == torchtrt_ext::plugins::kNB_CREATORS,
        "getCreators lists the table with the added line", "n=" + std::to_string(n));
    c.check(findCreator(lib, "L2Norm") != nullptr && findCreator(lib, "DeformConv2d") != nullptr,
        "the library's own creators are still listed");
    IPluginCreatorV3One* creator = findCreator(lib, "TestScaleBias");
    if (!c.check(creator != nullptr, "getCreators holds TestScaleBias version 1 in namespace torchtrt_ext"))
    {
        return c.failures;
    }
    Fields fields;
    fields.add("scale", 2.5F, PluginFieldType::kFLOAT32).add("bias", -1.0F, PluginFieldType::kFLOAT32);
    PluginPtr plugin = create(creator, fields);
    if (!c.check(plugin != nullptr, "createPlugin from the fields the ONNX node carries"))
    {
        return c.failures;
    }
    TestExprBuilder eb;
    DimsExprs in;
    in.nbDims = 2;
    in.d[0] = eb.symbol("N");
    in.d[1] = eb.constant(7);
    DimsExprs out;
    c.check(build(plugin.get())->getOutputShapes(&in, 1, nullptr, 0, &out, 1, eb) == 0 && out.nbDims == 2
            && TestExprBuilder::equivalent(out.d[0], in.d[0]) && TestExprBuilder::equivalent(out.d[1], in.d[1]),
        "getOutputShapes gives the input's shape, dynamic dims included");
    DynamicPluginTensorDesc io[2] = {dynDesc({-1, 7}, DataType::kFLOAT), dynDesc({-1, 7}, DataType::kFLOAT)};
    c.check(build(plugin.get())->supportsFormatCombination(0, io, 1, 1), "float32 LINEAR is supported");
    io[0] = dynDesc({-1, 7}, DataType::kHALF);
    c.check(!build(plugin.get())->supportsFormatCombination(0, io, 1, 1), "float16 is refused (float32 kernel)");
    PluginFieldCollection const* saved = runtime(plugin.get())->getFieldsToSerialize();
    PluginPtr again(saved != nullptr ? creator->createPlugin("TestScaleBias", saved, TensorRTPhase::kRUNTIME) : nullptr);
    c.check(again != nullptr
            && std::strcmp(build(again.get())->getTimingCacheID(), build(plugin.get())->getTimingCacheID()) == 0,
        "the serialized fields make the same plugin", again != nullptr ? build(again.get())->getTimingCacheID() : "");
    TestRegistry registry;
    c.check(lib.registerPlugins != nullptr && lib.registerPlugins(&registry, "mine")
            && registry.registerCalls == torchtrt_ext::plugins::kNB_CREATORS
            && registry.getCreator("TestScaleBias", "1", "mine") != nullptr,
        "torchtrt_ext_register_plugins registers the whole table, the added op included");
    std::printf("harness cpu: %d checks, %d failed\n", c.count, c.failures);
    return c.failures;
}
} // namespace

int main(int argc, char** argv)
{
    return harnessMain(argc, argv,
        HarnessModes{[](Library const&) { return 0; }, cpu,
            [](Library const&, TestLogger&, std::string const&) { return 0; }});
}
