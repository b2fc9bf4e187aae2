// Conformance harness for the EfficientNMS_TRT plugin of libtorchtrt_ext_plugins.so: drives it the way TensorRT does,
// with no TensorRT library (only its public headers; logger finder, expression builder, resource context and registry
// are the test doubles of test_doubles.h). The L2Norm and DeformConv2d plugins have harnesses of their own.
//
//   harness_efficient_nms LIB fields             print the creator's advertised and serialized fields
//   harness_efficient_nms LIB cpu                every check that needs no GPU
//   harness_efficient_nms LIB gpu [--dump DIR]   enqueue on device buffers for float32/float16/bfloat16 against a
//                                                brute-force NMS written here from the documented semantics; --dump
//                                                writes inputs and outputs for tests/ops/nms_reference.py
//
// Each check prints "ok   <name>" or "FAIL <name>: <detail>"; the exit status is the number of failures (capped).
#include "NvInferRuntime.h"
#include "kernels/efficient_nms.h"
#include "test_doubles.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

using namespace nvinfer1;
using namespace test_doubles;

namespace
{
constexpr char const* kNAME = "EfficientNMS_TRT";
constexpr int32_t kNB_IN = 2;
constexpr int32_t kNB_OUT = 4;

using WorkspaceSizeFn = int64_t (*)(TorchtrtExtEfficientNmsParams const*);

// ------------------------------------------------------------------------------------------------ helpers
//! The seven fields of the plugin; every value distinct from the others' so that a field written from another
//! member shows.
struct Attrs
{
    float scoreThreshold{0.25F};
    float iouThreshold{0.45F};
    int32_t maxOutputBoxes{100};
    int32_t backgroundClass{-1};
    int32_t scoreActivation{0};
    int32_t classAgnostic{0};
    int32_t boxCoding{0};

    std::string text() const
    {
        char t[160];
        std::snprintf(t, sizeof(t), "score>%.9g iou>%.9g K=%d bg=%d act=%d agnostic=%d coding=%d",
            static_cast<double>(scoreThreshold), static_cast<double>(iouThreshold), maxOutputBoxes, backgroundClass,
            scoreActivation, classAgnostic, boxCoding);
        return t;
    }
};

Fields fieldsOf(Attrs const& a, bool withClassAgnostic = true)
{
    Fields f;
    f.add("score_threshold", a.scoreThreshold, PluginFieldType::kFLOAT32)
        .add("iou_threshold", a.iouThreshold, PluginFieldType::kFLOAT32)
        .add("max_output_boxes", a.maxOutputBoxes, PluginFieldType::kINT32)
        .add("background_class", a.backgroundClass, PluginFieldType::kINT32)
        .add("score_activation", a.scoreActivation, PluginFieldType::kINT32)
        .add("box_coding", a.boxCoding, PluginFieldType::kINT32);
    if (withClassAgnostic)
    {
        f.add("class_agnostic", a.classAgnostic, PluginFieldType::kINT32);
    }
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
        if (f.data != nullptr && f.length == 1 && f.type == PluginFieldType::kINT32)
        {
            text += std::to_string(*static_cast<int32_t const*>(f.data));
        }
        else if (f.data != nullptr && f.length == 1 && f.type == PluginFieldType::kFLOAT32)
        {
            text += std::to_string(*static_cast<float const*>(f.data));
        }
        text += std::string(" (") + fieldTypeName(f.type) + " x" + std::to_string(f.length) + ") ";
    }
    return text;
}

//! True when fc holds exactly the seven fields of `a`, each a scalar of TensorRT's type with a's value (bit-exact).
bool fieldsHold(PluginFieldCollection const* fc, Attrs const& a)
{
    if (fc == nullptr || fc->nbFields != 7 || fc->fields == nullptr)
    {
        return false;
    }
    std::map<std::string, float> const floats = {{"score_threshold", a.scoreThreshold}, {"iou_threshold", a.iouThreshold}};
    std::map<std::string, int32_t> const ints = {{"max_output_boxes", a.maxOutputBoxes},
        {"background_class", a.backgroundClass}, {"score_activation", a.scoreActivation},
        {"class_agnostic", a.classAgnostic}, {"box_coding", a.boxCoding}};
    std::map<std::string, bool> seen;
    for (int32_t i = 0; i < fc->nbFields; ++i)
    {
        PluginField const& f = fc->fields[i];
        if (f.name == nullptr || f.data == nullptr || f.length != 1)
        {
            return false;
        }
        if (floats.count(f.name) != 0)
        {
            float const want = floats.at(f.name);
            if (f.type != PluginFieldType::kFLOAT32 || std::memcmp(f.data, &want, sizeof(float)) != 0)
            {
                return false;
            }
        }
        else if (ints.count(f.name) != 0)
        {
            if (f.type != PluginFieldType::kINT32 || *static_cast<int32_t const*>(f.data) != ints.at(f.name))
            {
                return false;
            }
        }
        else
        {
            return false;
        }
        seen[f.name] = true;
    }
    return seen.size() == 7;
}

//! boxes [B, A, 4], scores [B, A, C]; outputs [B, 1], [B, K, 4], [B, K], [B, K].
std::vector<std::vector<int64_t>> shapesOf(int64_t b, int64_t a, int64_t c, int64_t k)
{
    return {{b, a, 4}, {b, a, c}, {b, 1}, {b, k, 4}, {b, k}, {b, k}};
}

std::vector<DataType> typesOf(DataType t)
{
    return {t, t, DataType::kINT32, t, t, DataType::kINT32};
}

std::vector<PluginTensorDesc> descsOf(std::vector<std::vector<int64_t>> const& shapes, DataType t)
{
    std::vector<DataType> const types = typesOf(t);
    std::vector<PluginTensorDesc> d;
    for (size_t i = 0; i < shapes.size(); ++i)
    {
        d.push_back(desc(shapes[i], types[i]));
    }
    return d;
}

std::vector<DynamicPluginTensorDesc> dynDescsOf(std::vector<std::vector<int64_t>> const& shapes, DataType t)
{
    std::vector<DataType> const types = typesOf(t);
    std::vector<DynamicPluginTensorDesc> d;
    for (size_t i = 0; i < shapes.size(); ++i)
    {
        d.push_back(dynDesc(shapes[i], types[i]));
    }
    return d;
}

