// Conformance harness for the DeformConv2d plugin of libtorchtrt_ext_plugins.so: drives it the way TensorRT does,
// with no TensorRT library (only its public headers; logger finder, expression builder, resource context and registry
// are the test doubles of test_doubles.h). The L2Norm plugin has its own harness (harness_l2norm.cpp).
//
//   harness_deform_conv2d LIB fields             print the creator's advertised and serialized fields
//   harness_deform_conv2d LIB cpu                every check that needs no GPU
//   harness_deform_conv2d LIB gpu [--dump DIR]   enqueue on device buffers for float32/float16/bfloat16 against a
//                                                float64 CPU reference; --dump writes inputs and outputs for a
//                                                comparison with torchtrt_ext's PyTorch implementation
//
// Each check prints "ok   <name>" or "FAIL <name>: <detail>"; the exit status is the number of failures (capped).
#include "NvInferRuntime.h"
#include "kernels/deform_conv2d.h"
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
#include <deque>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace nvinfer1;
using namespace test_doubles;

namespace
{
constexpr char const* kNAME = "DeformConv2d";

using WorkspaceSizeFn = int64_t (*)(TorchtrtExtDeformConv2dDesc const*);

// ------------------------------------------------------------------------------------------------ helpers
struct Attrs
{
    int32_t stride[2]{1, 1};
    int32_t padding[2]{0, 0};
    int32_t dilation[2]{1, 1};
    int32_t groups{1};
    int32_t offsetGroups{1};

    std::string text() const
    {
        return "stride=" + std::to_string(stride[0]) + "," + std::to_string(stride[1]) + " padding="
            + std::to_string(padding[0]) + "," + std::to_string(padding[1]) + " dilation=" + std::to_string(dilation[0])
            + "," + std::to_string(dilation[1]) + " groups=" + std::to_string(groups)
            + " offset_groups=" + std::to_string(offsetGroups);
    }
};

Attrs attrs(int32_t stride, int32_t pad, int32_t dil, int32_t groups, int32_t og)
{
    Attrs a;
    a.stride[0] = a.stride[1] = stride;
    a.padding[0] = a.padding[1] = pad;
    a.dilation[0] = a.dilation[1] = dil;
    a.groups = groups;
    a.offsetGroups = og;
    return a;
}

Fields fieldsOf(Attrs const& a)
{
    Fields f;
    f.ints("stride", {a.stride[0], a.stride[1]})
        .ints("padding", {a.padding[0], a.padding[1]})
        .ints("dilation", {a.dilation[0], a.dilation[1]})
        .ints("groups", {a.groups})
        .ints("offset_groups", {a.offsetGroups});
    return f;
}

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
        text += std::string(f.name != nullptr ? f.name : "<null>") + "=";
        for (int32_t k = 0; f.data != nullptr && f.type == PluginFieldType::kINT32 && k < f.length; ++k)
        {
            text += (k ? "," : "") + std::to_string(static_cast<int32_t const*>(f.data)[k]);
        }
        text += std::string(" (") + fieldTypeName(f.type) + " x" + std::to_string(f.length) + ") ";
    }
    return text;
}

//! True when fc holds exactly the five fields of `a`, each kINT32 of the right length and value.
bool fieldsHold(PluginFieldCollection const* fc, Attrs const& a)
{
    if (fc == nullptr || fc->nbFields != 5 || fc->fields == nullptr)
    {
        return false;
    }
    std::map<std::string, std::vector<int32_t>> const expected = {{"stride", {a.stride[0], a.stride[1]}},
        {"padding", {a.padding[0], a.padding[1]}}, {"dilation", {a.dilation[0], a.dilation[1]}},
        {"groups", {a.groups}}, {"offset_groups", {a.offsetGroups}}};
    std::map<std::string, bool> seen;
    for (int32_t i = 0; i < fc->nbFields; ++i)
    {
        PluginField const& f = fc->fields[i];
        if (f.name == nullptr || f.data == nullptr || f.type != PluginFieldType::kINT32 || expected.count(f.name) == 0)
        {
            return false;
        }
        std::vector<int32_t> const& want = expected.at(f.name);
        if (f.length != static_cast<int32_t>(want.size())
            || std::memcmp(f.data, want.data(), want.size() * sizeof(int32_t)) != 0)
        {
            return false;
        }
        seen[f.name] = true;
    }
    return seen.size() == 5;
}

int64_t convOut(int64_t size, int64_t kernel, int32_t stride, int32_t pad, int32_t dil)
{
    return (size + 2 * pad - dil * (kernel - 1) - 1) / stride + 1;
}

//! A problem: sizes and attributes; the shapes of every tensor follow.
struct Problem
{
    int64_t n, cin, cout, h, w, kh, kw;
    Attrs a;
    int32_t nbInputs; // 3, 4 (bias) or 5 (bias + mask)
    int64_t ho() const
    {
        return convOut(h, kh, a.stride[0], a.padding[0], a.dilation[0]);
    }
    int64_t wo() const
    {
        return convOut(w, kw, a.stride[1], a.padding[1], a.dilation[1]);
    }
    std::vector<std::vector<int64_t>> shapes() const
    {
        int64_t const taps = kh * kw;
        std::vector<std::vector<int64_t>> s = {{n, cin, h, w}, {n, 2 * a.offsetGroups * taps, ho(), wo()},
            {cout, cin / a.groups, kh, kw}, {cout}, {n, a.offsetGroups * taps, ho(), wo()}};
        s.resize(static_cast<size_t>(nbInputs));
        return s;
    }
    std::vector<int64_t> outShape() const
    {
        return {n, cout, ho(), wo()};
    }
    std::string text() const
    {
        return "n" + std::to_string(n) + " " + std::to_string(cin) + "->" + std::to_string(cout) + " "
            + std::to_string(h) + "x" + std::to_string(w) + " k" + std::to_string(kh) + "x" + std::to_string(kw) + " "
            + a.text() + " inputs=" + std::to_string(nbInputs);
    }
};

std::vector<PluginTensorDesc> descsOf(Problem const& p, DataType t)
{
    std::vector<PluginTensorDesc> d;
    for (auto const& s : p.shapes())
    {
        d.push_back(desc(s, t));
    }
    return d;
}

std::vector<DynamicPluginTensorDesc> dynDescsOf(std::vector<std::vector<int64_t>> const& shapes, DataType t)
{
    std::vector<DynamicPluginTensorDesc> d;
    for (auto const& s : shapes)
    {
        d.push_back(dynDesc(s, t));
    }
    return d;
}

// ------------------------------------------------------------------------------------------------ cpu checks
void checkCreators(Checker& c, Library const& lib, IPluginCreatorV3One*& creator)
{
    int32_t n = -1;
    IPluginCreatorInterface* const* creators = lib.getCreators(n);
    c.check(creators != nullptr && n == torchtrt_ext::plugins::kNB_CREATORS,
        "getCreators returns the creator table (kNB_CREATORS creators)", "n=" + std::to_string(n));
    c.check(findCreator(lib, "L2Norm") != nullptr, "getCreators still holds L2Norm 1 in namespace torchtrt_ext");
    creator = findCreator(lib, kNAME);
    c.check(creator != nullptr, "getCreators holds DeformConv2d version 1 in namespace torchtrt_ext (IPluginCreatorV3One)");
    if (creator == nullptr)
    {
        return;
    }
    InterfaceInfo const info = creator->getInterfaceInfo();
    c.check(std::strcmp(info.kind, "PLUGIN CREATOR_V3ONE") == 0 && info.major == 1, "creator interface is PLUGIN CREATOR_V3ONE 1.x");
    PluginFieldCollection const* names = creator->getFieldNames();
    bool ok = names != nullptr && names->nbFields == 5;
    char const* const kNAMES[5] = {"stride", "padding", "dilation", "groups", "offset_groups"};
    int32_t const kLENGTHS[5] = {2, 2, 2, 1, 1};
    for (int32_t i = 0; ok && i < 5; ++i)
    {
        ok = std::strcmp(names->fields[i].name, kNAMES[i]) == 0 && names->fields[i].type == PluginFieldType::kINT32
            && names->fields[i].length == kLENGTHS[i];
    }
    c.check(ok, "creator advertises stride, padding, dilation (kINT32 x2), groups, offset_groups (kINT32 x1)",
        describeFields(names));
}

