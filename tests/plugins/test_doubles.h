// Test doubles and helpers shared by the test programs of tests/plugins (harness_l2norm.cpp, harness_deform_conv2d.cpp,
// harness_efficient_nms.cpp, autoload_check.cpp): what TensorRT would provide to a plugin library (logger finder,
// expression builder, resource context; the plugin registry is in test_registry.h), the check reporter,
// PluginFieldCollection and tensor-description builders, the library's entry points and the common main of the
// conformance harnesses. Header-only: each test program is one translation unit.
#pragma once

#include "NvInferRuntime.h"
#include "test_registry.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace test_doubles
{
using namespace nvinfer1;

// ------------------------------------------------------------------------------------------------ reporting
//! Prints "ok   <name>" or "FAIL <name>: <detail>" for each check and counts them.
struct Checker
{
    int32_t count{0};
    int32_t failures{0};

    bool check(bool ok, std::string const& name, std::string const& detail = "")
    {
        ++count;
        if (ok)
        {
            std::printf("ok   %s\n", name.c_str());
        }
        else
        {
            ++failures;
            std::printf("FAIL %s: %s\n", name.c_str(), detail.empty() ? "check failed" : detail.c_str());
        }
        std::fflush(stdout);
        return ok;
    }
};

// ------------------------------------------------------------------------------------------------ TensorRT's side
//! Records every message; TensorRT's logger would print them.
class TestLogger : public ILogger
{
public:
    void log(Severity severity, AsciiChar const* msg) noexcept override
    {
        mMessages.emplace_back(severity, msg != nullptr ? msg : "");
    }
    void clear()
    {
        mMessages.clear();
    }
    //! True when a message of severity kERROR or worse contains every one of `parts`.
    bool hasError(std::vector<std::string> const& parts) const
    {
        return std::any_of(mMessages.begin(), mMessages.end(), [&](auto const& m) {
            return m.first <= Severity::kERROR
                && std::all_of(parts.begin(), parts.end(), [&](std::string const& p) { return m.second.find(p) != std::string::npos; });
        });
    }
    bool hasWarning(std::string const& part) const
    {
        return std::any_of(mMessages.begin(), mMessages.end(),
            [&](auto const& m) { return m.first == Severity::kWARNING && m.second.find(part) != std::string::npos; });
    }
    size_t size() const
    {
        return mMessages.size();
    }
    std::string all() const
    {
        std::string text;
        for (auto const& m : mMessages)
        {
            text += "[" + std::to_string(static_cast<int32_t>(m.first)) + "] " + m.second + " | ";
        }
        return text.empty() ? "<no messages>" : text;
    }

private:
    std::vector<std::pair<Severity, std::string>> mMessages;
};

class TestLoggerFinder : public ILoggerFinder
{
public:
    explicit TestLoggerFinder(ILogger* logger)
        : mLogger(logger)
    {
    }
    ~TestLoggerFinder() override = default;
    ILogger* findLogger() override
    {
        return mLogger;
    }

private:
    ILogger* mLogger;
};

using Env = std::map<std::string, int64_t>;

//! A dimension expression that can be evaluated: a constant, a named symbol (a dimension known only at run time), or
//! an operation on two expressions. IDimensionExpr wraps apiv::VDimensionExpr (what TensorRT implements); so does this.
class TestDimExpr final : public IDimensionExpr
{
public:
    using Eval = std::function<int64_t(Env const&)>;
    TestDimExpr(bool constant, int64_t value, std::string text, Eval eval)
        : mVImpl(constant, value)
        , mText(std::move(text))
        , mEval(std::move(eval))
    {
        mImpl = &mVImpl;
    }
    ~TestDimExpr() noexcept override = default;
    std::string const& text() const
    {
        return mText;
    }
    int64_t evaluate(Env const& env) const
    {
        return mEval(env);
    }

private:
    class Impl final : public apiv::VDimensionExpr
    {
    public:
        Impl(bool constant, int64_t value)
            : mConstant(constant)
            , mValue(value)
        {
        }
        bool isConstant() const override
        {
            return mConstant;
        }
        int64_t getConstantValue() const override
        {
            return mConstant ? mValue : std::numeric_limits<int64_t>::min();
        }
        bool isSizeTensor() const override
        {
            return false;
        }

    private:
        bool mConstant;
        int64_t mValue;
    };
    Impl mVImpl;
    std::string mText;
    Eval mEval;
};

inline int64_t floorDiv(int64_t x, int64_t y)
{
    return y == 0 ? 0 : (x / y - ((x % y != 0) && ((x < 0) != (y < 0))));
}

inline int64_t applyOp(DimensionOperation op, int64_t x, int64_t y)
{
    switch (op)
    {
    case DimensionOperation::kSUM: return x + y;
    case DimensionOperation::kPROD: return x * y;
    case DimensionOperation::kMAX: return std::max(x, y);
    case DimensionOperation::kMIN: return std::min(x, y);
    case DimensionOperation::kSUB: return x - y;
    case DimensionOperation::kEQUAL: return x == y;
    case DimensionOperation::kLESS: return x < y;
    case DimensionOperation::kFLOOR_DIV: return floorDiv(x, y);
    case DimensionOperation::kCEIL_DIV: return -floorDiv(-x, y);
    }
    return 0;
}

class TestExprBuilder final : public IExprBuilder
{
public:
    TestExprBuilder()
        : mVImpl(*this)
    {
        mImpl = &mVImpl;
    }
    ~TestExprBuilder() noexcept override = default;

    IDimensionExpr const* symbol(std::string const& name)
    {
        return make(false, 0, name, [name](Env const& env) { return env.at(name); });
    }
    IDimensionExpr const* make(bool constant, int64_t value, std::string text, TestDimExpr::Eval eval)
    {
        mExprs.push_back(std::make_unique<TestDimExpr>(constant, value, std::move(text), std::move(eval)));
        return mExprs.back().get();
    }
    static std::string describe(IDimensionExpr const* e)
    {
        if (e == nullptr)
        {
            return "<null>";
        }
        if (e->isConstant())
        {
            return std::to_string(e->getConstantValue());
        }
        auto const* t = dynamic_cast<TestDimExpr const*>(e);
        return t != nullptr ? t->text() : "<foreign expression>";
    }
    //! The value of `e` for the symbols' values in env; INT64_MIN for a foreign or null expression.
    static int64_t evaluate(IDimensionExpr const* e, Env const& env)
    {
        if (e == nullptr)
        {
            return std::numeric_limits<int64_t>::min();
        }
        if (e->isConstant())
        {
            return e->getConstantValue();
        }
        auto const* t = dynamic_cast<TestDimExpr const*>(e);
        return t != nullptr ? t->evaluate(env) : std::numeric_limits<int64_t>::min();
    }
    //! Same value: both constant and equal, or the same symbol (or symbolic expression).
    static bool equivalent(IDimensionExpr const* a, IDimensionExpr const* b)
    {
        if (a == nullptr || b == nullptr)
        {
            return false;
        }
        if (a == b)
        {
            return true;
        }
        if (a->isConstant() || b->isConstant())
        {
            return a->isConstant() && b->isConstant() && a->getConstantValue() == b->getConstantValue();
        }
        return describe(a) == describe(b);
    }

private:
    class Impl final : public apiv::VExprBuilder
    {
    public:
        explicit Impl(TestExprBuilder& owner)
            : mOwner(owner)
        {
        }
        IDimensionExpr const* constant(int64_t value) override
        {
            return mOwner.make(true, value, std::to_string(value), [value](Env const&) { return value; });
        }
        IDimensionExpr const* operation(DimensionOperation op, IDimensionExpr const& a, IDimensionExpr const& b) override
        {
            static char const* const kOPS[] = {"+", "*", "max", "min", "-", "==", "<", "//", "ceildiv"};
            int32_t const index = static_cast<int32_t>(op);
            if (index < 0 || index >= 9)
            {
                return nullptr;
            }
            if (a.isConstant() && b.isConstant())
            {
                int64_t const v = applyOp(op, a.getConstantValue(), b.getConstantValue());
                return mOwner.make(true, v, std::to_string(v), [v](Env const&) { return v; });
            }
            IDimensionExpr const* pa = &a;
            IDimensionExpr const* pb = &b;
            return mOwner.make(false, 0, "(" + describe(pa) + " " + kOPS[index] + " " + describe(pb) + ")",
                [op, pa, pb](Env const& env) { return applyOp(op, evaluate(pa, env), evaluate(pb, env)); });
        }
        IDimensionExpr const* declareSizeTensor(int32_t outputIndex, IDimensionExpr const&, IDimensionExpr const&) override
        {
            return mOwner.make(false, 0, "size_tensor" + std::to_string(outputIndex),
                [](Env const&) { return std::numeric_limits<int64_t>::min(); });
        }

    private:
        TestExprBuilder& mOwner;
    };
    Impl mVImpl;
    std::deque<std::unique_ptr<TestDimExpr>> mExprs;
};

class TestResourceContext final : public IPluginResourceContext
{
public:
    IGpuAllocator* getGpuAllocator() const noexcept override
    {
        return nullptr;
    }
    IErrorRecorder* getErrorRecorder() const noexcept override
    {
        return nullptr;
    }
};

// ------------------------------------------------------------------------------------------------ helpers
//! A PluginFieldCollection whose field data it owns.
class Fields
{
public:
    //! One element of type T, e.g. add("eps", 1e-6F, PluginFieldType::kFLOAT32).
    template <typename T>
    Fields& add(char const* name, T value, PluginFieldType type)
    {
        return raw(name, &value, sizeof(T), type, 1);
    }
    Fields& ints(char const* name, std::vector<int32_t> const& values)
    {
        return raw(name, values.data(), values.size() * sizeof(int32_t), PluginFieldType::kINT32,
            static_cast<int32_t>(values.size()));
    }
    //! `bytes` bytes copied from `data` (nullptr: a field without data) as `length` elements of `type`.
    Fields& raw(char const* name, void const* data, size_t bytes, PluginFieldType type, int32_t length)
    {
        mStorage.emplace_back(static_cast<char const*>(data), static_cast<char const*>(data) + bytes);
        mFields.emplace_back(name, data == nullptr ? nullptr : mStorage.back().data(), type, length);
        return *this;
    }
    Fields& text(char const* name, char const* value)
    {
        return raw(name, value, std::strlen(value) + 1, PluginFieldType::kCHAR, static_cast<int32_t>(std::strlen(value)));
    }
    PluginFieldCollection const* collection()
    {
        mCollection.nbFields = static_cast<int32_t>(mFields.size());
        mCollection.fields = mFields.data();
        return &mCollection;
    }

private:
    std::deque<std::vector<char>> mStorage;
    std::vector<PluginField> mFields;
    PluginFieldCollection mCollection{};
};

struct PluginDeleter
{
    void operator()(IPluginV3* p) const
    {
        delete p;
    }
};
using PluginPtr = std::unique_ptr<IPluginV3, PluginDeleter>;

template <typename T>
inline T* capability(IPluginV3* plugin, PluginCapabilityType type, char const* kind)
{
    IPluginCapability* c = plugin != nullptr ? plugin->getCapabilityInterface(type) : nullptr;
    if (c == nullptr || std::strcmp(c->getInterfaceInfo().kind, kind) != 0)
    {
        return nullptr;
    }
    return static_cast<T*>(c);
}
inline IPluginV3OneCore* core(IPluginV3* p)
{
    return capability<IPluginV3OneCore>(p, PluginCapabilityType::kCORE, "PLUGIN_V3ONE_CORE");
}
inline IPluginV3OneBuild* build(IPluginV3* p)
{
    return capability<IPluginV3OneBuild>(p, PluginCapabilityType::kBUILD, "PLUGIN_V3ONE_BUILD");
}
inline IPluginV3OneRuntime* runtime(IPluginV3* p)
{
    return capability<IPluginV3OneRuntime>(p, PluginCapabilityType::kRUNTIME, "PLUGIN_V3ONE_RUNTIME");
}

inline char const* fieldTypeName(PluginFieldType t)
{
    switch (t)
    {
    case PluginFieldType::kINT32: return "kINT32";
    case PluginFieldType::kFLOAT32: return "kFLOAT32";
    case PluginFieldType::kINT64: return "kINT64";
    case PluginFieldType::kFLOAT64: return "kFLOAT64";
    case PluginFieldType::kCHAR: return "kCHAR";
    default: return "other";
    }
}

inline char const* dataTypeName(DataType t)
{
    switch (t)
    {
    case DataType::kFLOAT: return "kFLOAT";
    case DataType::kHALF: return "kHALF";
    case DataType::kBF16: return "kBF16";
    case DataType::kINT8: return "kINT8";
    case DataType::kINT32: return "kINT32";
    case DataType::kINT64: return "kINT64";
    case DataType::kBOOL: return "kBOOL";
    case DataType::kUINT8: return "kUINT8";
    case DataType::kFP8: return "kFP8";
    default: return "DataType#";
    }
}

inline Dims makeDims(std::vector<int64_t> const& shape)
{
    Dims d{};
    d.nbDims = static_cast<int32_t>(shape.size());
    for (size_t i = 0; i < shape.size(); ++i)
    {
        d.d[i] = shape[i];
    }
    return d;
}

inline PluginTensorDesc desc(std::vector<int64_t> const& shape, DataType type, TensorFormat format = TensorFormat::kLINEAR)
{
    PluginTensorDesc d{};
    d.dims = makeDims(shape);
    d.type = type;
    d.format = format;
    d.scale = 1.0F;
    return d;
}

//! -1 dims get min 1 and opt/max `dynMax`.
inline DynamicPluginTensorDesc dynDesc(
    std::vector<int64_t> const& shape, DataType type, TensorFormat format = TensorFormat::kLINEAR, int64_t dynMax = 64)
{
    DynamicPluginTensorDesc d{};
    d.desc = desc(shape, type, format);
    std::vector<int64_t> lo = shape;
    std::vector<int64_t> hi = shape;
    for (size_t i = 0; i < shape.size(); ++i)
    {
        if (shape[i] < 0)
        {
            lo[i] = 1;
            hi[i] = dynMax;
        }
    }
    d.min = makeDims(lo);
    d.opt = makeDims(hi);
    d.max = makeDims(hi);
    return d;
}

//! "2x3x4" for a shape.
inline std::string shapeText(std::vector<int64_t> const& shape)
{
    std::string s;
    for (size_t i = 0; i < shape.size(); ++i)
    {
        s += (i ? "x" : "") + std::to_string(shape[i]);
    }
    return s;
}

// ------------------------------------------------------------------------------------------------ the library
constexpr char const* kVERSION = "1";
constexpr char const* kNAMESPACE = "torchtrt_ext";

using GetCreatorsFn = IPluginCreatorInterface* const* (*) (int32_t&);
using SetLoggerFinderFn = void (*)(ILoggerFinder*);
using RegisterFn = bool (*)(IPluginRegistry*, char const*);

//! libtorchtrt_ext_plugins.so, dlopened, with its entry points.
struct Library
{
    void* handle{nullptr};
    GetCreatorsFn getCreators{nullptr};
    SetLoggerFinderFn setLoggerFinder{nullptr};
    RegisterFn registerPlugins{nullptr};

    //! Another exported symbol (e.g. a kernel launcher), or nullptr.
    template <typename Fn>
    Fn symbol(char const* name) const
    {
        return reinterpret_cast<Fn>(dlsym(handle, name));
    }
};

//! The creator `name` version 1 in namespace torchtrt_ext among getCreators', or nullptr.
inline IPluginCreatorV3One* findCreator(Library const& lib, char const* name)
{
    int32_t n = 0;
    IPluginCreatorInterface* const* creators = lib.getCreators(n);
    for (int32_t i = 0; creators != nullptr && i < n; ++i)
    {
        IPluginCreatorV3One* c = TestRegistry::asV3(creators[i]);
        if (c != nullptr && std::strcmp(c->getPluginName(), name) == 0 && std::strcmp(c->getPluginVersion(), kVERSION) == 0
            && std::strcmp(c->getPluginNamespace(), kNAMESPACE) == 0)
        {
            return c;
        }
    }
    return nullptr;
}

inline PluginPtr create(IPluginCreatorV3One* creator, Fields fields, TensorRTPhase phase = TensorRTPhase::kBUILD)
{
    return PluginPtr(creator->createPlugin(creator->getPluginName(), fields.collection(), phase));
}

//! A field collection createPlugin must refuse, and parts of the error it must log.
struct BadFields
{
    std::string name;
    std::function<Fields()> fields;
    std::vector<std::string> logged; // parts of the expected error message
};

//! Each of `cases` (in kBUILD and kRUNTIME), no collection and a malformed one: createPlugin returns nullptr and logs
//! an error of "<plugin>::createPlugin" holding the expected parts.
inline void checkRejectedFields(
    Checker& c, IPluginCreatorV3One* creator, TestLogger& logger, std::vector<BadFields> const& cases)
{
    char const* const name = creator->getPluginName();
    for (BadFields const& bad : cases)
    {
        for (TensorRTPhase phase : {TensorRTPhase::kBUILD, TensorRTPhase::kRUNTIME})
        {
            logger.clear();
            Fields f = bad.fields();
            PluginPtr p(creator->createPlugin(name, f.collection(), phase));
            std::vector<std::string> parts = bad.logged;
            parts.emplace_back(std::string(name) + "::createPlugin");
            c.check(p == nullptr && logger.hasError(parts),
                "bad fields rejected (" + bad.name + (phase == TensorRTPhase::kBUILD ? ", kBUILD" : ", kRUNTIME")
                    + "): nullptr and a logged error",
                logger.all());
        }
    }
    logger.clear();
    c.check(creator->createPlugin(name, nullptr, TensorRTPhase::kBUILD) == nullptr && logger.hasError({"no field collection"}),
        "createPlugin(null collection) returns nullptr with a logged error", logger.all());
    logger.clear();
    PluginFieldCollection malformed{-3, nullptr};
    c.check(creator->createPlugin(name, &malformed, TensorRTPhase::kBUILD) == nullptr && logger.hasError({"malformed"}),
        "createPlugin(nbFields < 0) returns nullptr with a logged error", logger.all());
}

//! `harness LIB fields`: the creator's advertised fields ("field <name> <type> <length>"), those a plugin made from
//! `fields` serializes ("serialized ..."), and "creator <name> <version> <namespace>".
inline int32_t printFields(Library const& lib, char const* name, Fields fields)
{
    IPluginCreatorV3One* creator = findCreator(lib, name);
    if (creator == nullptr || creator->getFieldNames() == nullptr)
    {
        std::printf("FAIL no %s creator\n", name);
        return 1;
    }
    PluginFieldCollection const* fc = creator->getFieldNames();
    for (int32_t i = 0; i < fc->nbFields; ++i)
    {
        std::printf("field %s %s %d\n", fc->fields[i].name, fieldTypeName(fc->fields[i].type), fc->fields[i].length);
    }
    PluginPtr p(creator->createPlugin(name, fields.collection(), TensorRTPhase::kBUILD));
    PluginFieldCollection const* s = p ? runtime(p.get())->getFieldsToSerialize() : nullptr;
    for (int32_t i = 0; s != nullptr && i < s->nbFields; ++i)
    {
        std::printf("serialized %s %s %d\n", s->fields[i].name, fieldTypeName(s->fields[i].type), s->fields[i].length);
    }
    std::printf("creator %s %s %s\n", creator->getPluginName(), creator->getPluginVersion(), creator->getPluginNamespace());
    return 0;
}

//! What a conformance harness does in each mode of its command line.
struct HarnessModes
{
    std::function<int32_t(Library const&)> fields;
    std::function<int32_t(Library const&, TestLogger&, TestLoggerFinder&)> cpu;
    std::function<int32_t(Library const&, TestLogger&, std::string const& dumpDir)> gpu;
};

//! The main of a conformance harness: `harness LIBRARY {fields|cpu|gpu [--dump DIR]}`. dlopens LIBRARY, hands it a
//! logger finder as TensorRT does, runs the mode; returns the number of failures (capped at 100), 2 on a usage error.
inline int harnessMain(int argc, char** argv, HarnessModes const& modes)
{
    if (argc < 3)
    {
        std::fprintf(stderr, "usage: %s LIBRARY {fields|cpu|gpu [--dump DIR]}\n", argv[0]);
        return 2;
    }
    std::string const mode = argv[2];
    std::string dumpDir;
    if (argc >= 5 && std::string(argv[3]) == "--dump")
    {
        dumpDir = argv[4];
    }
    Library lib;
    lib.handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib.handle == nullptr)
    {
        std::printf("FAIL dlopen %s: %s\n", argv[1], dlerror());
        return 2;
    }
    lib.getCreators = lib.symbol<GetCreatorsFn>("getCreators");
    lib.setLoggerFinder = lib.symbol<SetLoggerFinderFn>("setLoggerFinder");
    lib.registerPlugins = lib.symbol<RegisterFn>("torchtrt_ext_register_plugins");
    if (lib.getCreators == nullptr || lib.setLoggerFinder == nullptr)
    {
        std::printf("FAIL the library does not export getCreators and setLoggerFinder\n");
        return 2;
    }
    std::printf("ok   dlopen + getCreators + setLoggerFinder exported\n");
    TestLogger logger;
    TestLoggerFinder finder(&logger);
    lib.setLoggerFinder(&finder); // as TensorRT does right after loading a plugin library
    int32_t failures = 0;
    if (mode == "fields")
    {
        failures = modes.fields(lib);
    }
    else if (mode == "cpu")
    {
        failures = modes.cpu(lib, logger, finder);
    }
    else if (mode == "gpu")
    {
        failures = modes.gpu(lib, logger, dumpDir);
    }
    else
    {
        std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
        return 2;
    }
    lib.setLoggerFinder(nullptr); // the finder dies with main; the library must not keep using it
    return std::min(failures, 100);
}