// ------------------------------------------------------------------------------------------------ cpu checks
void checkCreators(Checker& c, Library const& lib, IPluginCreatorV3One*& creator)
{
    creator = findCreator(lib, kNAME);
    if (!c.check(creator != nullptr, "getCreators holds EfficientNMS_TRT version 1 in namespace torchtrt_ext"))
    {
        return;
    }
    InterfaceInfo const info = creator->getInterfaceInfo();
    c.check(std::strcmp(info.kind, "PLUGIN CREATOR_V3ONE") == 0 && info.major == 1, "creator interface is PLUGIN CREATOR_V3ONE 1.x");
    PluginFieldCollection const* names = creator->getFieldNames();
    char const* const kNAMES[7] = {"score_threshold", "iou_threshold", "max_output_boxes", "background_class",
        "score_activation", "class_agnostic", "box_coding"};
    bool ok = names != nullptr && names->nbFields == 7;
    for (int32_t i = 0; ok && i < 7; ++i)
    {
        PluginFieldType const want = i < 2 ? PluginFieldType::kFLOAT32 : PluginFieldType::kINT32;
        ok = std::strcmp(names->fields[i].name, kNAMES[i]) == 0 && names->fields[i].type == want
            && names->fields[i].length == 1;
    }
    c.check(ok, "creator advertises TensorRT's seven fields (two kFLOAT32 thresholds, five kINT32)", describeFields(names));
}

void checkCreateAndCapabilities(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    logger.clear();
    PluginPtr p = create(creator, fieldsOf(Attrs{}));
    if (!c.check(p != nullptr, "createPlugin(all fields, kBUILD) returns a plugin", logger.all()))
    {
        return;
    }
    IPluginV3OneCore* co = core(p.get());
    IPluginV3OneBuild* bu = build(p.get());
    IPluginV3OneRuntime* ru = runtime(p.get());
    c.check(co != nullptr && bu != nullptr && ru != nullptr,
        "getCapabilityInterface gives PLUGIN_V3ONE_CORE, PLUGIN_V3ONE_BUILD and PLUGIN_V3ONE_RUNTIME");
    c.check(co != nullptr && std::strcmp(co->getPluginName(), kNAME) == 0 && std::strcmp(co->getPluginVersion(), kVERSION) == 0
            && std::strcmp(co->getPluginNamespace(), kNAMESPACE) == 0,
        "plugin name/version/namespace equal the creator's");
    c.check(bu != nullptr && bu->getNbOutputs() == kNB_OUT, "getNbOutputs is 4");

    Attrs agnostic;
    agnostic.classAgnostic = 1;
    logger.clear();
    PluginPtr q = create(creator, fieldsOf(agnostic, /*withClassAgnostic=*/false));
    c.check(q != nullptr && fieldsHold(runtime(q.get())->getFieldsToSerialize(), Attrs{}),
        "createPlugin without class_agnostic takes 0 (TensorRT's creator does too)", logger.all());

    logger.clear();
    Fields onnx = fieldsOf(Attrs{});
    onnx.text("plugin_version", "1").text("plugin_namespace", "torchtrt_ext");
    PluginPtr o = create(creator, std::move(onnx));
    c.check(o != nullptr && logger.size() == 0,
        "createPlugin ignores plugin_version/plugin_namespace silently (ONNX parser fallback)", logger.all());
}

void checkOutputTypes(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    PluginPtr p = create(creator, fieldsOf(Attrs{}));
    IPluginV3OneBuild* bu = build(p.get());
    if (!c.check(bu != nullptr, "plugin for getOutputDataTypes"))
    {
        return;
    }
    for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
    {
        DataType const ins[kNB_IN] = {t, t};
        DataType outs[kNB_OUT] = {DataType::kINT8, DataType::kINT8, DataType::kINT8, DataType::kINT8};
        c.check(bu->getOutputDataTypes(outs, kNB_OUT, ins, kNB_IN) == 0 && outs[0] == DataType::kINT32 && outs[1] == t
                && outs[2] == t && outs[3] == DataType::kINT32,
            std::string("getOutputDataTypes(") + dataTypeName(t) + "): kINT32, the input type twice, kINT32");
    }
    for (auto const& ins : std::vector<std::vector<DataType>>{{DataType::kINT32, DataType::kINT32},
             {DataType::kHALF, DataType::kFLOAT}})
    {
        logger.clear();
        DataType outs[kNB_OUT];
        c.check(bu->getOutputDataTypes(outs, kNB_OUT, ins.data(), kNB_IN) != 0
                && logger.hasError({"EfficientNMS_TRT::getOutputDataTypes", dataTypeName(ins[0])}),
            std::string("getOutputDataTypes(") + dataTypeName(ins[0]) + ", " + dataTypeName(ins[1])
                + ") fails with a logged error",
            logger.all());
    }
    logger.clear();
    DataType const three[3] = {DataType::kFLOAT, DataType::kFLOAT, DataType::kFLOAT};
    DataType outs[kNB_OUT];
    c.check(bu->getOutputDataTypes(outs, kNB_OUT, three, 3) != 0 && logger.hasError({"anchors input is not supported"}),
        "getOutputDataTypes with the box decoder's third input fails with a logged error", logger.all());
}

