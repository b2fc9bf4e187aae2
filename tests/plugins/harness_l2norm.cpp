// Conformance harness for libtorchtrt_ext_plugins.so: drives the plugins the way TensorRT does, with no TensorRT
// library. Only TensorRT's public headers are used; the objects TensorRT would provide (logger finder, expression
// builder, resource context, plugin registry) are the test doubles of test_doubles.h.
//
//   harness LIB fields             print the L2Norm creator's advertised fields ("field <name> <type> <length>")
//   harness LIB cpu                every check that needs no GPU
//   harness LIB gpu [--dump DIR]   enqueue on real device buffers for float32/float16/bfloat16 against a CPU
//                                  reference; --dump writes inputs and outputs for a comparison with ops.l2norm
//
// Each check prints "ok   <name>" or "FAIL <name>: <detail>"; the exit status is the number of failures (capped).
#include "NvInferRuntime.h"
#include "plugins/creator_table.h"
#include "test_doubles.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

using namespace nvinfer1;
using namespace test_doubles;

namespace
{
constexpr char const* kNAME = "L2Norm";

// ------------------------------------------------------------------------------------------------ helpers
Fields l2normFields(int32_t axis, float eps)
{
    Fields f;
    f.add("axis", axis, PluginFieldType::kINT32).add("eps", eps, PluginFieldType::kFLOAT32);
    return f;
}

//! "axis=1 (kINT32) eps=1e-06 (kFLOAT32)" for the fields of a collection, or "<null>".
std::string describeFields(PluginFieldCollection const* fc)
{
    if (fc == nullptr)
    {
        return "<null>";
    }
    std::string text;
    for (int32_t i = 0; i < fc->nbFields; ++i)
    {
        PluginField const& f = fc->fields[i];
        char value[64] = "?";
        if (f.data != nullptr && f.length == 1 && f.type == PluginFieldType::kINT32)
        {
            std::snprintf(value, sizeof(value), "%d", *static_cast<int32_t const*>(f.data));
        }
        else if (f.data != nullptr && f.length == 1 && f.type == PluginFieldType::kFLOAT32)
        {
            std::snprintf(value, sizeof(value), "%.9g", static_cast<double>(*static_cast<float const*>(f.data)));
        }
        text += std::string(f.name != nullptr ? f.name : "<null>") + "=" + value + " (" + fieldTypeName(f.type) + ") ";
    }
    return text;
}

//! True when `fc` holds exactly axis (kINT32) and eps (kFLOAT32), one element each, with these values.
bool fieldsHold(PluginFieldCollection const* fc, int32_t axis, float eps)
{
    if (fc == nullptr || fc->nbFields != 2 || fc->fields == nullptr)
    {
        return false;
    }
    bool sawAxis = false;
    bool sawEps = false;
    for (int32_t i = 0; i < fc->nbFields; ++i)
    {
        PluginField const& f = fc->fields[i];
        if (f.name == nullptr || f.data == nullptr || f.length != 1)
        {
            return false;
        }
        if (std::strcmp(f.name, "axis") == 0 && f.type == PluginFieldType::kINT32)
        {
            sawAxis = *static_cast<int32_t const*>(f.data) == axis;
        }
        else if (std::strcmp(f.name, "eps") == 0 && f.type == PluginFieldType::kFLOAT32)
        {
            float v{};
            std::memcpy(&v, f.data, sizeof(v));
            sawEps = std::memcmp(&v, &eps, sizeof(v)) == 0; // bit-exact
        }
    }
    return sawAxis && sawEps;
}

// ------------------------------------------------------------------------------------------------ cpu checks
void checkCreators(Checker& c, Library const& lib, IPluginCreatorV3One*& creator)
{
    int32_t n = -1;
    IPluginCreatorInterface* const* creators = lib.getCreators(n);
    c.check(creators != nullptr && n == torchtrt_ext::plugins::kNB_CREATORS,
        "getCreators returns the creator table (kNB_CREATORS creators)", "n=" + std::to_string(n));
    creator = findCreator(lib, kNAME);
    c.check(creator != nullptr, "getCreators holds L2Norm version 1 in namespace torchtrt_ext (IPluginCreatorV3One)");
    if (creator == nullptr)
    {
        return;
    }
    InterfaceInfo const info = creator->getInterfaceInfo();
    c.check(std::strcmp(info.kind, "PLUGIN CREATOR_V3ONE") == 0 && info.major == 1, "creator interface is PLUGIN CREATOR_V3ONE 1.x");
    PluginFieldCollection const* names = creator->getFieldNames();
    c.check(names != nullptr && names->nbFields == 2 && std::strcmp(names->fields[0].name, "axis") == 0
            && names->fields[0].type == PluginFieldType::kINT32 && std::strcmp(names->fields[1].name, "eps") == 0
            && names->fields[1].type == PluginFieldType::kFLOAT32,
        "creator advertises fields axis (kINT32) and eps (kFLOAT32)", describeFields(names));
    int32_t n2 = -1;
    c.check(lib.getCreators(n2) == creators && n2 == n, "getCreators is stable across calls");
}

void checkCreateAndCapabilities(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    logger.clear();
    PluginPtr p = create(creator, l2normFields(1, 1e-6F));
    c.check(p != nullptr, "createPlugin(axis=1, eps=1e-6, kBUILD) returns a plugin", logger.all());
    if (!p)
    {
        return;
    }
    c.check(std::strcmp(p->getInterfaceInfo().kind, "PLUGIN") == 0 && p->getInterfaceInfo().major == 1, "plugin interface is PLUGIN 1.x");
    IPluginV3OneCore* co = core(p.get());
    IPluginV3OneBuild* bu = build(p.get());
    IPluginV3OneRuntime* ru = runtime(p.get());
    c.check(co != nullptr && bu != nullptr && ru != nullptr,
        "getCapabilityInterface gives PLUGIN_V3ONE_CORE, PLUGIN_V3ONE_BUILD and PLUGIN_V3ONE_RUNTIME");
    c.check(p->getCapabilityInterface(static_cast<PluginCapabilityType>(7)) == nullptr,
        "getCapabilityInterface(unknown type) returns nullptr");
    if (co != nullptr)
    {
        c.check(std::strcmp(co->getPluginName(), kNAME) == 0 && std::strcmp(co->getPluginVersion(), kVERSION) == 0
                && std::strcmp(co->getPluginNamespace(), kNAMESPACE) == 0,
            "plugin name/version/namespace equal the creator's");
    }
    if (bu != nullptr)
    {
        c.check(bu->getNbOutputs() == 1, "getNbOutputs is 1");
        DynamicPluginTensorDesc in = dynDesc({-1, 8, 4, 4}, DataType::kFLOAT);
        DynamicPluginTensorDesc out = in;
        c.check(bu->getWorkspaceSize(&in, 1, &out, 1) == 0, "getWorkspaceSize is 0");
        logger.clear();
        c.check(bu->getWorkspaceSize(&in, 2, &out, 1) == 0
                && logger.hasError({"L2Norm::getWorkspaceSize", "expected 1 input and 1 output, got 2 inputs"}),
            "getWorkspaceSize with 2 inputs returns 0 and logs the counts it expected (PluginV3Base's boundary)");
    }

    logger.clear();
    Fields onnxStyle = l2normFields(-1, 1e-3F);
    onnxStyle.text("plugin_version", "1").text("plugin_namespace", "torchtrt_ext");
    PluginPtr q = create(creator, std::move(onnxStyle));
    c.check(q != nullptr && logger.size() == 0,
        "createPlugin ignores plugin_version/plugin_namespace fields silently (ONNX parser fallback)", logger.all());

    logger.clear();
    Fields unknown = l2normFields(1, 1e-6F);
    unknown.add("epsilon", 1e-3F, PluginFieldType::kFLOAT32);
    PluginPtr u = create(creator, std::move(unknown));
    c.check(u != nullptr && logger.hasWarning("epsilon"), "createPlugin warns about an unknown field and ignores it",
        logger.all());
}

void checkOutputTypes(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    PluginPtr p = create(creator, l2normFields(1, 1e-6F));
    IPluginV3OneBuild* bu = build(p.get());
    if (!c.check(bu != nullptr, "plugin for getOutputDataTypes"))
    {
        return;
    }
    for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
    {
        DataType out = DataType::kINT8;
        int32_t const status = bu->getOutputDataTypes(&out, 1, &t, 1);
        c.check(status == 0 && out == t, std::string("getOutputDataTypes(") + dataTypeName(t) + ") is the input type");
    }
    for (DataType t : {DataType::kINT32, DataType::kINT8, DataType::kINT64, DataType::kBOOL})
    {
        logger.clear();
        DataType out = DataType::kFLOAT;
        int32_t const status = bu->getOutputDataTypes(&out, 1, &t, 1);
        c.check(status != 0 && logger.hasError({"L2Norm::getOutputDataTypes", dataTypeName(t)}),
            std::string("getOutputDataTypes(") + dataTypeName(t) + ") fails with a logged error", logger.all());
    }
    logger.clear();
    DataType ins[2] = {DataType::kFLOAT, DataType::kFLOAT};
    DataType outs[2];
    c.check(bu->getOutputDataTypes(outs, 1, ins, 2) != 0 && logger.hasError({"1 input"}),
        "getOutputDataTypes with 2 inputs fails with a logged error", logger.all());
}

void checkOutputShapes(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    struct Case
    {
        char const* name;
        int32_t axis;
        std::vector<std::string> dims; // a number, or a symbol for a dynamic dimension
        bool valid;
    };
    std::vector<Case> const cases = {
        {"static [2,3,4,5] axis 1", 1, {"2", "3", "4", "5"}, true},
        {"dynamic [N,64,H,W] axis 1", 1, {"N", "64", "H", "W"}, true},
        {"dynamic [N,C] axis -1", -1, {"N", "C"}, true},
        {"dynamic [(N*2),3,7] axis 0", 0, {"(N*2)", "3", "7"}, true},
        {"rank 8 axis -8", -8, {"1", "2", "1", "2", "1", "2", "1", "B"}, true},
        {"rank 1 axis 0", 0, {"L"}, true},
        {"rank 2 axis 2 (out of range)", 2, {"N", "4"}, false},
        {"rank 3 axis -4 (out of range)", -4, {"N", "4", "5"}, false},
    };
    for (Case const& k : cases)
    {
        PluginPtr p = create(creator, l2normFields(k.axis, 1e-6F));
        IPluginV3OneBuild* bu = build(p.get());
        if (!c.check(bu != nullptr, std::string("getOutputShapes plugin for ") + k.name, logger.all()))
        {
            continue;
        }
        TestExprBuilder eb;
        DimsExprs in{};
        in.nbDims = static_cast<int32_t>(k.dims.size());
        for (size_t i = 0; i < k.dims.size(); ++i)
        {
            std::string const& d = k.dims[i];
            if (d == "(N*2)")
            {
                in.d[i] = eb.operation(DimensionOperation::kPROD, *eb.symbol("N"), *eb.constant(2));
            }
            else if (std::isdigit(static_cast<unsigned char>(d[0])))
            {
                in.d[i] = eb.constant(std::stoll(d));
            }
            else
            {
                in.d[i] = eb.symbol(d);
            }
        }
        DimsExprs out{};
        out.nbDims = -1;
        logger.clear();
        int32_t const status = bu->getOutputShapes(&in, 1, nullptr, 0, &out, 1, eb);
        if (k.valid)
        {
            bool same = status == 0 && out.nbDims == in.nbDims;
            std::string got;
            for (int32_t i = 0; same && i < in.nbDims; ++i)
            {
                same = TestExprBuilder::equivalent(in.d[i], out.d[i]);
            }
            for (int32_t i = 0; status == 0 && i < out.nbDims && i < Dims::MAX_DIMS; ++i)
            {
                got += TestExprBuilder::describe(out.d[i]) + " ";
            }
            c.check(same, std::string("getOutputShapes ") + k.name + ": output shape is the input's",
                "status=" + std::to_string(status) + " got " + got);
        }
        else
        {
            c.check(status != 0 && logger.hasError({"L2Norm::getOutputShapes", "axis"}),
                std::string("getOutputShapes ") + k.name + ": fails with a logged error", logger.all());
        }
    }
}

void checkFormatMatrix(Checker& c, IPluginCreatorV3One* creator)
{
    PluginPtr p = create(creator, l2normFields(1, 1e-6F));
    IPluginV3OneBuild* bu = build(p.get());
    if (!c.check(bu != nullptr, "plugin for supportsFormatCombination"))
    {
        return;
    }
    auto supported = [](DataType t) { return t == DataType::kFLOAT || t == DataType::kHALF || t == DataType::kBF16; };
    int32_t const nbTypes = EnumMax<DataType>();
    int32_t const nbFormats = EnumMax<TensorFormat>();
    int32_t asked = 0;
    int32_t accepted = 0;
    std::string wrong;
    for (int32_t ti = 0; ti < nbTypes; ++ti)
    {
        for (int32_t fi = 0; fi < nbFormats; ++fi)
        {
            DataType const t = static_cast<DataType>(ti);
            TensorFormat const f = static_cast<TensorFormat>(fi);
            DynamicPluginTensorDesc io[2] = {dynDesc({-1, 8, 4, 4}, t, f), dynDesc({-1, 8, 4, 4}, t, f)};
            bool const expect0 = f == TensorFormat::kLINEAR && supported(t);
            bool const got0 = bu->supportsFormatCombination(0, io, 1, 1);
            ++asked;
            accepted += got0 ? 1 : 0;
            if (got0 != expect0)
            {
                wrong += "pos0 type#" + std::to_string(ti) + " format#" + std::to_string(fi) + "; ";
            }
            if (!expect0)
            {
                continue;
            }
            // Output position, given a supported input: every type x format of the output.
            for (int32_t to = 0; to < nbTypes; ++to)
            {
                for (int32_t fo = 0; fo < nbFormats; ++fo)
                {
                    io[1] = dynDesc({-1, 8, 4, 4}, static_cast<DataType>(to), static_cast<TensorFormat>(fo));
                    bool const expect1 = static_cast<TensorFormat>(fo) == TensorFormat::kLINEAR && to == ti;
                    bool const got1 = bu->supportsFormatCombination(1, io, 1, 1);
                    ++asked;
                    accepted += got1 ? 1 : 0;
                    if (got1 != expect1)
                    {
                        wrong += "pos1 in type#" + std::to_string(ti) + " out type#" + std::to_string(to) + " format#"
                            + std::to_string(fo) + "; ";
                    }
                }
            }
        }
    }
    c.check(wrong.empty() && accepted == 6,
        "supportsFormatCombination matrix (" + std::to_string(asked) + " queries over " + std::to_string(nbTypes)
            + " types x " + std::to_string(nbFormats)
            + " formats): LINEAR float32/float16/bfloat16 only, output type == input type",
        wrong + " accepted=" + std::to_string(accepted));
    DynamicPluginTensorDesc io[2] = {dynDesc({2, 3}, DataType::kFLOAT), dynDesc({2, 3}, DataType::kFLOAT)};
    c.check(!bu->supportsFormatCombination(2, io, 1, 1) && !bu->supportsFormatCombination(-1, io, 1, 1),
        "supportsFormatCombination rejects out-of-range positions");
}

void checkConfigure(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    PluginPtr p = create(creator, l2normFields(3, 1e-6F));
    IPluginV3OneBuild* bu = build(p.get());
    IPluginV3OneRuntime* ru = runtime(p.get());
    if (!c.check(bu != nullptr && ru != nullptr, "plugin for configurePlugin/onShapeChange"))
    {
        return;
    }
    DynamicPluginTensorDesc in = dynDesc({-1, 8, -1, -1}, DataType::kHALF);
    DynamicPluginTensorDesc out = in;
    c.check(bu->configurePlugin(&in, 1, &out, 1) == 0, "configurePlugin accepts rank 4 (dynamic dims) for axis 3");
    logger.clear();
    in = dynDesc({-1, 8, -1}, DataType::kHALF);
    out = in;
    c.check(bu->configurePlugin(&in, 1, &out, 1) != 0 && logger.hasError({"L2Norm::configurePlugin", "axis 3", "rank 3"}),
        "configurePlugin rejects axis 3 for rank 3 with a logged error", logger.all());
    logger.clear();
    in = dynDesc({-1, 8, 4, 4}, DataType::kHALF);
    out = dynDesc({-1, 8, 4, 4}, DataType::kFLOAT);
    c.check(bu->configurePlugin(&in, 1, &out, 1) != 0 && logger.hasError({"output has type"}),
        "configurePlugin rejects an output type different from the input's", logger.all());

    PluginTensorDesc pin = desc({2, 8, 4, 4}, DataType::kBF16);
    PluginTensorDesc pout = pin;
    c.check(ru->onShapeChange(&pin, 1, &pout, 1) == 0, "onShapeChange accepts [2,8,4,4] for axis 3");
    logger.clear();
    pin = desc({2, 8}, DataType::kBF16);
    pout = pin;
    c.check(ru->onShapeChange(&pin, 1, &pout, 1) != 0 && logger.hasError({"L2Norm::onShapeChange", "axis 3", "rank 2"}),
        "onShapeChange rejects axis 3 for rank 2 with a logged error", logger.all());
    logger.clear();
    pin = desc({2, 8, 4, 4}, DataType::kFLOAT);
    pout = desc({2, 8, 4, 5}, DataType::kFLOAT);
    c.check(ru->onShapeChange(&pin, 1, &pout, 1) != 0 && logger.hasError({"dimensions differ"}),
        "onShapeChange rejects an output shape different from the input's", logger.all());
}

void checkSerializationRoundTrip(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    struct Attrs
    {
        int32_t axis;
        float eps;
    };
    for (Attrs const a : {Attrs{1, 1e-6F}, Attrs{-1, 1e-3F}, Attrs{0, 0.1F}, Attrs{-3, 1e-12F}})
    {
        std::string const label = "axis=" + std::to_string(a.axis) + " eps=" + std::to_string(a.eps);
        PluginPtr p = create(creator, l2normFields(a.axis, a.eps));
        IPluginV3OneRuntime* ru = runtime(p.get());
        if (!c.check(ru != nullptr, "plugin for serialization " + label, logger.all()))
        {
            continue;
        }
        PluginFieldCollection const* fc = ru->getFieldsToSerialize();
        c.check(fieldsHold(fc, a.axis, a.eps), "getFieldsToSerialize " + label + ": exactly axis (kINT32) and eps (kFLOAT32)",
            describeFields(fc));
        logger.clear();
        PluginPtr r(creator->createPlugin(kNAME, fc, TensorRTPhase::kRUNTIME));
        IPluginV3OneRuntime* rr = runtime(r.get());
        PluginFieldCollection const* rfc = rr != nullptr ? rr->getFieldsToSerialize() : nullptr;
        IPluginV3OneCore* rc = core(r.get());
        IPluginV3OneBuild* pb = build(p.get());
        IPluginV3OneBuild* rb = build(r.get());
        bool equal = r != nullptr && fieldsHold(rfc, a.axis, a.eps) && rc != nullptr
            && std::strcmp(rc->getPluginName(), kNAME) == 0 && std::strcmp(rc->getPluginNamespace(), kNAMESPACE) == 0
            && pb != nullptr && rb != nullptr && pb->getTimingCacheID() != nullptr && rb->getTimingCacheID() != nullptr
            && std::strcmp(pb->getTimingCacheID(), rb->getTimingCacheID()) == 0;
        c.check(equal, "round trip " + label + ": createPlugin(getFieldsToSerialize(), kRUNTIME) gives an equal plugin",
            describeFields(rfc) + logger.all());
    }
}

void checkCloneIndependence(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    PluginPtr original = create(creator, l2normFields(-1, 1e-4F));
    if (!c.check(original != nullptr, "plugin for clone"))
    {
        return;
    }
    PluginPtr clone(original->clone());
    c.check(clone != nullptr && clone.get() != original.get(), "clone returns a new object");
    if (!clone)
    {
        return;
    }
    c.check(runtime(clone.get()) != runtime(original.get()) && build(clone.get()) != build(original.get())
            && core(clone.get()) != core(original.get()),
        "clone's capability interfaces are its own");
    PluginFieldCollection const* fo = runtime(original.get())->getFieldsToSerialize();
    PluginFieldCollection const* fcl = runtime(clone.get())->getFieldsToSerialize();
    bool disjoint = fo != fcl && fo != nullptr && fcl != nullptr && fo->fields != fcl->fields;
    for (int32_t i = 0; disjoint && i < fo->nbFields && i < fcl->nbFields; ++i)
    {
        disjoint = fo->fields[i].data != fcl->fields[i].data;
    }
    c.check(fieldsHold(fcl, -1, 1e-4F) && disjoint, "clone holds equal fields in storage of its own", describeFields(fcl));

    // Changing the clone (configuring it for another shape) leaves the original alone, and the other way round.
    PluginTensorDesc a = desc({2, 8, 16}, DataType::kFLOAT);
    PluginTensorDesc b = desc({5, 3}, DataType::kHALF);
    c.check(runtime(clone.get())->onShapeChange(&b, 1, &b, 1) == 0 && runtime(original.get())->onShapeChange(&a, 1, &a, 1) == 0
            && fieldsHold(runtime(original.get())->getFieldsToSerialize(), -1, 1e-4F),
        "configuring clone and original for different shapes leaves each one's fields intact");

    // Destroying the original leaves the clone whole (the harness's ASan build catches any shared buffer).
    original.reset();
    PluginFieldCollection const* after = runtime(clone.get())->getFieldsToSerialize();
    c.check(fieldsHold(after, -1, 1e-4F), "clone still holds its fields after the original is deleted", describeFields(after));
    TestExprBuilder eb;
    DimsExprs in{};
    in.nbDims = 2;
    in.d[0] = eb.symbol("N");
    in.d[1] = eb.constant(3);
    DimsExprs out{};
    c.check(build(clone.get())->getOutputShapes(&in, 1, nullptr, 0, &out, 1, eb) == 0 && out.nbDims == 2,
        "clone still computes output shapes after the original is deleted");
    PluginPtr grandchild(clone->clone());
    clone.reset();
    c.check(grandchild != nullptr && fieldsHold(runtime(grandchild.get())->getFieldsToSerialize(), -1, 1e-4F),
        "a clone of a clone outlives both", logger.all());
}

void checkAttachToContext(Checker& c, IPluginCreatorV3One* creator)
{
    PluginPtr p = create(creator, l2normFields(2, 1e-5F));
    IPluginV3OneRuntime* ru = runtime(p.get());
    if (!c.check(ru != nullptr, "plugin for attachToContext"))
    {
        return;
    }
    TestResourceContext ctx1;
    TestResourceContext ctx2;
    PluginPtr a(ru->attachToContext(&ctx1));
    PluginPtr b(ru->attachToContext(&ctx2));
    PluginPtr n(ru->attachToContext(nullptr));
    c.check(a != nullptr && b != nullptr && n != nullptr && a.get() != p.get() && b.get() != a.get(),
        "attachToContext returns a new plugin per context (also for a null context)");
    p.reset();
    c.check(a && b && fieldsHold(runtime(a.get())->getFieldsToSerialize(), 2, 1e-5F)
            && fieldsHold(runtime(b.get())->getFieldsToSerialize(), 2, 1e-5F) && core(a.get()) != nullptr
            && std::strcmp(core(a.get())->getPluginNamespace(), kNAMESPACE) == 0,
        "context plugins keep the attributes after the original is deleted");
}

void checkBadFields(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    float const nan = std::numeric_limits<float>::quiet_NaN();
    float const inf = std::numeric_limits<float>::infinity();
    int32_t const two[2] = {1, 2};
    std::vector<BadFields> const cases = {
        {"eps = 0", [] { return l2normFields(1, 0.0F); }, {"eps", "finite value > 0"}},
        {"eps < 0", [] { return l2normFields(1, -1e-6F); }, {"eps", "finite value > 0"}},
        {"eps = NaN", [nan] { return l2normFields(1, nan); }, {"eps", "finite value > 0"}},
        {"eps = inf", [inf] { return l2normFields(1, inf); }, {"eps", "finite value > 0"}},
        {"eps as kFLOAT64", [] { Fields f; f.add("axis", int32_t{1}, PluginFieldType::kINT32).add("eps", 1e-6, PluginFieldType::kFLOAT64); return f; },
            {"eps", "kFLOAT64", "expected kFLOAT32"}},
        {"axis as kINT64", [] { Fields f; f.add("axis", int64_t{1}, PluginFieldType::kINT64).add("eps", 1e-6F, PluginFieldType::kFLOAT32); return f; },
            {"axis", "kINT64", "expected kINT32"}},
        {"axis as kFLOAT32", [] { Fields f; f.add("axis", 1.0F, PluginFieldType::kFLOAT32).add("eps", 1e-6F, PluginFieldType::kFLOAT32); return f; },
            {"axis", "kFLOAT32", "expected kINT32"}},
        {"axis with 2 elements", [two] { Fields f; f.raw("axis", two, sizeof(two), PluginFieldType::kINT32, 2).add("eps", 1e-6F, PluginFieldType::kFLOAT32); return f; },
            {"axis", "2 elements"}},
        {"eps with 0 elements", [] { Fields f; f.add("axis", int32_t{1}, PluginFieldType::kINT32).raw("eps", nullptr, 0, PluginFieldType::kFLOAT32, 0); return f; },
            {"eps", "0 elements"}},
        {"axis without data", [] { Fields f; f.raw("axis", nullptr, 0, PluginFieldType::kINT32, 1).add("eps", 1e-6F, PluginFieldType::kFLOAT32); return f; },
            {"axis", "no data"}},
        {"field without a name", [] { Fields f = l2normFields(1, 1e-6F); f.add(nullptr, int32_t{0}, PluginFieldType::kINT32); return f; },
            {"no name"}},
        {"missing axis", [] { Fields f; f.add("eps", 1e-6F, PluginFieldType::kFLOAT32); return f; }, {"missing field 'axis'"}},
        {"missing eps", [] { Fields f; f.add("axis", int32_t{1}, PluginFieldType::kINT32); return f; }, {"missing field 'eps'"}},
        {"no fields", [] { return Fields(); }, {"missing field"}},
        {"axis = 8 (beyond any rank)", [] { return l2normFields(8, 1e-6F); }, {"axis", "[-8, 7]"}},
        {"axis = -9 (beyond any rank)", [] { return l2normFields(-9, 1e-6F); }, {"axis", "[-8, 7]"}},
    };
    checkRejectedFields(c, creator, logger, cases);
}

void checkRegistration(Checker& c, Library const& lib, TestLogger& logger)
{
    if (!c.check(lib.registerPlugins != nullptr, "torchtrt_ext_register_plugins is exported"))
    {
        return;
    }
    TestRegistry registry;
    c.check(lib.registerPlugins(&registry, "my_models"), "torchtrt_ext_register_plugins(registry, \"my_models\") succeeds");
    auto* creator = TestRegistry::asV3(registry.getCreator(kNAME, kVERSION, "my_models"));
    c.check(creator != nullptr && std::strcmp(creator->getPluginNamespace(), "my_models") == 0,
        "the registry holds L2Norm 1 under namespace my_models, and the creator says so");
    if (creator != nullptr)
    {
        Fields f = l2normFields(1, 1e-6F);
        PluginPtr p(creator->createPlugin(kNAME, f.collection(), TensorRTPhase::kBUILD));
        c.check(p != nullptr && core(p.get()) != nullptr && std::strcmp(core(p.get())->getPluginNamespace(), "my_models") == 0,
            "plugins made by that creator carry namespace my_models");
    }
    c.check(lib.registerPlugins(&registry, "my_models") && registry.registerCalls == torchtrt_ext::plugins::kNB_CREATORS,
        "registering the same namespace twice succeeds without a duplicate");
    c.check(lib.registerPlugins(&registry, nullptr) && registry.getCreator(kNAME, kVERSION, kNAMESPACE) != nullptr,
        "a null namespace registers under torchtrt_ext");
    logger.clear();
    c.check(!lib.registerPlugins(nullptr, "x") && logger.hasError({"no plugin registry"}),
        "a null registry fails with a logged error", logger.all());
}

void checkLoggerFallback(Checker& c, Library const& lib, IPluginCreatorV3One* creator, TestLoggerFinder* finder)
{
    // Without a logger finder messages go to stderr; nothing crashes.
    lib.setLoggerFinder(nullptr);
    Fields f = l2normFields(1, -1.0F);
    PluginPtr p(creator->createPlugin(kNAME, f.collection(), TensorRTPhase::kBUILD));
    c.check(p == nullptr, "without a logger finder, bad fields still give nullptr (message on stderr)");
    lib.setLoggerFinder(finder);
}

int32_t runCpu(Library const& lib, TestLogger& logger, TestLoggerFinder& finder)
{
    Checker c;
    IPluginCreatorV3One* creator = nullptr;
    checkCreators(c, lib, creator);
    if (creator == nullptr)
    {
        std::printf("harness cpu: %d checks, %d failed\n", c.count, c.failures);
        return c.failures;
    }
    checkCreateAndCapabilities(c, creator, logger);
    checkOutputTypes(c, creator, logger);
    checkOutputShapes(c, creator, logger);
    checkFormatMatrix(c, creator);
    checkConfigure(c, creator, logger);
    checkSerializationRoundTrip(c, creator, logger);
    checkCloneIndependence(c, creator, logger);
    checkAttachToContext(c, creator);
    checkBadFields(c, creator, logger);
    checkRegistration(c, lib, logger);
    checkLoggerFallback(c, lib, creator, &finder);
    std::printf("harness cpu: %d checks, %d failed\n", c.count, c.failures);
    return c.failures;
}

// ------------------------------------------------------------------------------------------------ gpu checks

//! y = x / max(||x||_2 over axis, eps), in double.
std::vector<double> reference(std::vector<float> const& x, std::vector<int64_t> const& shape, int32_t axis, float eps)
{
    int32_t const rank = static_cast<int32_t>(shape.size());
    int32_t const a = axis < 0 ? axis + rank : axis;
    int64_t outer = 1;
    int64_t inner = 1;
    for (int32_t i = 0; i < a; ++i)
    {
        outer *= shape[i];
    }
    for (int32_t i = a + 1; i < rank; ++i)
    {
        inner *= shape[i];
    }
    int64_t const reduced = shape[a];
    std::vector<double> y(x.size());
    for (int64_t o = 0; o < outer; ++o)
    {
        for (int64_t in = 0; in < inner; ++in)
        {
            double sum = 0.0;
            for (int64_t r = 0; r < reduced; ++r)
            {
                double const v = x[(o * reduced + r) * inner + in];
                sum += v * v;
            }
            double const norm = std::max(std::sqrt(sum), static_cast<double>(eps));
            for (int64_t r = 0; r < reduced; ++r)
            {
                size_t const idx = (o * reduced + r) * inner + in;
                y[idx] = x[idx] / norm;
            }
        }
    }
    return y;
}

struct GpuCase
{
    std::vector<int64_t> shape;
    int32_t axis;
    float eps;
};

//! Inputs: pseudo-random values in [-2, 2), the first reduced vector zero (norm below eps), the second tiny.
std::vector<float> makeInput(GpuCase const& k, uint32_t seed)
{
    int64_t n = 1;
    for (int64_t d : k.shape)
    {
        n *= d;
    }
    std::vector<float> x(static_cast<size_t>(n));
    uint32_t s = seed;
    for (float& v : x)
    {
        s = s * 1664525U + 1013904223U;
        v = (static_cast<float>(s >> 8) / static_cast<float>(1U << 24)) * 4.0F - 2.0F;
    }
    int32_t const rank = static_cast<int32_t>(k.shape.size());
    int32_t const a = k.axis < 0 ? k.axis + rank : k.axis;
    int64_t inner = 1;
    for (int32_t i = a + 1; i < rank; ++i)
    {
        inner *= k.shape[i];
    }
    for (int64_t r = 0; r < k.shape[a]; ++r)
    {
        x[static_cast<size_t>(r * inner)] = 0.0F; // vector (o=0, i=0): all zeros
        if (inner > 1)
        {
            x[static_cast<size_t>(r * inner + 1)] = 1e-9F; // vector (o=0, i=1): norm far below eps
        }
    }
    return x;
}

//! Enqueue `plugin` (already attached and shape-changed) on x; return y as floats, or an empty vector on failure.
std::vector<float> runPlugin(IPluginV3* plugin, GpuCase const& k, DataType t, std::vector<float> const& x,
    cudaStream_t stream, std::string& error)
{
    IPluginV3OneRuntime* ru = runtime(plugin);
    std::vector<uint8_t> const hostIn = encode(x, t);
    DeviceBuffer din(hostIn.size());
    DeviceBuffer dout(hostIn.size());
    if (din.ptr == nullptr || dout.ptr == nullptr)
    {
        error = "cudaMalloc failed";
        return {};
    }
    cudaError_t e = cudaMemcpyAsync(din.ptr, hostIn.data(), hostIn.size(), cudaMemcpyHostToDevice, stream);
    e = e == cudaSuccess ? cudaMemsetAsync(dout.ptr, 0xFF, hostIn.size(), stream) : e; // NaN-filled: unwritten shows
    if (e != cudaSuccess)
    {
        error = std::string("copy in: ") + cudaGetErrorString(e);
        return {};
    }
    PluginTensorDesc const in = desc(k.shape, t);
    PluginTensorDesc const out = in;
    void const* inputs[1] = {din.ptr};
    void* outputs[1] = {dout.ptr};
    int32_t const status = ru->enqueue(&in, &out, inputs, outputs, nullptr, stream);
    if (status != 0)
    {
        error = "enqueue returned " + std::to_string(status);
        return {};
    }
    std::vector<uint8_t> hostOut(hostIn.size());
    e = cudaMemcpyAsync(hostOut.data(), dout.ptr, hostOut.size(), cudaMemcpyDeviceToHost, stream);
    e = e == cudaSuccess ? cudaStreamSynchronize(stream) : e;
    if (e != cudaSuccess)
    {
        error = std::string("copy out / sync: ") + cudaGetErrorString(e);
        return {};
    }
    return decode(hostOut, t);
}

//! max over elements of |y - ref| / max(|ref|, 1e-3): relative error, absolute below 1e-3.
double maxRelError(std::vector<float> const& y, std::vector<double> const& ref)
{
    double worst = 0.0;
    for (size_t i = 0; i < y.size(); ++i)
    {
        double const err = std::fabs(static_cast<double>(y[i]) - ref[i]) / std::max(std::fabs(ref[i]), 1e-3);
        worst = std::isnan(err) ? std::numeric_limits<double>::infinity() : std::max(worst, err);
    }
    return worst;
}

int32_t runGpu(Library const& lib, TestLogger& logger, std::string const& dumpDir)
{
    Checker c;
    int32_t deviceCount = 0;
    if (!c.check(cudaGetDeviceCount(&deviceCount) == cudaSuccess && deviceCount > 0, "a CUDA device is present"))
    {
        std::printf("harness gpu: %d checks, %d failed\n", c.count, c.failures);
        return c.failures;
    }
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    IPluginCreatorV3One* creator = findCreator(lib, kNAME);
    if (!c.check(creator != nullptr, "L2Norm creator found"))
    {
        return 1;
    }
    cudaStream_t stream{};
    cudaStreamCreate(&stream);
    std::vector<GpuCase> const cases = {
        {{2, 3, 4, 5}, 1, 1e-6F},
        {{4, 7, 33}, -1, 1e-6F},
        {{3, 5, 2}, 0, 1e-6F},
        {{2, 1024, 3}, 1, 1e-6F},
        {{8, 3000}, -1, 1e-12F},
        {{2, 64, 19, 19}, 1, 1e-6F},
        {{1, 512, 1, 1}, 1, 1e-3F},
        {{3, 2, 4097}, 2, 1e-6F},
    };
    struct TypeCase
    {
        DataType type;
        char const* name;
        double tolerance;
    };
    std::vector<TypeCase> const types = {{DataType::kFLOAT, "float32", 1e-5}, {DataType::kHALF, "float16", 1e-3},
        {DataType::kBF16, "bfloat16", 1e-2}};
    std::ofstream manifest;
    if (!dumpDir.empty())
    {
        manifest.open(dumpDir + "/cases.txt");
    }
    int32_t index = 0;
    for (TypeCase const& tc : types)
    {
        for (GpuCase const& k : cases)
        {
            std::string const label = std::string(tc.name) + " " + shapeText(k.shape) + " axis " + std::to_string(k.axis);
            logger.clear();
            Fields f = l2normFields(k.axis, k.eps);
            PluginPtr built(creator->createPlugin(kNAME, f.collection(), TensorRTPhase::kBUILD));
            // As TensorRT does: serialize, recreate in the runtime phase, attach to a context, set the shape.
            PluginPtr deserialized(built ? creator->createPlugin(kNAME, runtime(built.get())->getFieldsToSerialize(), TensorRTPhase::kRUNTIME) : nullptr);
            TestResourceContext ctx;
            PluginPtr attached(deserialized ? runtime(deserialized.get())->attachToContext(&ctx) : nullptr);
            built.reset();
            deserialized.reset();
            PluginTensorDesc const d = desc(k.shape, tc.type);
            if (!c.check(attached != nullptr && runtime(attached.get())->onShapeChange(&d, 1, &d, 1) == 0,
                    "enqueue " + label + ": plugin created, deserialized, attached, shape set", logger.all()))
            {
                continue;
            }
            std::vector<float> const x = decode(encode(makeInput(k, 1234U + static_cast<uint32_t>(index)), tc.type), tc.type);
            std::string error;
            std::vector<float> const y = runPlugin(attached.get(), k, tc.type, x, stream, error);
            if (!c.check(!y.empty(), "enqueue " + label + " runs", error + " " + logger.all()))
            {
                continue;
            }
            double const err = maxRelError(y, reference(x, k.shape, k.axis, k.eps));
            char detail[128];
            std::snprintf(detail, sizeof(detail), "max rel error %.3g, tolerance %.0e", err, tc.tolerance);
            c.check(err < tc.tolerance, "enqueue " + label + " matches the CPU reference (" + detail + ")", detail);
            if (manifest.is_open())
            {
                std::string const stem = dumpDir + "/case" + std::to_string(index);
                std::ofstream(stem + "_x.f32", std::ios::binary).write(reinterpret_cast<char const*>(x.data()), static_cast<std::streamsize>(x.size() * 4));
                std::ofstream(stem + "_y.f32", std::ios::binary).write(reinterpret_cast<char const*>(y.data()), static_cast<std::streamsize>(y.size() * 4));
                char eps[32];
                std::snprintf(eps, sizeof(eps), "%.9g", static_cast<double>(k.eps)); // exact float, not to_string's 6 digits
                manifest << index << " " << tc.name << " " << k.axis << " " << eps << " " << shapeText(k.shape) << "\n";
            }
            ++index;
        }
    }

    // Two contexts' clones set to different shapes run independently.
    {
        Fields f = l2normFields(1, 1e-6F);
        PluginPtr original(creator->createPlugin(kNAME, f.collection(), TensorRTPhase::kRUNTIME));
        TestResourceContext ctxA;
        TestResourceContext ctxB;
        PluginPtr a(original ? runtime(original.get())->attachToContext(&ctxA) : nullptr);
        PluginPtr b(original ? runtime(original.get())->attachToContext(&ctxB) : nullptr);
        original.reset();
        GpuCase const ka{{2, 16, 8}, 1, 1e-6F};
        GpuCase const kb{{5, 300}, 1, 1e-6F};
        PluginTensorDesc const da = desc(ka.shape, DataType::kFLOAT);
        PluginTensorDesc const db = desc(kb.shape, DataType::kHALF);
        bool ok = a && b && runtime(a.get())->onShapeChange(&da, 1, &da, 1) == 0
            && runtime(b.get())->onShapeChange(&db, 1, &db, 1) == 0;
        std::string error;
        std::vector<float> const xb = decode(encode(makeInput(kb, 7U), DataType::kHALF), DataType::kHALF);
        std::vector<float> const xa = makeInput(ka, 9U);
        std::vector<float> const yb = ok ? runPlugin(b.get(), kb, DataType::kHALF, xb, stream, error) : std::vector<float>{};
        std::vector<float> const ya = ok ? runPlugin(a.get(), ka, DataType::kFLOAT, xa, stream, error) : std::vector<float>{};
        ok = ok && !ya.empty() && !yb.empty() && maxRelError(ya, reference(xa, ka.shape, 1, 1e-6F)) < 1e-5
            && maxRelError(yb, reference(xb, kb.shape, 1, 1e-6F)) < 1e-3;
        c.check(ok, "two context clones with different shapes and types enqueue independently", error);
    }

    // Error paths at enqueue: a type mismatch is refused with a logged error; an empty tensor launches nothing.
    {
        Fields f = l2normFields(1, 1e-6F);
        PluginPtr p(creator->createPlugin(kNAME, f.collection(), TensorRTPhase::kRUNTIME));
        IPluginV3OneRuntime* ru = runtime(p.get());
        DeviceBuffer buf(64);
        PluginTensorDesc in = desc({2, 4}, DataType::kFLOAT);
        PluginTensorDesc out = desc({2, 4}, DataType::kHALF);
        void const* inputs[1] = {buf.ptr};
        void* outputs[1] = {buf.ptr};
        logger.clear();
        c.check(ru != nullptr && ru->enqueue(&in, &out, inputs, outputs, nullptr, stream) != 0
                && logger.hasError({"L2Norm::enqueue", "output has type"}),
            "enqueue with an output type unlike the input's fails with a logged error", logger.all());
        in = desc({2, 4}, DataType::kINT32);
        out = in;
        logger.clear();
        c.check(ru != nullptr && ru->enqueue(&in, &out, inputs, outputs, nullptr, stream) != 0
                && logger.hasError({"L2Norm::enqueue", "kINT32"}),
            "enqueue with an int32 tensor fails with a logged error", logger.all());
        in = desc({0, 4}, DataType::kFLOAT);
        out = in;
        void const* noIn[1] = {nullptr};
        void* noOut[1] = {nullptr};
        c.check(ru != nullptr && ru->enqueue(&in, &out, noIn, noOut, nullptr, stream) == 0,
            "enqueue of an empty tensor succeeds without touching memory");
        c.check(cudaStreamSynchronize(stream) == cudaSuccess && cudaGetLastError() == cudaSuccess,
            "no CUDA error left behind");
    }
    cudaStreamDestroy(stream);
    std::printf("harness gpu: %d checks, %d failed\n", c.count, c.failures);
    return c.failures;
}
} // namespace

int main(int argc, char** argv)
{
    return harnessMain(
        argc, argv, {[](Library const& lib) { return printFields(lib, kNAME, l2normFields(1, 1e-6F)); }, runCpu, runGpu});
}