// ------------------------------------------------------------------------------------------------ gpu mode
struct DeviceBuffer
{
    void* ptr{nullptr};
    explicit DeviceBuffer(size_t bytes)
    {
        if (bytes > 0 && cudaMalloc(&ptr, bytes) != cudaSuccess)
        {
            ptr = nullptr;
        }
    }
    ~DeviceBuffer()
    {
        if (ptr != nullptr)
        {
            cudaFree(ptr);
        }
    }
    DeviceBuffer(DeviceBuffer const&) = delete;
    DeviceBuffer& operator=(DeviceBuffer const&) = delete;
};

inline size_t elementSize(DataType t)
{
    return t == DataType::kFLOAT ? 4 : 2;
}

//! Host values rounded to `t`, as the bytes the device sees.
inline std::vector<uint8_t> encode(std::vector<float> const& values, DataType t)
{
    std::vector<uint8_t> bytes(values.size() * elementSize(t));
    for (size_t i = 0; i < values.size(); ++i)
    {
        if (t == DataType::kFLOAT)
        {
            std::memcpy(bytes.data() + 4 * i, &values[i], 4);
        }
        else if (t == DataType::kHALF)
        {
            __half const h = __float2half_rn(values[i]);
            std::memcpy(bytes.data() + 2 * i, &h, 2);
        }
        else
        {
            __nv_bfloat16 const b = __float2bfloat16_rn(values[i]);
            std::memcpy(bytes.data() + 2 * i, &b, 2);
        }
    }
    return bytes;
}

inline std::vector<float> decode(std::vector<uint8_t> const& bytes, DataType t)
{
    size_t const n = bytes.size() / elementSize(t);
    std::vector<float> values(n);
    for (size_t i = 0; i < n; ++i)
    {
        if (t == DataType::kFLOAT)
        {
            std::memcpy(&values[i], bytes.data() + 4 * i, 4);
        }
        else if (t == DataType::kHALF)
        {
            __half h;
            std::memcpy(&h, bytes.data() + 2 * i, 2);
            values[i] = __half2float(h);
        }
        else
        {
            __nv_bfloat16 b;
            std::memcpy(&b, bytes.data() + 2 * i, 2);
            values[i] = __bfloat162float(b);
        }
    }
    return values;
}

} // namespace test_doubles