void checkOutputShapes(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    for (int32_t k : {1, 7, 300})
    {
        Attrs a;
        a.maxOutputBoxes = k;
        PluginPtr p = create(creator, fieldsOf(a));
        IPluginV3OneBuild* bu = build(p.get());
        TestExprBuilder eb;
        IDimensionExpr const* batch = eb.symbol("B");
        IDimensionExpr const* anchors = eb.symbol("A");
        DimsExprs ins[kNB_IN]{};
        ins[0].nbDims = 3;
        ins[0].d[0] = batch;
        ins[0].d[1] = anchors;
        ins[0].d[2] = eb.constant(4);
        ins[1].nbDims = 3;
        ins[1].d[0] = batch;
        ins[1].d[1] = anchors;
        ins[1].d[2] = eb.constant(80);
        DimsExprs outs[kNB_OUT]{};
        int32_t const status = bu != nullptr ? bu->getOutputShapes(ins, kNB_IN, nullptr, 0, outs, kNB_OUT, eb) : -2;
        auto isConst = [](IDimensionExpr const* e, int64_t v) { return e != nullptr && e->isConstant() && e->getConstantValue() == v; };
        bool const ok = status == 0 && outs[0].nbDims == 2 && TestExprBuilder::equivalent(outs[0].d[0], batch)
            && isConst(outs[0].d[1], 1) && outs[1].nbDims == 3 && TestExprBuilder::equivalent(outs[1].d[0], batch)
            && isConst(outs[1].d[1], k) && isConst(outs[1].d[2], 4) && outs[2].nbDims == 2
            && TestExprBuilder::equivalent(outs[2].d[0], batch) && isConst(outs[2].d[1], k) && outs[3].nbDims == 2
            && TestExprBuilder::equivalent(outs[3].d[0], batch) && isConst(outs[3].d[1], k);
        std::string got;
        for (auto const& o : outs)
        {
            got += "[";
            for (int32_t i = 0; i < o.nbDims; ++i)
            {
                got += TestExprBuilder::describe(o.d[i]) + (i + 1 < o.nbDims ? "," : "");
            }
            got += "] ";
        }
        c.check(ok, "getOutputShapes K=" + std::to_string(k) + ": [B, 1], [B, K, 4], [B, K], [B, K] for a symbolic batch",
            "status=" + std::to_string(status) + " got " + got + logger.all());
    }
}

void checkFormatMatrix(Checker& c, IPluginCreatorV3One* creator)
{
    PluginPtr p = create(creator, fieldsOf(Attrs{}));
    IPluginV3OneBuild* bu = build(p.get());
    if (!c.check(bu != nullptr, "plugin for supportsFormatCombination"))
    {
        return;
    }
    auto floating = [](DataType t) { return t == DataType::kFLOAT || t == DataType::kHALF || t == DataType::kBF16; };
    int32_t const nbTypes = EnumMax<DataType>();
    int32_t const nbFormats = EnumMax<TensorFormat>();
    std::vector<std::vector<int64_t>> const shapes = shapesOf(-1, 1000, 80, 100);
    std::string wrong;
    int32_t asked = 0;
    int32_t accepted = 0;
    for (int32_t ti = 0; ti < nbTypes; ++ti)
    {
        DataType const t = static_cast<DataType>(ti);
        for (int32_t fi = 0; fi < nbFormats; ++fi)
        {
            std::vector<DynamicPluginTensorDesc> io = dynDescsOf(shapes, t);
            io[0] = dynDesc(shapes[0], t, static_cast<TensorFormat>(fi));
            bool const expect0 = static_cast<TensorFormat>(fi) == TensorFormat::kLINEAR && floating(t);
            bool const got0 = bu->supportsFormatCombination(0, io.data(), kNB_IN, kNB_OUT);
            ++asked;
            accepted += got0 ? 1 : 0;
            if (got0 != expect0)
            {
                wrong += "pos0 type#" + std::to_string(ti) + " format#" + std::to_string(fi) + "; ";
            }
        }
        if (!floating(t))
        {
            continue;
        }
        std::vector<DynamicPluginTensorDesc> io = dynDescsOf(shapes, t);
        for (int32_t pos = 1; pos < kNB_IN + kNB_OUT; ++pos)
        {
            for (int32_t to = 0; to < nbTypes; ++to)
            {
                for (int32_t fo = 0; fo < nbFormats; ++fo)
                {
                    DataType const u = static_cast<DataType>(to);
                    io[static_cast<size_t>(pos)] = dynDesc(shapes[static_cast<size_t>(pos)], u, static_cast<TensorFormat>(fo));
                    DataType const wanted = (pos == 2 || pos == 5) ? DataType::kINT32 : t;
                    bool const expect = static_cast<TensorFormat>(fo) == TensorFormat::kLINEAR && u == wanted;
                    bool const got = bu->supportsFormatCombination(pos, io.data(), kNB_IN, kNB_OUT);
                    ++asked;
                    accepted += got ? 1 : 0;
                    if (got != expect)
                    {
                        wrong += "pos" + std::to_string(pos) + " boxes type#" + std::to_string(ti) + " type#"
                            + std::to_string(to) + " format#" + std::to_string(fo) + "; ";
                    }
                }
            }
            io[static_cast<size_t>(pos)] = dynDescsOf(shapes, t)[static_cast<size_t>(pos)];
        }
    }
    c.check(wrong.empty() && accepted == 3 * (kNB_IN + kNB_OUT),
        "supportsFormatCombination matrix (" + std::to_string(asked)
            + " queries): LINEAR only; boxes float32/float16/bfloat16; scores, detection_boxes and detection_scores "
              "the boxes' type; num_detections and detection_classes kINT32",
        wrong + " accepted=" + std::to_string(accepted));
    std::vector<DynamicPluginTensorDesc> io = dynDescsOf(shapes, DataType::kFLOAT);
    c.check(!bu->supportsFormatCombination(kNB_IN + kNB_OUT, io.data(), kNB_IN, kNB_OUT)
            && !bu->supportsFormatCombination(-1, io.data(), kNB_IN, kNB_OUT),
        "supportsFormatCombination rejects out-of-range positions");
}