void checkCreateAndCapabilities(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    logger.clear();
    PluginPtr p = create(creator, fieldsOf(attrs(2, 1, 2, 2, 2)));
    if (!c.check(p != nullptr, "createPlugin(all fields, kBUILD) returns a plugin", logger.all()))
    {
        return;
    }
    IPluginV3OneCore* co = core(p.get());
    IPluginV3OneBuild* bu = build(p.get());
    IPluginV3OneRuntime* ru = runtime(p.get());
    c.check(co != nullptr && bu != nullptr && ru != nullptr,
        "getCapabilityInterface gives PLUGIN_V3ONE_CORE, PLUGIN_V3ONE_BUILD and PLUGIN_V3ONE_RUNTIME");
    c.check(p->getCapabilityInterface(static_cast<PluginCapabilityType>(7)) == nullptr,
        "getCapabilityInterface(unknown type) returns nullptr");
    c.check(co != nullptr && std::strcmp(co->getPluginName(), kNAME) == 0 && std::strcmp(co->getPluginVersion(), kVERSION) == 0
            && std::strcmp(co->getPluginNamespace(), kNAMESPACE) == 0,
        "plugin name/version/namespace equal the creator's");
    c.check(bu != nullptr && bu->getNbOutputs() == 1, "getNbOutputs is 1");

    logger.clear();
    Fields none;
    PluginPtr d = create(creator, std::move(none));
    c.check(d != nullptr && fieldsHold(runtime(d.get())->getFieldsToSerialize(), Attrs{}),
        "createPlugin without fields takes the op definition's defaults (1,1 / 0,0 / 1,1 / 1 / 1)", logger.all());

    logger.clear();
    Fields onnx = fieldsOf(attrs(1, 1, 1, 1, 1));
    onnx.text("plugin_version", "1").text("plugin_namespace", "torchtrt_ext");
    PluginPtr q = create(creator, std::move(onnx));
    c.check(q != nullptr && logger.size() == 0,
        "createPlugin ignores plugin_version/plugin_namespace silently (ONNX parser fallback)", logger.all());

    logger.clear();
    Fields unknown = fieldsOf(attrs(1, 1, 1, 1, 1));
    unknown.ints("deformable_groups", {2});
    PluginPtr u = create(creator, std::move(unknown));
    c.check(u != nullptr && logger.hasWarning("deformable_groups"), "createPlugin warns about an unknown field and ignores it",
        logger.all());
}

void checkOutputTypes(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    PluginPtr p = create(creator, fieldsOf(Attrs{}));
    IPluginV3OneBuild* bu = build(p.get());
    if (!c.check(bu != nullptr, "plugin for getOutputDataTypes"))
    {
        return;
    }
    for (int32_t nb = 3; nb <= 5; ++nb)
    {
        for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
        {
            std::vector<DataType> ins(static_cast<size_t>(nb), t);
            DataType out = DataType::kINT8;
            c.check(bu->getOutputDataTypes(&out, 1, ins.data(), nb) == 0 && out == t,
                std::string("getOutputDataTypes(") + std::to_string(nb) + " x " + dataTypeName(t) + ") is the input type");
        }
    }
    for (DataType t : {DataType::kINT32, DataType::kINT8, DataType::kBOOL})
    {
        logger.clear();
        std::vector<DataType> ins(3, t);
        DataType out = DataType::kFLOAT;
        c.check(bu->getOutputDataTypes(&out, 1, ins.data(), 3) != 0 && logger.hasError({"DeformConv2d::getOutputDataTypes", dataTypeName(t)}),
            std::string("getOutputDataTypes(") + dataTypeName(t) + ") fails with a logged error", logger.all());
    }
    logger.clear();
    std::vector<DataType> mixed = {DataType::kHALF, DataType::kHALF, DataType::kFLOAT, DataType::kHALF};
    DataType out = DataType::kFLOAT;
    c.check(bu->getOutputDataTypes(&out, 1, mixed.data(), 4) != 0 && logger.hasError({"weight has type kFLOAT"}),
        "getOutputDataTypes with a float32 weight among float16 inputs fails with a logged error", logger.all());
    for (int32_t nb : {2, 6})
    {
        logger.clear();
        std::vector<DataType> ins(static_cast<size_t>(nb), DataType::kFLOAT);
        c.check(bu->getOutputDataTypes(&out, 1, ins.data(), nb) != 0 && logger.hasError({"3 to 5 inputs"}),
            "getOutputDataTypes with " + std::to_string(nb) + " inputs fails with a logged error", logger.all());
    }
}