void checkConfigureAndWorkspace(Checker& c, Library const& lib, IPluginCreatorV3One* creator, TestLogger& logger)
{
    Attrs a;
    a.maxOutputBoxes = 50;
    PluginPtr p = create(creator, fieldsOf(a));
    IPluginV3OneBuild* bu = build(p.get());
    IPluginV3OneRuntime* ru = runtime(p.get());
    if (!c.check(bu != nullptr && ru != nullptr, "plugin for configurePlugin/getWorkspaceSize/onShapeChange"))
    {
        return;
    }
    for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
    {
        std::vector<DynamicPluginTensorDesc> io = dynDescsOf(shapesOf(-1, 1000, 80, 50), t);
        logger.clear();
        c.check(bu->configurePlugin(io.data(), kNB_IN, io.data() + kNB_IN, kNB_OUT) == 0,
            std::string("configurePlugin accepts ") + dataTypeName(t) + " with a dynamic batch", logger.all());
    }
    {
        std::vector<DynamicPluginTensorDesc> io = dynDescsOf(shapesOf(-1, 1000, 80, 50), DataType::kFLOAT);
        io[1].desc.type = DataType::kHALF;
        logger.clear();
        c.check(bu->configurePlugin(io.data(), kNB_IN, io.data() + kNB_IN, kNB_OUT) != 0
                && logger.hasError({"EfficientNMS_TRT::configurePlugin", "boxes' type"}),
            "configurePlugin rejects scores of another type than the boxes with a logged error", logger.all());
    }

    // getWorkspaceSize: the launchers' size at the profile's largest shapes, which grows with each of B, A and C.
    auto const workspaceSize = lib.symbol<WorkspaceSizeFn>("torchtrt_ext_efficient_nms_workspace_size");
    if (!c.check(workspaceSize != nullptr, "torchtrt_ext_efficient_nms_workspace_size is exported"))
    {
        return;
    }
    struct Profile
    {
        int64_t maxBatch, anchors, classes;
    };
    std::vector<size_t> sizes;
    for (Profile const& pr : {Profile{8, 1000, 80}, Profile{16, 1000, 80}, Profile{8, 4000, 80}, Profile{8, 1000, 3}})
    {
        std::vector<DynamicPluginTensorDesc> io = dynDescsOf(shapesOf(-1, pr.anchors, pr.classes, 50), DataType::kHALF);
        for (auto& d : io)
        {
            d.max.d[0] = pr.maxBatch;
            d.opt.d[0] = 1;
        }
        TorchtrtExtEfficientNmsParams params{};
        params.batch = pr.maxBatch;
        params.anchors = pr.anchors;
        params.classes = pr.classes;
        params.max_output_boxes = a.maxOutputBoxes;
        params.background_class = a.backgroundClass;
        params.score_threshold = a.scoreThreshold;
        params.iou_threshold = a.iouThreshold;
        int64_t const want = workspaceSize(&params);
        logger.clear();
        size_t const got = bu->getWorkspaceSize(io.data(), kNB_IN, io.data() + kNB_IN, kNB_OUT);
        sizes.push_back(got);
        c.check(want > 0 && got == static_cast<size_t>(want),
            "getWorkspaceSize is torchtrt_ext_efficient_nms_workspace_size at the profile's max dims (B="
                + std::to_string(pr.maxBatch) + ", A=" + std::to_string(pr.anchors) + ", C=" + std::to_string(pr.classes) + ")",
            "got " + std::to_string(got) + " want " + std::to_string(want) + " " + logger.all());
    }
    c.check(sizes.size() == 4 && sizes[1] > sizes[0] && sizes[2] > sizes[0] && sizes[3] < sizes[0],
        "the workspace grows with the batch and the anchors and shrinks with fewer classes");

    // onShapeChange: concrete shapes; boxes and scores of different batch or anchors are refused.
    std::vector<PluginTensorDesc> io = descsOf(shapesOf(2, 300, 5, 50), DataType::kBF16);
    logger.clear();
    c.check(ru->onShapeChange(io.data(), kNB_IN, io.data() + kNB_IN, kNB_OUT) == 0, "onShapeChange accepts 2x300 boxes, 5 classes",
        logger.all());
    io[1] = desc({2, 299, 5}, DataType::kBF16);
    logger.clear();
    c.check(ru->onShapeChange(io.data(), kNB_IN, io.data() + kNB_IN, kNB_OUT) != 0
            && logger.hasError({"EfficientNMS_TRT::onShapeChange", "differ in batch or anchors"}),
        "onShapeChange rejects scores of another anchor count than the boxes", logger.all());
    io = descsOf(shapesOf(2, 300, 5, 50), DataType::kFLOAT);
    io[0] = desc({2, 300, 5}, DataType::kFLOAT);
    logger.clear();
    c.check(ru->onShapeChange(io.data(), kNB_IN, io.data() + kNB_IN, kNB_OUT) != 0
            && logger.hasError({"[batch, anchors, 4]"}),
        "onShapeChange rejects boxes whose last dimension is not 4", logger.all());
}

//! Field sets where each value differs from every other field's, so that writing one field from another member shows.
std::vector<Attrs> roundTripCases()
{
    Attrs first;
    first.scoreThreshold = 0.3F;
    first.iouThreshold = 0.6F;
    first.maxOutputBoxes = 7;
    first.backgroundClass = 2;
    first.scoreActivation = 1;
    first.classAgnostic = 0;
    first.boxCoding = 1;
    Attrs second;
    second.scoreThreshold = 0.05F;
    second.iouThreshold = 0.7F;
    second.maxOutputBoxes = 300;
    second.backgroundClass = 0;
    second.scoreActivation = 0;
    second.classAgnostic = 1;
    second.boxCoding = 0;
    Attrs third;
    third.scoreThreshold = 0.123456789F;
    third.iouThreshold = 0.987654321F;
    third.maxOutputBoxes = 1;
    third.backgroundClass = -1;
    third.scoreActivation = 1;
    third.classAgnostic = 1;
    third.boxCoding = 1;
    return {Attrs{}, first, second, third};
}

void checkSerializationRoundTrip(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    for (Attrs const& a : roundTripCases())
    {
        PluginPtr p = create(creator, fieldsOf(a));
        IPluginV3OneRuntime* ru = runtime(p.get());
        if (!c.check(ru != nullptr, "plugin for serialization " + a.text(), logger.all()))
        {
            continue;
        }
        PluginFieldCollection const* fc = ru->getFieldsToSerialize();
        c.check(fieldsHold(fc, a), "getFieldsToSerialize " + a.text() + ": exactly the seven fields with their values",
            describeFields(fc));
        logger.clear();
        // As TensorRT does when it loads an engine: the serialized fields, in the runtime phase.
        PluginPtr r(creator->createPlugin(kNAME, fc, TensorRTPhase::kRUNTIME));
        IPluginV3OneRuntime* rr = runtime(r.get());
        IPluginV3OneBuild* pb = build(p.get());
        IPluginV3OneBuild* rb = build(r.get());
        bool const equal = rr != nullptr && fieldsHold(rr->getFieldsToSerialize(), a) && pb != nullptr && rb != nullptr
            && std::strcmp(pb->getTimingCacheID(), rb->getTimingCacheID()) == 0
            && std::strcmp(core(r.get())->getPluginNamespace(), kNAMESPACE) == 0;
        c.check(equal, "round trip " + a.text() + ": createPlugin(getFieldsToSerialize(), kRUNTIME) gives an equal plugin",
            describeFields(rr != nullptr ? rr->getFieldsToSerialize() : nullptr) + logger.all());
    }
    // Each field on its own changes the timing-cache ID: tactics timed for one set of fields are not reused for another.
    std::vector<std::function<void(Attrs&)>> const changes = {[](Attrs& a) { a.scoreThreshold = 0.5F; },
        [](Attrs& a) { a.iouThreshold = 0.5F; }, [](Attrs& a) { a.maxOutputBoxes = 10; },
        [](Attrs& a) { a.backgroundClass = 0; }, [](Attrs& a) { a.scoreActivation = 1; },
        [](Attrs& a) { a.classAgnostic = 1; }, [](Attrs& a) { a.boxCoding = 1; }};
    PluginPtr base = create(creator, fieldsOf(Attrs{}));
    int32_t distinct = 0;
    for (auto const& change : changes)
    {
        Attrs a;
        change(a);
        PluginPtr other = create(creator, fieldsOf(a));
        distinct += base && other && std::strcmp(build(base.get())->getTimingCacheID(), build(other.get())->getTimingCacheID()) != 0;
    }
    c.check(distinct == 7, "each of the seven fields changes the timing-cache ID", std::to_string(distinct) + " of 7");
}

void checkCloneIndependence(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    Attrs const a = roundTripCases()[1];
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
    original.reset();
    c.check(fieldsHold(runtime(clone.get())->getFieldsToSerialize(), a), "clone keeps its fields after the original is deleted");
    TestResourceContext ctx1;
    TestResourceContext ctx2;
    PluginPtr c1(runtime(clone.get())->attachToContext(&ctx1));
    PluginPtr c2(runtime(clone.get())->attachToContext(&ctx2));
    clone.reset();
    std::vector<PluginTensorDesc> i1 = descsOf(shapesOf(1, 10, 3, a.maxOutputBoxes), DataType::kFLOAT);
    std::vector<PluginTensorDesc> i2 = descsOf(shapesOf(4, 700, 2, a.maxOutputBoxes), DataType::kHALF);
    logger.clear();
    c.check(c1 && c2 && c1.get() != c2.get() && fieldsHold(runtime(c1.get())->getFieldsToSerialize(), a)
            && fieldsHold(runtime(c2.get())->getFieldsToSerialize(), a)
            && runtime(c1.get())->onShapeChange(i1.data(), kNB_IN, i1.data() + kNB_IN, kNB_OUT) == 0
            && runtime(c2.get())->onShapeChange(i2.data(), kNB_IN, i2.data() + kNB_IN, kNB_OUT) == 0,
        "attachToContext gives a new plugin per context that outlives its source and takes shapes of its own",
        logger.all());
}

void checkBadFields(Checker& c, IPluginCreatorV3One* creator, TestLogger& logger)
{
    auto with = [](std::function<void(Attrs&)> change) {
        return [change] {
            Attrs a;
            change(a);
            return fieldsOf(a);
        };
    };
    auto without = [](char const* missing) {
        return [missing] {
            Attrs const a;
            Fields all = fieldsOf(a);
            PluginFieldCollection const* fc = all.collection();
            Fields f;
            for (int32_t i = 0; i < fc->nbFields; ++i)
            {
                if (std::strcmp(fc->fields[i].name, missing) != 0)
                {
                    f.raw(fc->fields[i].name, fc->fields[i].data, 4, fc->fields[i].type, 1);
                }
            }
            return f;
        };
    };
    std::vector<BadFields> const cases = {
        {"score_threshold -0.1", with([](Attrs& a) { a.scoreThreshold = -0.1F; }), {"score_threshold", "[0, 1]"}},
        {"iou_threshold 1.5", with([](Attrs& a) { a.iouThreshold = 1.5F; }), {"iou_threshold", "[0, 1]"}},
        {"max_output_boxes 0", with([](Attrs& a) { a.maxOutputBoxes = 0; }), {"max_output_boxes", ">= 1"}},
        {"background_class -2", with([](Attrs& a) { a.backgroundClass = -2; }), {"background_class", ">= -1"}},
        {"score_activation 2", with([](Attrs& a) { a.scoreActivation = 2; }), {"score_activation", "0 or 1"}},
        {"class_agnostic -1", with([](Attrs& a) { a.classAgnostic = -1; }), {"class_agnostic", "0 or 1"}},
        {"box_coding 2", with([](Attrs& a) { a.boxCoding = 2; }), {"box_coding", "0 or 1"}},
        {"no score_threshold", without("score_threshold"), {"missing field 'score_threshold'"}},
        {"no iou_threshold", without("iou_threshold"), {"missing field 'iou_threshold'"}},
        {"no max_output_boxes", without("max_output_boxes"), {"missing field 'max_output_boxes'"}},
        {"no background_class", without("background_class"), {"missing field 'background_class'"}},
        {"no score_activation", without("score_activation"), {"missing field 'score_activation'"}},
        {"no box_coding", without("box_coding"), {"missing field 'box_coding'"}},
        {"iou_threshold as kINT32",
            [without] {
                Fields f = without("iou_threshold")();
                f.add("iou_threshold", int32_t{0}, PluginFieldType::kINT32);
                return f;
            },
            {"iou_threshold", "kINT32", "expected kFLOAT32"}},
    };
    checkRejectedFields(c, creator, logger, cases);
}

int32_t runCpu(Library const& lib, TestLogger& logger, TestLoggerFinder& /* finder */)
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
        checkConfigureAndWorkspace(c, lib, creator, logger);
        checkSerializationRoundTrip(c, creator, logger);
        checkCloneIndependence(c, creator, logger);
        checkBadFields(c, creator, logger);
    }
    std::printf("harness cpu: %d checks, %d failed\n", c.count, c.failures);
    return c.failures;
}

// ------------------------------------------------------------------------------------------------ gpu checks
struct Detection
{
    int32_t anchor;
    int32_t cls;
    float score;
};