void checkOutputShapes(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    // Static shapes: the output equals the formula, constant.
    std::vector<Problem> const statics = {
        {2, 8, 16, 9, 10, 3, 3, attrs(1, 1, 1, 1, 1), 3},
        {1, 16, 16, 15, 17, 3, 3, attrs(2, 1, 1, 1, 1), 4},
        {2, 16, 16, 13, 12, 3, 3, attrs(1, 2, 2, 1, 1), 5},
        {2, 32, 48, 12, 10, 3, 3, attrs(1, 1, 1, 2, 2), 5},
        {1, 6, 10, 11, 7, 5, 1, attrs(2, 2, 1, 1, 2), 4},
    };
    for (Problem const& pr : statics)
    {
        PluginPtr p = create(creator, fieldsOf(pr.a));
        IPluginV3OneBuild* bu = build(p.get());
        TestExprBuilder eb;
        std::vector<DimsExprs> ins;
        for (auto const& s : pr.shapes())
        {
            DimsExprs e{};
            e.nbDims = static_cast<int32_t>(s.size());
            for (size_t i = 0; i < s.size(); ++i)
            {
                e.d[i] = eb.constant(s[i]);
            }
            ins.push_back(e);
        }
        DimsExprs out{};
        int32_t const status = bu != nullptr ? bu->getOutputShapes(ins.data(), pr.nbInputs, nullptr, 0, &out, 1, eb) : -2;
        std::vector<int64_t> const want = pr.outShape();
        bool ok = status == 0 && out.nbDims == 4;
        std::string got;
        for (int32_t i = 0; ok && i < 4; ++i)
        {
            ok = out.d[i] != nullptr && out.d[i]->isConstant() && out.d[i]->getConstantValue() == want[i];
            got += TestExprBuilder::describe(out.d[i]) + " ";
        }
        c.check(ok, "getOutputShapes static " + pr.text() + ": constant [N, C_out, H_out, W_out]",
            "status=" + std::to_string(status) + " got " + got + logger.all());
    }

    // Dynamic N, H, W: symbolic output sizes that evaluate to the formula for every H, W.
    for (Attrs const& a : {attrs(1, 1, 1, 1, 1), attrs(2, 1, 1, 1, 1), attrs(1, 2, 2, 1, 2), attrs(3, 0, 2, 2, 1)})
    {
        for (int32_t kernel : {1, 3})
        {
            PluginPtr p = create(creator, fieldsOf(a));
            IPluginV3OneBuild* bu = build(p.get());
            TestExprBuilder eb;
            IDimensionExpr const* n = eb.symbol("N");
            IDimensionExpr const* h = eb.symbol("H");
            IDimensionExpr const* w = eb.symbol("W");
            IDimensionExpr const* ho = eb.symbol("HO"); // offset/mask spatial dims: their own symbols
            IDimensionExpr const* wo = eb.symbol("WO");
            int64_t const taps = static_cast<int64_t>(kernel) * kernel;
            auto dims = [](std::vector<IDimensionExpr const*> const& v) {
                DimsExprs e{};
                e.nbDims = static_cast<int32_t>(v.size());
                for (size_t i = 0; i < v.size(); ++i)
                {
                    e.d[i] = v[i];
                }
                return e;
            };
            std::vector<DimsExprs> ins = {dims({n, eb.constant(8), h, w}), dims({n, eb.constant(2 * a.offsetGroups * taps), ho, wo}),
                dims({eb.constant(12), eb.constant(8 / a.groups), eb.constant(kernel), eb.constant(kernel)}),
                dims({eb.constant(12)}), dims({n, eb.constant(a.offsetGroups * taps), ho, wo})};
            DimsExprs out{};
            std::string const label = a.text() + " kernel " + std::to_string(kernel);
            int32_t const status = bu != nullptr ? bu->getOutputShapes(ins.data(), 5, nullptr, 0, &out, 1, eb) : -2;
            bool ok = status == 0 && out.nbDims == 4 && out.d[0] == n && out.d[1] != nullptr && out.d[1]->isConstant()
                && out.d[1]->getConstantValue() == 12 && out.d[2] != nullptr && !out.d[2]->isConstant()
                && out.d[3] != nullptr && !out.d[3]->isConstant();
            std::string bad;
            for (int64_t hv : {7, 8, 9, 16, 33, 64, 641})
            {
                for (int64_t wv : {6, 9, 40})
                {
                    Env const env = {{"N", 3}, {"H", hv}, {"W", wv}, {"HO", 0}, {"WO", 0}};
                    int64_t const eh = convOut(hv, kernel, a.stride[0], a.padding[0], a.dilation[0]);
                    int64_t const ew = convOut(wv, kernel, a.stride[1], a.padding[1], a.dilation[1]);
                    if (eh < 1 || ew < 1)
                    {
                        continue;
                    }
                    int64_t const gh = ok ? TestExprBuilder::evaluate(out.d[2], env) : -1;
                    int64_t const gw = ok ? TestExprBuilder::evaluate(out.d[3], env) : -1;
                    if (gh != eh || gw != ew)
                    {
                        bad += "H=" + std::to_string(hv) + " W=" + std::to_string(wv) + ": got " + std::to_string(gh) + "x"
                            + std::to_string(gw) + ", want " + std::to_string(eh) + "x" + std::to_string(ew) + "; ";
                    }
                }
            }
            c.check(ok && bad.empty(),
                "getOutputShapes dynamic [N,8,H,W] " + label + ": N passes through, C_out constant, H_out/W_out "
                    + "expressions evaluate to the formula",
                "status=" + std::to_string(status) + " H_out=" + TestExprBuilder::describe(out.d[2]) + " " + bad
                    + logger.all());
        }
    }

    // Errors: a constant empty output; a wrong rank; a wrong input count.
    PluginPtr p = create(creator, fieldsOf(attrs(1, 0, 1, 1, 1)));
    IPluginV3OneBuild* bu = build(p.get());
    if (bu == nullptr)
    {
        return;
    }
    TestExprBuilder eb;
    auto constDims = [&](std::vector<int64_t> const& v) {
        DimsExprs e{};
        e.nbDims = static_cast<int32_t>(v.size());
        for (size_t i = 0; i < v.size(); ++i)
        {
            e.d[i] = eb.constant(v[i]);
        }
        return e;
    };
    DimsExprs out{};
    std::vector<DimsExprs> tiny = {constDims({1, 4, 2, 2}), constDims({1, 18, 1, 1}), constDims({4, 4, 3, 3})};
    logger.clear();
    c.check(bu->getOutputShapes(tiny.data(), 3, nullptr, 0, &out, 1, eb) != 0
            && logger.hasError({"DeformConv2d::getOutputShapes", "expected >= 1"}),
        "getOutputShapes rejects a 2x2 input with a 3x3 kernel and no padding (empty output)", logger.all());
    std::vector<DimsExprs> rank3 = {constDims({1, 4, 8}), constDims({1, 18, 6, 6}), constDims({4, 4, 3, 3})};
    logger.clear();
    c.check(bu->getOutputShapes(rank3.data(), 3, nullptr, 0, &out, 1, eb) != 0
            && logger.hasError({"DeformConv2d::getOutputShapes", "input has rank 3"}),
        "getOutputShapes rejects a rank-3 input with a logged error", logger.all());
    std::vector<DimsExprs> bias2 = {constDims({1, 4, 8, 8}), constDims({1, 18, 6, 6}), constDims({4, 4, 3, 3}), constDims({4, 1})};
    logger.clear();
    c.check(bu->getOutputShapes(bias2.data(), 4, nullptr, 0, &out, 1, eb) != 0 && logger.hasError({"bias has rank 2"}),
        "getOutputShapes rejects a rank-2 bias with a logged error", logger.all());
    logger.clear();
    c.check(bu->getOutputShapes(bias2.data(), 2, nullptr, 0, &out, 1, eb) != 0 && logger.hasError({"3 to 5 inputs"}),
        "getOutputShapes rejects 2 inputs with a logged error", logger.all());
}