//! One corner box in float32 (from cx, cy, w, h when boxCoding is 1).
std::array<float, 4> cornersOf(float const* b, int32_t boxCoding)
{
    if (boxCoding == 0)
    {
        return {b[0], b[1], b[2], b[3]};
    }
    float const hw = b[2] * 0.5F;
    float const hh = b[3] * 0.5F;
    return {b[0] - hw, b[1] - hh, b[0] + hw, b[1] + hh};
}

//! IoU in float32 of corners put in order; 0 when the intersection, an area or the union is not positive.
float iouOf(std::array<float, 4> const& a, std::array<float, 4> const& b)
{
    float const ax1 = std::min(a[0], a[2]), ax2 = std::max(a[0], a[2]), ay1 = std::min(a[1], a[3]), ay2 = std::max(a[1], a[3]);
    float const bx1 = std::min(b[0], b[2]), bx2 = std::max(b[0], b[2]), by1 = std::min(b[1], b[3]), by2 = std::max(b[1], b[3]);
    float const w = std::max(std::min(ax2, bx2) - std::max(ax1, bx1), 0.0F);
    float const h = std::max(std::min(ay2, by2) - std::max(ay1, by1), 0.0F);
    float const inter = w * h;
    float const areaA = (ax2 - ax1) * (ay2 - ay1);
    float const areaB = (bx2 - bx1) * (by2 - by1);
    float const uni = areaA + areaB - inter;
    return (inter <= 0.0F || areaA <= 0.0F || areaB <= 0.0F || uni <= 0.0F) ? 0.0F : inter / uni;
}

//! Per image, the kept (anchor, class, score) in output order: brute force from the documented semantics (every
//! candidate above the threshold, by score then anchor * C + class, each against every kept one).
std::vector<std::vector<Detection>> bruteForceNms(
    std::vector<float> const& boxes, std::vector<float> const& scores, int64_t b, int64_t a, int64_t nc, Attrs const& at)
{
    std::vector<std::vector<Detection>> result;
    for (int64_t img = 0; img < b; ++img)
    {
        std::vector<Detection> candidates;
        for (int64_t i = 0; i < a; ++i)
        {
            for (int64_t k = 0; k < nc; ++k)
            {
                float s = scores[static_cast<size_t>((img * a + i) * nc + k)];
                if (at.scoreActivation != 0)
                {
                    s = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(s))));
                }
                if (s > at.scoreThreshold && k != at.backgroundClass)
                {
                    candidates.push_back({static_cast<int32_t>(i), static_cast<int32_t>(k), s});
                }
            }
        }
        std::stable_sort(candidates.begin(), candidates.end(), [nc](Detection const& x, Detection const& y) {
            return x.score != y.score ? x.score > y.score : x.anchor * nc + x.cls < y.anchor * nc + y.cls;
        });
        std::vector<Detection> kept;
        for (Detection const& d : candidates)
        {
            if (static_cast<int32_t>(kept.size()) == at.maxOutputBoxes)
            {
                break;
            }
            std::array<float, 4> const box = cornersOf(&boxes[static_cast<size_t>((img * a + d.anchor) * 4)], at.boxCoding);
            bool suppressed = false;
            for (Detection const& k : kept)
            {
                if ((at.classAgnostic != 0 || k.cls == d.cls)
                    && iouOf(box, cornersOf(&boxes[static_cast<size_t>((img * a + k.anchor) * 4)], at.boxCoding)) > at.iouThreshold)
                {
                    suppressed = true;
                    break;
                }
            }
            if (!suppressed)
            {
                kept.push_back(d);
            }
        }
        result.push_back(kept);
    }
    return result;
}

struct NmsCase
{
    std::string name;
    int64_t batch, anchors, classes;
    Attrs attrs;
    std::vector<float> boxes;  // [B, A, 4]
    std::vector<float> scores; // [B, A, C]
};

float uniform(uint32_t& s)
{
    s = s * 1664525U + 1013904223U;
    return static_cast<float>(s >> 8) / static_cast<float>(1U << 24);
}

//! Boxes around a few centres (many overlap), scores uniform in [0, 1) (or [-4, 4) for a sigmoid).
NmsCase randomCase(std::string name, int64_t b, int64_t a, int64_t nc, Attrs const& at, uint32_t seed)
{
    NmsCase k{std::move(name), b, a, nc, at, {}, {}};
    uint32_t s = seed;
    float centres[4][2];
    for (auto& centre : centres)
    {
        centre[0] = 0.2F + 0.6F * uniform(s);
        centre[1] = 0.2F + 0.6F * uniform(s);
    }
    for (int64_t i = 0; i < b * a; ++i)
    {
        float const* centre = centres[static_cast<uint32_t>(uniform(s) * 4.0F) % 4];
        float const cx = centre[0] + 0.06F * (uniform(s) - 0.5F);
        float const cy = centre[1] + 0.06F * (uniform(s) - 0.5F);
        float const w = 0.05F + 0.25F * uniform(s);
        float const h = 0.05F + 0.25F * uniform(s);
        if (at.boxCoding == 1)
        {
            k.boxes.insert(k.boxes.end(), {cx, cy, w, h});
        }
        else
        {
            k.boxes.insert(k.boxes.end(), {cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2});
        }
    }
    for (int64_t i = 0; i < b * a * nc; ++i)
    {
        k.scores.push_back(at.scoreActivation != 0 ? 8.0F * uniform(s) - 4.0F : uniform(s));
    }
    return k;
}

//! Boundary cases: scores exactly on the threshold (not kept), IoU exactly on the threshold (not suppressed), equal
//! scores (lower anchor * C + class first), background class 0, one image saturating K while the next is still filled.
std::vector<NmsCase> boundaryCases()
{
    std::vector<NmsCase> cases;
    Attrs at;
    at.scoreThreshold = 0.5F;
    at.iouThreshold = 0.5F;
    at.maxOutputBoxes = 4;
    // [0,0,2,1] and [1,0,3,1]: intersection 1, union 3, IoU 1/3; [0,0,2,1] and [0,0,2,2]: IoU exactly 0.5.
    NmsCase onThresholds{"on the thresholds", 1, 4, 2, at,
        {0, 0, 2, 1, 0, 0, 2, 2, 1, 0, 3, 1, 5, 5, 6, 6},
        {0.9F, 0.1F, 0.8F, 0.5F, 0.7F, 0.7F, 0.5F, 0.75F}};
    cases.push_back(onThresholds);
    Attrs bg = at;
    bg.backgroundClass = 0;
    NmsCase background{"background class 0", 1, 4, 2, bg, onThresholds.boxes, {0.99F, 0.6F, 0.98F, 0.55F, 0.97F, 0.65F, 0.96F, 0.7F}};
    cases.push_back(background);
    Attrs sat = at;
    sat.maxOutputBoxes = 2;
    // Image 0: four far-apart boxes all above the threshold (saturates K=2); image 1: one kept, one it suppresses.
    NmsCase saturate{"image 0 saturates K, image 1 still filled", 2, 4, 1, sat,
        {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 0, 0, 1, 1, 0, 0, 1, 1.1F, 3, 3, 4, 4, 0, 0, 0, 0},
        {0.9F, 0.8F, 0.7F, 0.6F, 0.6F, 0.7F, 0.3F, 0.3F}};
    cases.push_back(saturate);
    Attrs ties = at;
    ties.maxOutputBoxes = 3;
    ties.classAgnostic = 1;
    NmsCase equalScores{"equal scores", 1, 3, 2, ties, {0, 0, 1, 1, 0, 0, 1, 1, 4, 4, 5, 5},
        {0.75F, 0.75F, 0.75F, 0.75F, 0.75F, 0.6F}};
    cases.push_back(equalScores);
    return cases;
}

//! Enqueue the plugin on k's inputs rounded to `t`; fills num/boxes/scores/classes (floats) or returns an error.
std::string runPlugin(IPluginV3* plugin, NmsCase const& k, DataType t, std::vector<float> const& boxes,
    std::vector<float> const& scores, cudaStream_t stream, std::vector<int32_t>& num, std::vector<float>& outBoxes,
    std::vector<float>& outScores, std::vector<int32_t>& outClasses)
{
    int64_t const kk = k.attrs.maxOutputBoxes;
    std::vector<PluginTensorDesc> const io = descsOf(shapesOf(k.batch, k.anchors, k.classes, kk), t);
    IPluginV3OneRuntime* ru = runtime(plugin);
    if (ru->onShapeChange(io.data(), kNB_IN, io.data() + kNB_IN, kNB_OUT) != 0)
    {
        return "onShapeChange failed";
    }
    std::vector<DynamicPluginTensorDesc> dyn = dynDescsOf(shapesOf(k.batch, k.anchors, k.classes, kk), t);
    size_t const workspace = build(plugin)->getWorkspaceSize(dyn.data(), kNB_IN, dyn.data() + kNB_IN, kNB_OUT);
    std::vector<uint8_t> const hb = encode(boxes, t);
    std::vector<uint8_t> const hs = encode(scores, t);
    size_t const es = elementSize(t);
    size_t const outBytes[kNB_OUT] = {static_cast<size_t>(k.batch) * 4, static_cast<size_t>(k.batch * kk * 4) * es,
        static_cast<size_t>(k.batch * kk) * es, static_cast<size_t>(k.batch * kk) * 4};
    DeviceBuffer db(hb.size()), ds(hs.size()), dn(outBytes[0]), dob(outBytes[1]), dos(outBytes[2]), doc(outBytes[3]),
        dw(workspace);
    cudaMemcpyAsync(db.ptr, hb.data(), hb.size(), cudaMemcpyHostToDevice, stream);
    cudaMemcpyAsync(ds.ptr, hs.data(), hs.size(), cudaMemcpyHostToDevice, stream);
    DeviceBuffer* const outs[kNB_OUT] = {&dn, &dob, &dos, &doc};
    for (int32_t i = 0; i < kNB_OUT; ++i)
    {
        cudaMemsetAsync(outs[i]->ptr, 0x7F, outBytes[i], stream); // garbage: what the plugin leaves unwritten shows
    }
    void const* inputs[kNB_IN] = {db.ptr, ds.ptr};
    void* outputs[kNB_OUT] = {dn.ptr, dob.ptr, dos.ptr, doc.ptr};
    if (ru->enqueue(io.data(), io.data() + kNB_IN, inputs, outputs, dw.ptr, stream) != 0)
    {
        return "enqueue failed";
    }
    num.assign(static_cast<size_t>(k.batch), 0);
    outClasses.assign(static_cast<size_t>(k.batch * kk), 0);
    std::vector<uint8_t> bb(outBytes[1]), sb(outBytes[2]);
    cudaMemcpyAsync(num.data(), dn.ptr, num.size() * 4, cudaMemcpyDeviceToHost, stream);
    cudaMemcpyAsync(bb.data(), dob.ptr, bb.size(), cudaMemcpyDeviceToHost, stream);
    cudaMemcpyAsync(sb.data(), dos.ptr, sb.size(), cudaMemcpyDeviceToHost, stream);
    cudaMemcpyAsync(outClasses.data(), doc.ptr, outClasses.size() * 4, cudaMemcpyDeviceToHost, stream);
    cudaError_t const e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess)
    {
        return std::string("copy out / sync: ") + cudaGetErrorString(e);
    }
    outBoxes = decode(bb, t);
    outScores = decode(sb, t);
    return "";
}