void checkFormatMatrix(Checker& c, IPluginCreatorV3One* creator)
{
    PluginPtr p = create(creator, fieldsOf(Attrs{}));
    IPluginV3OneBuild* bu = build(p.get());
    if (!c.check(bu != nullptr, "plugin for supportsFormatCombination"))
    {
        return;
    }
    auto supported = [](DataType t) { return t == DataType::kFLOAT || t == DataType::kHALF || t == DataType::kBF16; };
    int32_t const nbTypes = EnumMax<DataType>();
    int32_t const nbFormats = EnumMax<TensorFormat>();
    Problem const pr{2, 8, 8, 6, 6, 3, 3, attrs(1, 1, 1, 1, 1), 5};
    for (int32_t nbIn = 3; nbIn <= 5; ++nbIn)
    {
        std::vector<std::vector<int64_t>> shapes = pr.shapes();
        shapes.resize(static_cast<size_t>(nbIn));
        shapes.push_back(pr.outShape());
        int32_t asked = 0;
        int32_t accepted = 0;
        std::string wrong;
        for (int32_t ti = 0; ti < nbTypes; ++ti)
        {
            for (int32_t fi = 0; fi < nbFormats; ++fi)
            {
                DataType const t = static_cast<DataType>(ti);
                TensorFormat const f = static_cast<TensorFormat>(fi);
                std::vector<DynamicPluginTensorDesc> io = dynDescsOf(shapes, t);
                io[0] = dynDesc(shapes[0], t, f);
                bool const channelsLast = (f == TensorFormat::kHWC && t == DataType::kFLOAT)
                    || (f == TensorFormat::kHWC8 && (t == DataType::kHALF || t == DataType::kBF16)); // C = 8
                bool const expect0 = (f == TensorFormat::kLINEAR && supported(t)) || channelsLast;
                bool const got0 = bu->supportsFormatCombination(0, io.data(), nbIn, 1);
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
                for (int32_t pos = 1; pos <= nbIn; ++pos)
                {
                    for (int32_t to = 0; to < nbTypes; ++to)
                    {
                        for (int32_t fo = 0; fo < nbFormats; ++fo)
                        {
                            io[static_cast<size_t>(pos)] = dynDesc(shapes[static_cast<size_t>(pos)], static_cast<DataType>(to),
                                static_cast<TensorFormat>(fo));
                            bool const expect = static_cast<TensorFormat>(fo) == TensorFormat::kLINEAR && to == ti;
                            bool const got = bu->supportsFormatCombination(pos, io.data(), nbIn, 1);
                            ++asked;
                            accepted += got ? 1 : 0;
                            if (got != expect)
                            {
                                wrong += "pos" + std::to_string(pos) + " in type#" + std::to_string(ti) + " type#"
                                    + std::to_string(to) + " format#" + std::to_string(fo) + "; ";
                            }
                        }
                    }
                    io[static_cast<size_t>(pos)] = dynDesc(shapes[static_cast<size_t>(pos)], t); // chosen: same type
                }
            }
        }
        c.check(wrong.empty() && accepted == 6 * (1 + nbIn),
            "supportsFormatCombination matrix with " + std::to_string(nbIn) + " inputs (" + std::to_string(asked)
                + " queries): LINEAR float32/float16/bfloat16, the input also kHWC float32 or kHWC8 float16/bfloat16,"
                  " every tensor the input's type, every other one LINEAR",
            wrong + " accepted=" + std::to_string(accepted));
        // kHWC8 pads the channels to a multiple of 8: 12 or unknown channels would not be the launcher's layout
        for (int64_t channels : {int64_t{12}, int64_t{-1}})
        {
            std::vector<std::vector<int64_t>> padded = shapes;
            padded[0][1] = channels;
            std::vector<DynamicPluginTensorDesc> hwc8 = dynDescsOf(padded, DataType::kHALF);
            hwc8[0] = dynDesc(padded[0], DataType::kHALF, TensorFormat::kHWC8);
            c.check(!bu->supportsFormatCombination(0, hwc8.data(), nbIn, 1),
                "supportsFormatCombination refuses a kHWC8 input of " + std::to_string(channels) + " channels ("
                    + std::to_string(nbIn) + " inputs)");
        }
        std::vector<DynamicPluginTensorDesc> io = dynDescsOf(shapes, DataType::kFLOAT);
        c.check(!bu->supportsFormatCombination(nbIn + 1, io.data(), nbIn, 1)
                && !bu->supportsFormatCombination(-1, io.data(), nbIn, 1),
            "supportsFormatCombination rejects out-of-range positions (" + std::to_string(nbIn) + " inputs)");
    }
}

void checkConfigure(Checker& c, Library const& lib, IPluginCreatorV3One* creator, TestLogger& logger)
{
    Attrs const a = attrs(1, 1, 1, 2, 2);
    PluginPtr p = create(creator, fieldsOf(a));
    IPluginV3OneBuild* bu = build(p.get());
    IPluginV3OneRuntime* ru = runtime(p.get());
    if (!c.check(bu != nullptr && ru != nullptr, "plugin for configurePlugin/onShapeChange"))
    {
        return;
    }
    // [N, 16, H, W] with 3x3 weights, groups 2, offset groups 2: offset 36 channels, mask 18.
    std::vector<std::vector<int64_t>> const dyn = {{-1, 16, -1, -1}, {-1, 36, -1, -1}, {24, 8, 3, 3}, {24}, {-1, 18, -1, -1}};
    std::vector<int64_t> const dynOut = {-1, 24, -1, -1};
    for (int32_t nb = 3; nb <= 5; ++nb)
    {
        for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
        {
            std::vector<std::vector<int64_t>> shapes(dyn.begin(), dyn.begin() + nb);
            std::vector<DynamicPluginTensorDesc> in = dynDescsOf(shapes, t);
            DynamicPluginTensorDesc out = dynDesc(dynOut, t);
            logger.clear();
            c.check(bu->configurePlugin(in.data(), nb, &out, 1) == 0,
                "configurePlugin accepts " + std::to_string(nb) + " inputs of " + dataTypeName(t) + " with dynamic N/H/W",
                logger.all());
        }
    }
    // getWorkspaceSize: the launcher's size at the profile's largest shapes.
    {
        std::vector<std::vector<int64_t>> shapes(dyn.begin(), dyn.end());
        std::vector<DynamicPluginTensorDesc> in = dynDescsOf(shapes, DataType::kHALF);
        for (auto& d : in)
        {
            if (d.desc.dims.nbDims == 4 && d.desc.dims.d[0] < 0)
            {
                d.max.d[0] = 8; // N up to 8, H/W up to 64 (dynDesc)
            }
        }
        DynamicPluginTensorDesc out = dynDesc(dynOut, DataType::kHALF);
        auto const workspaceSize = lib.symbol<WorkspaceSizeFn>("torchtrt_ext_deform_conv2d_workspace_size");
        TorchtrtExtDeformConv2dDesc const desc{8, 16, 64, 64, 24, 3, 3, 1, 1, 1, 1, 1, 1, 2, 2,
            TORCHTRT_EXT_DCN_FLOAT16, TORCHTRT_EXT_DCN_NCHW};
        int64_t const want = workspaceSize != nullptr ? workspaceSize(&desc) : -2;
        size_t const got = bu->getWorkspaceSize(in.data(), 5, &out, 1);
        c.check(want > 0 && got == static_cast<size_t>(want),
            "getWorkspaceSize is torchtrt_ext_deform_conv2d_workspace_size at the profile's max dims (N=8, H=W=64, fp16)",
            "got " + std::to_string(got) + " want " + std::to_string(want));
    }
    struct Bad
    {
        std::string name;
        std::vector<std::vector<int64_t>> shapes;
        std::vector<int64_t> out;
        std::vector<std::string> logged;
        DataType weightType;
    };
    std::vector<Bad> const bads = {
        {"weight channels * groups != input channels", {{-1, 16, -1, -1}, {-1, 36, -1, -1}, {24, 16, 3, 3}}, dynOut,
            {"weight has shape", "C_in/groups"}, DataType::kFLOAT},
        {"output channels not divisible by groups", {{-1, 16, -1, -1}, {-1, 36, -1, -1}, {25, 8, 3, 3}}, {-1, 25, -1, -1},
            {"25 output channels", "groups=2"}, DataType::kFLOAT},
        {"offset channels != 2 * offset_groups * kh * kw", {{-1, 16, -1, -1}, {-1, 18, -1, -1}, {24, 8, 3, 3}}, dynOut,
            {"offset has 18 channels", "= 36"}, DataType::kFLOAT},
        {"mask channels != offset_groups * kh * kw", {{-1, 16, -1, -1}, {-1, 36, -1, -1}, {24, 8, 3, 3}, {24}, {-1, 9, -1, -1}},
            dynOut, {"mask has 9 channels", "= 18"}, DataType::kFLOAT},
        {"bias of the wrong size", {{-1, 16, -1, -1}, {-1, 36, -1, -1}, {24, 8, 3, 3}, {12}}, dynOut, {"bias has shape", "[24]"},
            DataType::kFLOAT},
        {"input channels not divisible by offset_groups", {{-1, 15, -1, -1}, {-1, 36, -1, -1}, {24, -1, 3, 3}}, dynOut,
            {"15 channels", "offset_groups=2"}, DataType::kFLOAT},
        {"dynamic kernel size", {{-1, 16, -1, -1}, {-1, 36, -1, -1}, {24, 8, -1, 3}}, dynOut, {"kernel size", "static"},
            DataType::kFLOAT},
        {"rank-3 offset", {{-1, 16, -1, -1}, {-1, 36, -1}, {24, 8, 3, 3}}, dynOut, {"offset has shape", "rank 4"},
            DataType::kFLOAT},
        {"weight type unlike the input's", {{-1, 16, -1, -1}, {-1, 36, -1, -1}, {24, 8, 3, 3}}, dynOut,
            {"weight has type kHALF"}, DataType::kHALF},
    };
    for (Bad const& b : bads)
    {
        std::vector<DynamicPluginTensorDesc> in = dynDescsOf(b.shapes, DataType::kFLOAT);
        in[2].desc.type = b.weightType;
        DynamicPluginTensorDesc out = dynDesc(b.out, DataType::kFLOAT);
        logger.clear();
        std::vector<std::string> parts = b.logged;
        parts.emplace_back("DeformConv2d::configurePlugin");
        c.check(bu->configurePlugin(in.data(), static_cast<int32_t>(in.size()), &out, 1) != 0 && logger.hasError(parts),
            "configurePlugin rejects " + b.name + " with a logged error", logger.all());
    }

    // onShapeChange: concrete shapes, output checked against the formula.
    Problem const pr{2, 16, 24, 10, 9, 3, 3, a, 5};
    std::vector<PluginTensorDesc> in = descsOf(pr, DataType::kBF16);
    PluginTensorDesc out = desc(pr.outShape(), DataType::kBF16);
    c.check(ru->onShapeChange(in.data(), 5, &out, 1) == 0, "onShapeChange accepts " + pr.text(), logger.all());
    logger.clear();
    PluginTensorDesc wrong = desc({2, 24, 9, 9}, DataType::kBF16);
    c.check(ru->onShapeChange(in.data(), 5, &wrong, 1) != 0 && logger.hasError({"DeformConv2d::onShapeChange", "the output has shape"}),
        "onShapeChange rejects an output shape unlike [N, C_out, H_out, W_out]", logger.all());
    logger.clear();
    in[1] = desc({2, 36, 9, 9}, DataType::kBF16);
    c.check(ru->onShapeChange(in.data(), 5, &out, 1) != 0 && logger.hasError({"offset has shape", "spatial size 10x9"}),
        "onShapeChange rejects an offset whose spatial size is not the output's", logger.all());
    logger.clear();
    in = descsOf(pr, DataType::kBF16);
    in[4] = desc({3, 18, 10, 9}, DataType::kBF16);
    c.check(ru->onShapeChange(in.data(), 5, &out, 1) != 0 && logger.hasError({"mask has batch 3"}),
        "onShapeChange rejects a mask of another batch", logger.all());
}

void checkEnqueueBeforeShape(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    PluginPtr p = create(creator, fieldsOf(Attrs{}), TensorRTPhase::kRUNTIME);
    IPluginV3OneRuntime* ru = runtime(p.get());
    Problem const pr{1, 4, 4, 5, 5, 3, 3, Attrs{}, 3};
    std::vector<PluginTensorDesc> in = descsOf(pr, DataType::kFLOAT);
    PluginTensorDesc out = desc(pr.outShape(), DataType::kFLOAT);
    void const* inputs[3] = {nullptr, nullptr, nullptr};
    void* outputs[1] = {nullptr};
    logger.clear();
    c.check(ru != nullptr && ru->enqueue(in.data(), &out, inputs, outputs, nullptr, nullptr) != 0
            && logger.hasError({"DeformConv2d::enqueue", "before configurePlugin/onShapeChange"}),
        "enqueue before onShapeChange fails with a logged error (the input count is unknown)", logger.all());
    std::vector<PluginTensorDesc> five = descsOf(Problem{1, 4, 4, 5, 5, 3, 3, Attrs{}, 5}, DataType::kFLOAT);
    c.check(ru != nullptr && ru->onShapeChange(five.data(), 5, &out, 1) == 0, "onShapeChange with 5 inputs", logger.all());
    void const* five_in[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
    logger.clear();
    c.check(ru != nullptr && ru->enqueue(five.data(), &out, five_in, outputs, nullptr, nullptr) != 0
            && logger.hasError({"DeformConv2d::enqueue", "null input or output buffer"}),
        "enqueue with null buffers fails with a logged error before any launch", logger.all());
    Problem const empty{0, 4, 4, 5, 5, 3, 3, Attrs{}, 5};
    std::vector<PluginTensorDesc> e = descsOf(empty, DataType::kFLOAT);
    PluginTensorDesc eo = desc(empty.outShape(), DataType::kFLOAT);
    c.check(ru != nullptr && ru->onShapeChange(e.data(), 5, &eo, 1) == 0
            && ru->enqueue(e.data(), &eo, five_in, outputs, nullptr, nullptr) == 0,
        "enqueue of an empty batch succeeds without touching memory", logger.all());
}

void checkSerializationRoundTrip(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    Attrs uneven;
    uneven.stride[0] = 2;
    uneven.stride[1] = 1;
    uneven.padding[0] = 0;
    uneven.padding[1] = 3;
    uneven.dilation[0] = 1;
    uneven.dilation[1] = 4;
    uneven.groups = 4;
    uneven.offsetGroups = 8;
    for (Attrs const& a : {Attrs{}, attrs(2, 1, 2, 2, 2), uneven})
    {
        PluginPtr p = create(creator, fieldsOf(a));
        IPluginV3OneRuntime* ru = runtime(p.get());
        if (!c.check(ru != nullptr, "plugin for serialization " + a.text(), logger.all()))
        {
            continue;
        }
        PluginFieldCollection const* fc = ru->getFieldsToSerialize();
        c.check(fieldsHold(fc, a), "getFieldsToSerialize " + a.text() + ": exactly the five fields", describeFields(fc));
        logger.clear();
        PluginPtr r(creator->createPlugin(kNAME, fc, TensorRTPhase::kRUNTIME));
        IPluginV3OneRuntime* rr = runtime(r.get());
        IPluginV3OneBuild* pb = build(p.get());
        IPluginV3OneBuild* rb = build(r.get());
        bool const equal = rr != nullptr && fieldsHold(rr->getFieldsToSerialize(), a) && pb != nullptr && rb != nullptr
            && std::strcmp(pb->getTimingCacheID(), rb->getTimingCacheID()) == 0
            && std::strcmp(core(r.get())->getPluginNamespace(), kNAMESPACE) == 0;
        c.check(equal, "round trip " + a.text() + ": createPlugin(getFieldsToSerialize(), kRUNTIME) gives an equal plugin",
            logger.all());
    }
    PluginPtr a = create(creator, fieldsOf(attrs(1, 1, 1, 1, 1)));
    PluginPtr b = create(creator, fieldsOf(attrs(2, 1, 1, 1, 1)));
    c.check(a && b && std::strcmp(build(a.get())->getTimingCacheID(), build(b.get())->getTimingCacheID()) != 0,
        "different attributes give different timing-cache IDs");
}

void checkCloneIndependence(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    Attrs const a = attrs(2, 1, 2, 2, 2);
    PluginPtr original = create(creator, fieldsOf(a));
    if (!c.check(original != nullptr, "plugin for clone"))
    {
        return;
    }
    PluginPtr clone(original->clone());
    c.check(clone != nullptr && clone.get() != original.get() && runtime(clone.get()) != runtime(original.get()),
        "clone returns a new object with capability interfaces of its own");
    if (!clone)
    {
        return;
    }
    PluginFieldCollection const* fo = runtime(original.get())->getFieldsToSerialize();
    PluginFieldCollection const* fcl = runtime(clone.get())->getFieldsToSerialize();
    bool disjoint = fo != fcl && fo != nullptr && fcl != nullptr && fo->fields != fcl->fields;
    for (int32_t i = 0; disjoint && i < fo->nbFields && i < fcl->nbFields; ++i)
    {
        disjoint = fo->fields[i].data != fcl->fields[i].data;
    }
    c.check(fieldsHold(fcl, a) && disjoint, "clone holds equal fields in storage of its own", describeFields(fcl));
    // Shapes set on one (3 inputs, float32) and the other (5 inputs, float16) stay apart.
    Problem const p3{1, 8, 8, 9, 9, 3, 3, a, 3};
    Problem const p5{2, 8, 4, 7, 11, 3, 3, a, 5};
    std::vector<PluginTensorDesc> i3 = descsOf(p3, DataType::kFLOAT);
    std::vector<PluginTensorDesc> i5 = descsOf(p5, DataType::kHALF);
    PluginTensorDesc o3 = desc(p3.outShape(), DataType::kFLOAT);
    PluginTensorDesc o5 = desc(p5.outShape(), DataType::kHALF);
    c.check(runtime(clone.get())->onShapeChange(i5.data(), 5, &o5, 1) == 0
            && runtime(original.get())->onShapeChange(i3.data(), 3, &o3, 1) == 0,
        "clone and original take different shapes and input counts", logger.all());
    original.reset();
    c.check(fieldsHold(runtime(clone.get())->getFieldsToSerialize(), a), "clone keeps its fields after the original is deleted");
    TestExprBuilder eb;
    std::vector<DimsExprs> ins(3);
    std::vector<std::vector<int64_t>> const shapes = {{1, 8, 9, 9}, {1, 36, 5, 5}, {8, 4, 3, 3}};
    for (size_t i = 0; i < 3; ++i)
    {
        ins[i].nbDims = 4;
        for (int32_t k = 0; k < 4; ++k)
        {
            ins[i].d[k] = eb.constant(shapes[i][static_cast<size_t>(k)]);
        }
    }
    DimsExprs out{};
    c.check(build(clone.get())->getOutputShapes(ins.data(), 3, nullptr, 0, &out, 1, eb) == 0 && out.nbDims == 4
            && out.d[2]->getConstantValue() == convOut(9, 3, 2, 1, 2),
        "clone still computes output shapes after the original is deleted", logger.all());
    PluginPtr grandchild(clone->clone());
    clone.reset();
    c.check(grandchild != nullptr && fieldsHold(runtime(grandchild.get())->getFieldsToSerialize(), a), "a clone of a clone outlives both");
    TestResourceContext ctx1;
    TestResourceContext ctx2;
    PluginPtr c1(grandchild ? runtime(grandchild.get())->attachToContext(&ctx1) : nullptr);
    PluginPtr c2(grandchild ? runtime(grandchild.get())->attachToContext(&ctx2) : nullptr);
    grandchild.reset();
    c.check(c1 && c2 && c1.get() != c2.get() && fieldsHold(runtime(c1.get())->getFieldsToSerialize(), a)
            && fieldsHold(runtime(c2.get())->getFieldsToSerialize(), a),
        "attachToContext gives a new plugin per context that outlives its source");
}

void checkBadFields(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    auto with = [](char const* name, std::vector<int32_t> const& v) {
        return [name, v] {
            Fields f;
            f.ints(name, v);
            return f;
        };
    };
    int64_t const wide[2] = {1, 1};
    float const real[2] = {1.0F, 1.0F};
    std::vector<BadFields> const cases = {
        {"stride 0", with("stride", {0, 1}), {"stride", "values >= 1"}},
        {"stride -2", with("stride", {1, -2}), {"stride", "values >= 1"}},
        {"dilation 0", with("dilation", {1, 0}), {"dilation", "values >= 1"}},
        {"padding -1", with("padding", {-1, 0}), {"padding", "values >= 0"}},
        {"groups 0", with("groups", {0}), {"groups", "value >= 1"}},
        {"offset_groups -1", with("offset_groups", {-1}), {"offset_groups", "value >= 1"}},
        {"stride with 1 element", with("stride", {2}), {"stride", "1 elements", "expected 2"}},
        {"padding with 3 elements", with("padding", {1, 1, 1}), {"padding", "3 elements", "expected 2"}},
        {"groups with 2 elements", with("groups", {1, 1}), {"groups", "2 elements", "expected 1"}},
        {"stride as kINT64", [wide] { Fields f; f.raw("stride", wide, sizeof(wide), PluginFieldType::kINT64, 2); return f; },
            {"stride", "kINT64", "expected kINT32"}},
        {"dilation as kFLOAT32", [real] { Fields f; f.raw("dilation", real, sizeof(real), PluginFieldType::kFLOAT32, 2); return f; },
            {"dilation", "kFLOAT32", "expected kINT32"}},
        {"offset_groups without data", [] { Fields f; f.raw("offset_groups", nullptr, 0, PluginFieldType::kINT32, 1); return f; },
            {"offset_groups", "no data"}},
        {"field without a name", [] { Fields f; f.ints(nullptr, {1}); return f; }, {"no name"}},
    };
    checkRejectedFields(c, creator, logger, cases);
}

void checkRegistration(Checker& c, Library const& lib)
{
    if (!c.check(lib.registerPlugins != nullptr, "torchtrt_ext_register_plugins is exported"))
    {
        return;
    }
    TestRegistry registry;
    c.check(lib.registerPlugins(&registry, "dcn_models") && registry.registerCalls == torchtrt_ext::plugins::kNB_CREATORS,
        "torchtrt_ext_register_plugins(registry, \"dcn_models\") registers both creators");
    auto* creator = TestRegistry::asV3(registry.getCreator(kNAME, kVERSION, "dcn_models"));
    c.check(creator != nullptr && std::strcmp(creator->getPluginNamespace(), "dcn_models") == 0,
        "the registry holds DeformConv2d 1 under namespace dcn_models");
    c.check(lib.registerPlugins(&registry, "dcn_models") && registry.registerCalls == torchtrt_ext::plugins::kNB_CREATORS,
        "registering the same namespace again adds no duplicate");
}

int32_t runCpu(Library const& lib, TestLogger& logger)
{
    Checker c;
    IPluginCreatorV3One* creator = nullptr;
    checkCreators(c, lib, creator);
    if (creator != nullptr)
    {
        checkCreateAndCapabilities(c, creator, logger);
        checkOutputTypes(c, creator, logger);
        checkOutputShapes(c, creator, logger);
        checkFormatMatrix(c, creator);
        checkConfigure(c, lib, creator, logger);
        checkEnqueueBeforeShape(c, creator, logger);
        checkSerializationRoundTrip(c, creator, logger);
        checkCloneIndependence(c, creator, logger);
        checkBadFields(c, creator, logger);
        checkRegistration(c, lib);
    }
    std::printf("harness cpu: %d checks, %d failed\n", c.count, c.failures);
    return c.failures;
}

// ------------------------------------------------------------------------------------------------ gpu checks
//! Bilinear sample of one channel plane with torchvision's border rules, in double.
double bilinear(float const* plane, int64_t h, int64_t w, double y, double x)
{
    if (!(y > -1.0 && y < static_cast<double>(h) && x > -1.0 && x < static_cast<double>(w)))
    {
        return 0.0;
    }
    double const y0f = std::floor(y);
    double const x0f = std::floor(x);
    int64_t const y0 = static_cast<int64_t>(y0f);
    int64_t const x0 = static_cast<int64_t>(x0f);
    double const ly = y - y0f;
    double const lx = x - x0f;
    auto at = [&](int64_t yy, int64_t xx) {
        return (yy >= 0 && yy < h && xx >= 0 && xx < w) ? static_cast<double>(plane[yy * w + xx]) : 0.0;
    };
    return (1 - ly) * (1 - lx) * at(y0, x0) + (1 - ly) * lx * at(y0, x0 + 1) + ly * (1 - lx) * at(y0 + 1, x0)
        + ly * lx * at(y0 + 1, x0 + 1);
}

//! torchvision.ops.deform_conv2d in double on the (already rounded) inputs.
std::vector<double> reference(Problem const& p, std::vector<std::vector<float>> const& t)
{
    std::vector<float> const& x = t[0];
    std::vector<float> const& off = t[1];
    std::vector<float> const& wt = t[2];
    int64_t const ho = p.ho();
    int64_t const wo = p.wo();
    int64_t const taps = p.kh * p.kw;
    int64_t const cg = p.cin / p.a.groups;
    int64_t const mg = p.cout / p.a.groups;
    int64_t const cpo = p.cin / p.a.offsetGroups;
    std::vector<double> y(static_cast<size_t>(p.n * p.cout * ho * wo));
    std::vector<double> cols(static_cast<size_t>(p.cin * taps));
    for (int64_t n = 0; n < p.n; ++n)
    {
        for (int64_t oy = 0; oy < ho; ++oy)
        {
            for (int64_t ox = 0; ox < wo; ++ox)
            {
                for (int64_t c = 0; c < p.cin; ++c)
                {
                    int64_t const g = c / cpo;
                    for (int64_t i = 0; i < p.kh; ++i)
                    {
                        for (int64_t j = 0; j < p.kw; ++j)
                        {
                            int64_t const k = i * p.kw + j;
                            size_t const o = static_cast<size_t>(((n * 2 * p.a.offsetGroups * taps + g * 2 * taps + 2 * k) * ho + oy) * wo + ox);
                            double const yy = static_cast<double>(oy * p.a.stride[0] - p.a.padding[0] + i * p.a.dilation[0]) + off[o];
                            double const xx = static_cast<double>(ox * p.a.stride[1] - p.a.padding[1] + j * p.a.dilation[1])
                                + off[o + static_cast<size_t>(ho * wo)];
                            double v = bilinear(&x[static_cast<size_t>((n * p.cin + c) * p.h * p.w)], p.h, p.w, yy, xx);
                            if (p.nbInputs == 5)
                            {
                                v *= t[4][static_cast<size_t>(((n * p.a.offsetGroups * taps + g * taps + k) * ho + oy) * wo + ox)];
                            }
                            cols[static_cast<size_t>(c * taps + k)] = v;
                        }
                    }
                }
                for (int64_t oc = 0; oc < p.cout; ++oc)
                {
                    int64_t const gc = oc / mg;
                    double sum = p.nbInputs >= 4 ? static_cast<double>(t[3][static_cast<size_t>(oc)]) : 0.0;
                    for (int64_t c = 0; c < cg; ++c)
                    {
                        for (int64_t k = 0; k < taps; ++k)
                        {
                            sum += static_cast<double>(wt[static_cast<size_t>((oc * cg + c) * taps + k)])
                                * cols[static_cast<size_t>((gc * cg + c) * taps + k)];
                        }
                    }
                    y[static_cast<size_t>(((n * p.cout + oc) * ho + oy) * wo + ox)] = sum;
                }
            }
        }
    }
    return y;
}

//! ||y - ref|| / ||ref|| (the relative error of tests/helpers.py: rel_err).
double relError(std::vector<float> const& y, std::vector<double> const& ref)
{
    double num = 0.0;
    double den = 0.0;
    for (size_t i = 0; i < y.size(); ++i)
    {
        double const d = static_cast<double>(y[i]) - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    double const err = std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
    return std::isnan(err) ? std::numeric_limits<double>::infinity() : err;
}

std::vector<float> randomValues(size_t count, uint32_t& state, float scale, float shift)
{
    std::vector<float> v(count);
    for (float& e : v)
    {
        state = state * 1664525U + 1013904223U;
        e = (static_cast<float>(state >> 8) / static_cast<float>(1U << 24)) * scale + shift;
    }
    return v;
}

//! Inputs of a problem: input/weight/bias uniform, offsets uniform in [-spread, spread) (reaching outside the image),
//! mask in [0, 1).
std::vector<std::vector<float>> makeInputs(Problem const& p, float spread, uint32_t seed)
{
    uint32_t state = seed;
    std::vector<std::vector<float>> t;
    std::vector<std::vector<int64_t>> const shapes = p.shapes();
    for (size_t i = 0; i < shapes.size(); ++i)
    {
        size_t count = 1;
        for (int64_t d : shapes[i])
        {
            count *= static_cast<size_t>(d);
        }
        switch (i)
        {
        case 0: t.push_back(randomValues(count, state, 4.0F, -2.0F)); break;
        case 1: t.push_back(randomValues(count, state, 2.0F * spread, -spread)); break;
        case 2: t.push_back(randomValues(count, state, 0.4F, -0.2F)); break;
        case 3: t.push_back(randomValues(count, state, 2.0F, -1.0F)); break;
        default: t.push_back(randomValues(count, state, 1.0F, 0.0F)); break;
        }
    }
    return t;
}

//! The input [n][c][h][w] of p reordered to [n][h][w][c] (kHWC, and kHWC8 when c is a multiple of 8).
std::vector<float> toChannelsLast(Problem const& p, std::vector<float> const& nchw)
{
    std::vector<float> nhwc(nchw.size());
    for (int64_t n = 0; n < p.n; ++n)
        for (int64_t ch = 0; ch < p.cin; ++ch)
            for (int64_t i = 0; i < p.h * p.w; ++i)
                nhwc[static_cast<size_t>((n * p.h * p.w + i) * p.cin + ch)]
                    = nchw[static_cast<size_t>((n * p.cin + ch) * p.h * p.w + i)];
    return nhwc;
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
    if (!c.check(creator != nullptr, "DeformConv2d creator found"))
    {
        return 1;
    }
    cudaStream_t stream{};
    cudaStreamCreate(&stream);
    struct GpuCase
    {
        char const* name;
        Problem p;
        float spread; // offsets uniform in [-spread, spread)
    };
    std::vector<GpuCase> const cases = {
        {"plain", {2, 8, 16, 9, 10, 3, 3, attrs(1, 1, 1, 1, 1), 3}, 2.0F},
        {"bias", {2, 8, 16, 9, 10, 3, 3, attrs(1, 1, 1, 1, 1), 4}, 2.0F},
        {"bias_mask", {2, 16, 24, 11, 9, 3, 3, attrs(1, 1, 1, 1, 1), 5}, 2.0F},
        {"far_outside", {2, 16, 32, 9, 11, 3, 3, attrs(1, 1, 1, 1, 1), 5}, 12.0F},
        {"stride2", {2, 16, 16, 15, 17, 3, 3, attrs(2, 1, 1, 1, 1), 5}, 2.0F},
        {"dilation2", {2, 16, 16, 13, 12, 3, 3, attrs(1, 2, 2, 1, 1), 4}, 2.0F},
        {"groups2_offset_groups2", {2, 32, 48, 12, 10, 3, 3, attrs(1, 1, 1, 2, 2), 5}, 3.0F},
        {"many_tiles", {1, 24, 130, 21, 23, 3, 3, attrs(1, 1, 1, 1, 1), 5}, 2.0F},
    };
    struct TypeCase
    {
        DataType type;
        char const* name;
        double tolerance;
    };
    std::vector<TypeCase> const types = {{DataType::kFLOAT, "float32", 1e-5}, {DataType::kHALF, "float16", 2e-3},
        {DataType::kBF16, "bfloat16", 1e-2}};
    // These cases also run with the input channels-last (kHWC float32, kHWC8 16-bit; their channels are multiples of 8)
    std::vector<std::string> const channelsLastCases = {"bias_mask", "groups2_offset_groups2"};
    std::ofstream manifest;
    if (!dumpDir.empty())
    {
        manifest.open(dumpDir + "/cases.txt");
    }
    int32_t index = 0;
    std::vector<std::pair<GpuCase, bool>> runs; // (case, channels-last input)
    for (GpuCase const& k : cases)
    {
        runs.emplace_back(k, false);
    }
    for (GpuCase const& k : cases)
    {
        if (std::find(channelsLastCases.begin(), channelsLastCases.end(), k.name) != channelsLastCases.end())
        {
            runs.emplace_back(k, true);
        }
    }
    for (TypeCase const& tc : types)
    {
        for (auto const& [k, channelsLast] : runs)
        {
            Problem const& p = k.p;
            TensorFormat const inputFormat = !channelsLast ? TensorFormat::kLINEAR
                : tc.type == DataType::kFLOAT              ? TensorFormat::kHWC
                                                           : TensorFormat::kHWC8;
            std::string const label = std::string(tc.name) + " " + k.name + (channelsLast ? " channels-last" : "")
                + " (" + p.text() + ")";
            logger.clear();
            // As TensorRT does: build-phase plugin, configured (workspace from the profile), serialized, recreated in
            // the runtime phase, attached to a context, shape set, enqueued.
            Fields f = fieldsOf(p.a);
            PluginPtr built(creator->createPlugin(kNAME, f.collection(), TensorRTPhase::kBUILD));
            std::vector<DynamicPluginTensorDesc> dyn = dynDescsOf(p.shapes(), tc.type);
            dyn[0] = dynDesc(p.shapes()[0], tc.type, inputFormat);
            DynamicPluginTensorDesc dynOut = dynDesc(p.outShape(), tc.type);
            bool ok = built && build(built.get())->configurePlugin(dyn.data(), p.nbInputs, &dynOut, 1) == 0;
            size_t const workspaceBytes = ok ? build(built.get())->getWorkspaceSize(dyn.data(), p.nbInputs, &dynOut, 1) : 0;
            PluginPtr deserialized(ok ? creator->createPlugin(kNAME, runtime(built.get())->getFieldsToSerialize(), TensorRTPhase::kRUNTIME) : nullptr);
            TestResourceContext ctx;
            PluginPtr attached(deserialized ? runtime(deserialized.get())->attachToContext(&ctx) : nullptr);
            built.reset();
            deserialized.reset();
            std::vector<PluginTensorDesc> in = descsOf(p, tc.type);
            in[0].format = inputFormat;
            PluginTensorDesc const out = desc(p.outShape(), tc.type);
            if (!c.check(attached != nullptr && workspaceBytes > 0 && runtime(attached.get())->onShapeChange(in.data(), p.nbInputs, &out, 1) == 0,
                    "enqueue " + label + ": created, configured, workspace sized, deserialized, attached, shape set", logger.all()))
            {
                continue;
            }
            std::vector<std::vector<float>> host = makeInputs(p, k.spread, 77U + static_cast<uint32_t>(index));
            for (auto& v : host)
            {
                v = decode(encode(v, tc.type), tc.type); // the values the device sees
            }
            std::vector<std::unique_ptr<DeviceBuffer>> buffers;
            std::vector<void const*> inputs;
            bool copied = true;
            for (size_t i = 0; i < host.size(); ++i)
            {
                std::vector<uint8_t> const bytes = encode(i == 0 && channelsLast ? toChannelsLast(p, host[0]) : host[i], tc.type);
                buffers.push_back(std::make_unique<DeviceBuffer>(bytes.size()));
                copied = copied && buffers.back()->ptr != nullptr
                    && cudaMemcpy(buffers.back()->ptr, bytes.data(), bytes.size(), cudaMemcpyHostToDevice) == cudaSuccess;
                inputs.push_back(buffers.back()->ptr);
            }
            size_t const outCount = static_cast<size_t>(p.n * p.cout * p.ho() * p.wo());
            DeviceBuffer dout(outCount * elementSize(tc.type));
            DeviceBuffer workspace(workspaceBytes);
            copied = copied && dout.ptr != nullptr && workspace.ptr != nullptr
                && cudaMemset(dout.ptr, 0xFF, outCount * elementSize(tc.type)) == cudaSuccess; // NaN: unwritten shows
            void* outputs[1] = {dout.ptr};
            int32_t const status = copied
                ? runtime(attached.get())->enqueue(in.data(), &out, inputs.data(), outputs, workspace.ptr, stream)
                : -99;
            std::vector<uint8_t> hostOut(outCount * elementSize(tc.type));
            cudaError_t const e = status == 0
                ? cudaMemcpyAsync(hostOut.data(), dout.ptr, hostOut.size(), cudaMemcpyDeviceToHost, stream)
                : cudaErrorUnknown;
            cudaError_t const sync = cudaStreamSynchronize(stream);
            if (!c.check(status == 0 && e == cudaSuccess && sync == cudaSuccess, "enqueue " + label + " runs",
                    "status " + std::to_string(status) + ", " + cudaGetErrorString(e) + " / " + cudaGetErrorString(sync)
                        + " " + logger.all()))
            {
                continue;
            }
            std::vector<float> const y = decode(hostOut, tc.type);
            double const err = relError(y, reference(p, host));
            char detail[128];
            std::snprintf(detail, sizeof(detail), "rel error %.3g, tolerance %.0e", err, tc.tolerance);
            c.check(err < tc.tolerance, "enqueue " + label + " matches the float64 CPU reference (" + detail + ")", detail);
            if (manifest.is_open())
            {
                std::string const stem = dumpDir + "/case" + std::to_string(index);
                char const* const names[5] = {"input", "offset", "weight", "bias", "mask"};
                for (size_t i = 0; i < host.size(); ++i)
                {
                    std::ofstream(stem + "_" + names[i] + ".f32", std::ios::binary)
                        .write(reinterpret_cast<char const*>(host[i].data()), static_cast<std::streamsize>(host[i].size() * 4));
                }
                std::ofstream(stem + "_y.f32", std::ios::binary)
                    .write(reinterpret_cast<char const*>(y.data()), static_cast<std::streamsize>(y.size() * 4));
                // index dtype nbInputs input_shape weight_shape stride padding dilation groups offset_groups
                manifest << index << " " << tc.name << " " << p.nbInputs << " " << shapeText(p.shapes()[0]) << " "
                         << shapeText(p.shapes()[2]) << " " << p.a.stride[0] << "," << p.a.stride[1] << " "
                         << p.a.padding[0] << "," << p.a.padding[1] << " " << p.a.dilation[0] << "," << p.a.dilation[1]
                         << " " << p.a.groups << " " << p.a.offsetGroups << "\n";
            }
            ++index;
        }
    }
    c.check(cudaStreamSynchronize(stream) == cudaSuccess && cudaGetLastError() == cudaSuccess, "no CUDA error left behind");
    cudaStreamDestroy(stream);
    std::printf("harness gpu: %d checks, %d failed\n", c.count, c.failures);
    return c.failures;
}
} // namespace

int main(int argc, char** argv)
{
    return harnessMain(argc, argv,
        {[](Library const& lib) { return printFields(lib, kNAME, fieldsOf(Attrs{})); },
            [](Library const& lib, TestLogger& logger, TestLoggerFinder&) { return runCpu(lib, logger); }, runGpu});
}