//! Empty when the plugin's outputs are the brute force's detections (boxes as corners rounded to `t`, scores within
//! `tolerance`) with zeros past num_detections; else what differs.
std::string compare(NmsCase const& k, DataType t, double tolerance, std::vector<float> const& boxes,
    std::vector<std::vector<Detection>> const& want, std::vector<int32_t> const& num, std::vector<float> const& outBoxes,
    std::vector<float> const& outScores, std::vector<int32_t> const& outClasses)
{
    int64_t const kk = k.attrs.maxOutputBoxes;
    for (int64_t img = 0; img < k.batch; ++img)
    {
        std::vector<Detection> const& w = want[static_cast<size_t>(img)];
        if (num[static_cast<size_t>(img)] != static_cast<int32_t>(w.size()))
        {
            return "image " + std::to_string(img) + ": num_detections " + std::to_string(num[static_cast<size_t>(img)])
                + ", expected " + std::to_string(w.size());
        }
        for (int64_t j = 0; j < kk; ++j)
        {
            size_t const o = static_cast<size_t>(img * kk + j);
            bool const live = j < static_cast<int64_t>(w.size());
            std::array<float, 4> corners{0, 0, 0, 0};
            if (live)
            {
                corners = cornersOf(&boxes[static_cast<size_t>((img * k.anchors + w[static_cast<size_t>(j)].anchor) * 4)], k.attrs.boxCoding);
                std::vector<float> const rounded = decode(encode({corners.begin(), corners.end()}, t), t);
                std::copy(rounded.begin(), rounded.end(), corners.begin());
            }
            int32_t const cls = live ? w[static_cast<size_t>(j)].cls : 0;
            double const score = live ? w[static_cast<size_t>(j)].score : 0.0;
            bool ok = outClasses[o] == cls && std::fabs(outScores[o] - score) <= tolerance;
            for (size_t q = 0; ok && q < 4; ++q)
            {
                ok = std::fabs(outBoxes[o * 4 + q] - corners[q]) <= tolerance * std::max(1.0F, std::fabs(corners[q]));
            }
            if (!ok)
            {
                char text[200];
                std::snprintf(text, sizeof(text), "image %lld slot %lld: class %d score %g box %g,%g,%g,%g; expected class %d score %g",
                    static_cast<long long>(img), static_cast<long long>(j), outClasses[o], static_cast<double>(outScores[o]),
                    static_cast<double>(outBoxes[o * 4]), static_cast<double>(outBoxes[o * 4 + 1]),
                    static_cast<double>(outBoxes[o * 4 + 2]), static_cast<double>(outBoxes[o * 4 + 3]), cls, score);
                return text;
            }
        }
    }
    return "";
}

void writeFloats(std::string const& path, std::vector<float> const& v)
{
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<char const*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
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
    IPluginCreatorV3One* creator = findCreator(lib, kNAME);
    if (!c.check(creator != nullptr, "EfficientNMS_TRT creator found"))
    {
        return 1;
    }
    cudaStream_t stream{};
    cudaStreamCreate(&stream);
    std::vector<NmsCase> cases = boundaryCases();
    Attrs dense;
    dense.maxOutputBoxes = 20;
    Attrs sigmoid = roundTripCases()[1]; // score_activation 1, cxcywh, background class 2, K 7
    Attrs agnostic = roundTripCases()[2]; // class-agnostic, background class 0, K 300
    cases.push_back(randomCase("random 2x200x3", 2, 200, 3, dense, 11U));
    cases.push_back(randomCase("random sigmoid cxcywh 3x150x4", 3, 150, 4, sigmoid, 12U));
    cases.push_back(randomCase("random agnostic 2x400x2", 2, 400, 2, agnostic, 13U));
    struct TypeCase
    {
        DataType type;
        char const* name;
        double tolerance;
    };
    std::vector<TypeCase> const types = {{DataType::kFLOAT, "float32", 1e-6}, {DataType::kHALF, "float16", 1e-3},
        {DataType::kBF16, "bfloat16", 8e-3}};
    std::ofstream manifest;
    if (!dumpDir.empty())
    {
        manifest.open(dumpDir + "/cases.txt");
    }
    int32_t index = 0;
    for (TypeCase const& tc : types)
    {
        for (NmsCase const& k : cases)
        {
            std::string const label = std::string(tc.name) + " " + k.name + " (" + k.attrs.text() + ")";
            // The inputs as the device sees them; the reference works on the same rounded values.
            std::vector<float> const boxes = decode(encode(k.boxes, tc.type), tc.type);
            std::vector<float> const scores = decode(encode(k.scores, tc.type), tc.type);
            logger.clear();
            PluginPtr built = create(creator, fieldsOf(k.attrs));
            // As TensorRT does: serialize, recreate in the runtime phase, attach to a context.
            PluginPtr deserialized(built ? creator->createPlugin(kNAME, runtime(built.get())->getFieldsToSerialize(), TensorRTPhase::kRUNTIME) : nullptr);
            TestResourceContext ctx;
            PluginPtr attached(deserialized ? runtime(deserialized.get())->attachToContext(&ctx) : nullptr);
            if (!c.check(attached != nullptr, "enqueue " + label + ": plugin created, deserialized, attached", logger.all()))
            {
                continue;
            }
            std::vector<int32_t> num, classes;
            std::vector<float> outBoxes, outScores;
            std::string const error = runPlugin(attached.get(), k, tc.type, boxes, scores, stream, num, outBoxes, outScores, classes);
            if (!c.check(error.empty(), "enqueue " + label + " runs", error + " " + logger.all()))
            {
                continue;
            }
            std::vector<std::vector<Detection>> const want = bruteForceNms(boxes, scores, k.batch, k.anchors, k.classes, k.attrs);
            std::string const diff = compare(k, tc.type, tc.tolerance, boxes, want, num, outBoxes, outScores, classes);
            c.check(diff.empty(), "enqueue " + label + " matches the brute-force NMS", diff);
            if (manifest.is_open())
            {
                std::string const stem = dumpDir + "/case" + std::to_string(index);
                writeFloats(stem + "_boxes.f32", boxes);
                writeFloats(stem + "_scores.f32", scores);
                writeFloats(stem + "_dboxes.f32", outBoxes);
                writeFloats(stem + "_dscores.f32", outScores);
                std::ofstream(stem + "_num.i32", std::ios::binary).write(reinterpret_cast<char const*>(num.data()), static_cast<std::streamsize>(num.size() * 4));
                std::ofstream(stem + "_classes.i32", std::ios::binary).write(reinterpret_cast<char const*>(classes.data()), static_cast<std::streamsize>(classes.size() * 4));
                char fields[96];
                std::snprintf(fields, sizeof(fields), "%.9g %.9g %d %d %d %d %d", static_cast<double>(k.attrs.scoreThreshold),
                    static_cast<double>(k.attrs.iouThreshold), k.attrs.maxOutputBoxes, k.attrs.backgroundClass,
                    k.attrs.scoreActivation, k.attrs.classAgnostic, k.attrs.boxCoding);
                manifest << index << " " << tc.name << " " << k.batch << " " << k.anchors << " " << k.classes << " " << fields << "\n";
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
        {[](Library const& lib) { return printFields(lib, kNAME, fieldsOf(Attrs{})); }, runCpu, runGpu});
}
