// cuBLASLt loaded at run time (cublaslt.h): the library, one handle per device, one plan per GEMM shape.
#include "kernels/cublaslt.h"

#include <dlfcn.h>

#include <array>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace torchtrt_ext {
namespace cublaslt {
namespace {

// The declarations used, with the values of cublasLt.h / cublas_api.h (CUDA 13; part of cuBLAS's stable ABI).
using LtStatus = int;  // cublasStatus_t
constexpr LtStatus kLtSuccess = 0;
using LtHandle = void*;
using LtDesc = void*;
using LtLayout = void*;
using LtPreference = void*;
struct LtAlgo {
    uint64_t data[8];
};
struct LtHeuristic {
    LtAlgo algo;
    size_t workspace_size;
    LtStatus state;
    float waves;
    int reserved[4];
};
constexpr int kCompute32F = 68;        // CUBLAS_COMPUTE_32F
constexpr int32_t kOpN = 0, kOpT = 1;    // CUBLAS_OP_N, CUBLAS_OP_T
constexpr int kDescTransA = 3, kDescTransB = 4;                           // cublasLtMatmulDescAttributes_t
constexpr int kLayoutBatchCount = 5, kLayoutBatchStride = 6;              // cublasLtMatrixLayoutAttribute_t
constexpr int kPrefMaxWorkspace = 1, kPrefAlignA = 5, kPrefAlignB = 6;    // cublasLtMatmulPreferenceAttributes_t
constexpr int kPrefAlignC = 7, kPrefAlignD = 8;

struct Api {
    LtStatus (*create)(LtHandle*);
    size_t (*version)();
    LtStatus (*descCreate)(LtDesc*, int, cudaDataType_t);
    LtStatus (*descDestroy)(LtDesc);
    LtStatus (*descSet)(LtDesc, int, void const*, size_t);
    LtStatus (*layoutCreate)(LtLayout*, cudaDataType_t, uint64_t, uint64_t, int64_t);
    LtStatus (*layoutDestroy)(LtLayout);
    LtStatus (*layoutSet)(LtLayout, int, void const*, size_t);
    LtStatus (*prefCreate)(LtPreference*);
    LtStatus (*prefDestroy)(LtPreference);
    LtStatus (*prefSet)(LtPreference, int, void const*, size_t);
    LtStatus (*heuristic)(LtHandle, LtDesc, LtLayout, LtLayout, LtLayout, LtLayout, LtPreference, int, LtHeuristic*,
                          int*);
    LtStatus (*matmul)(LtHandle, LtDesc, void const*, void const*, LtLayout, void const*, LtLayout, void const*,
                       void const*, LtLayout, void*, LtLayout, LtAlgo const*, void*, size_t, cudaStream_t);
    bool ok = false;
    std::string line;  // describe()
};

template <typename F>
bool bind(void* lib, char const* name, F& fn, std::string& missing) {
    fn = reinterpret_cast<F>(dlsym(lib, name));
    if (fn == nullptr && missing.empty()) missing = name;
    return fn != nullptr;
}

Api load() {
    Api api{};
    char const* env = std::getenv("TORCHTRT_EXT_CUBLASLT");
    std::string const file = env != nullptr && *env != '\0' ? env : "libcublasLt.so." + std::to_string(CUDART_VERSION / 1000);
    if (file == "0") {
        api.line = "own tensor-core GEMM (cuBLASLt turned off by TORCHTRT_EXT_CUBLASLT=0)";
        return api;
    }
    void* lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        char const* why = dlerror();
        api.line = "own tensor-core GEMM (" + file + " could not be loaded: " + (why != nullptr ? why : "?") +
                   "; install nvidia-cublas, which torch's CUDA wheels bring, or name the file in TORCHTRT_EXT_CUBLASLT)";
        return api;
    }
    std::string missing;
    bind(lib, "cublasLtCreate", api.create, missing);
    bind(lib, "cublasLtGetVersion", api.version, missing);
    bind(lib, "cublasLtMatmulDescCreate", api.descCreate, missing);
    bind(lib, "cublasLtMatmulDescDestroy", api.descDestroy, missing);
    bind(lib, "cublasLtMatmulDescSetAttribute", api.descSet, missing);
    bind(lib, "cublasLtMatrixLayoutCreate", api.layoutCreate, missing);
    bind(lib, "cublasLtMatrixLayoutDestroy", api.layoutDestroy, missing);
    bind(lib, "cublasLtMatrixLayoutSetAttribute", api.layoutSet, missing);
    bind(lib, "cublasLtMatmulPreferenceCreate", api.prefCreate, missing);
    bind(lib, "cublasLtMatmulPreferenceDestroy", api.prefDestroy, missing);
    bind(lib, "cublasLtMatmulPreferenceSetAttribute", api.prefSet, missing);
    bind(lib, "cublasLtMatmulAlgoGetHeuristic", api.heuristic, missing);
    bind(lib, "cublasLtMatmul", api.matmul, missing);
    if (!missing.empty()) {
        api.line = "own tensor-core GEMM (" + file + " has no " + missing + ")";
        return api;
    }
    size_t const v = api.version();
    if (static_cast<int>(v / 10000) != CUDART_VERSION / 1000) {
        api.line = "own tensor-core GEMM (" + file + " is cuBLASLt " + std::to_string(v / 10000) + ", expected " +
                   std::to_string(CUDART_VERSION / 1000) + ".x, the CUDA major version of this build)";
        return api;
    }
    api.ok = true;
    api.line = "cuBLASLt " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
               std::to_string(v % 100) + " (" + file + ")";
    return api;  // the library stays loaded for the process
}

Api const& api() {
    // Thread-safe initialization, once per process; never destroyed, so plans released during exit still find it.
    static Api const* const loaded = new Api(load());
    return *loaded;
}

cudaError_t toCuda(LtStatus status) {
    switch (status) {
    case kLtSuccess: return cudaSuccess;
    case 1: return cudaErrorInitializationError;  // NOT_INITIALIZED
    case 3: return cudaErrorMemoryAllocation;     // ALLOC_FAILED
    case 7: return cudaErrorInvalidValue;         // INVALID_VALUE
    case 8:                                       // ARCH_MISMATCH
    case 15: return cudaErrorNotSupported;        // NOT_SUPPORTED
    case 13: return cudaErrorLaunchFailure;       // EXECUTION_FAILED
    default: return cudaErrorUnknown;
    }
}

using Key = std::array<int64_t, 16>;
constexpr size_t kMaxPlans = 512;  // distinct shapes kept; then the cache starts over

// The handles and plans of the process, guarded by one mutex. Never destroyed: at exit cuBLASLt and the CUDA context
// may already be gone, and destroying descriptors then could crash.
struct Cache {
    std::mutex mutex;
    std::map<int, LtHandle> handles;
    std::map<Key, std::shared_ptr<Plan const>> plans;
};
Cache& cache() {
    static Cache* const kept = new Cache();
    return *kept;
}

}  // namespace

struct Plan {
    LtHandle handle = nullptr;
    LtDesc desc = nullptr;
    LtLayout a = nullptr, b = nullptr, d = nullptr;
    LtAlgo algo{};
    Plan() = default;
    Plan(Plan const&) = delete;
    Plan& operator=(Plan const&) = delete;
    ~Plan() {
        for (LtLayout layout : {a, b, d}) {
            if (layout != nullptr) api().layoutDestroy(layout);
        }
        if (desc != nullptr) api().descDestroy(desc);
    }
};

namespace {

// Creates a plan for `s` (the caller holds the cache's mutex). Returns the cuBLASLt status; plan is complete on success.
LtStatus makePlan(Plan& plan, Shape const& s, LtHandle handle) {
    Api const& lt = api();
    plan.handle = handle;
    LtStatus st = lt.descCreate(&plan.desc, kCompute32F, CUDA_R_32F);
    if (st == kLtSuccess) st = lt.descSet(plan.desc, kDescTransA, &kOpT, sizeof(kOpT));
    if (st == kLtSuccess) st = lt.descSet(plan.desc, kDescTransB, &kOpN, sizeof(kOpN));
    struct Matrix {
        LtLayout* layout;
        cudaDataType_t type;
        int64_t rows, cols, ld, stride;
    };
    for (Matrix const& m : {Matrix{&plan.a, s.type, s.k, s.m, s.lda, s.stride_a},
                            Matrix{&plan.b, s.type, s.k, s.n, s.ldb, s.stride_b},
                            Matrix{&plan.d, s.out_type, s.m, s.n, s.ldd, s.stride_d}}) {
        int32_t const count = static_cast<int32_t>(s.batch);
        if (st == kLtSuccess) st = lt.layoutCreate(m.layout, m.type, m.rows, m.cols, m.ld);
        if (st == kLtSuccess) st = lt.layoutSet(*m.layout, kLayoutBatchCount, &count, sizeof(count));
        if (st == kLtSuccess) st = lt.layoutSet(*m.layout, kLayoutBatchStride, &m.stride, sizeof(m.stride));
    }
    LtPreference pref = nullptr;
    if (st == kLtSuccess) st = lt.prefCreate(&pref);
    uint64_t const workspace = kWorkspaceBytes;
    uint32_t const align_a = s.align_a, align_b = s.align_b, align_d = s.align_d;
    if (st == kLtSuccess) st = lt.prefSet(pref, kPrefMaxWorkspace, &workspace, sizeof(workspace));
    if (st == kLtSuccess) st = lt.prefSet(pref, kPrefAlignA, &align_a, sizeof(align_a));
    if (st == kLtSuccess) st = lt.prefSet(pref, kPrefAlignB, &align_b, sizeof(align_b));
    if (st == kLtSuccess) st = lt.prefSet(pref, kPrefAlignC, &align_d, sizeof(align_d));
    if (st == kLtSuccess) st = lt.prefSet(pref, kPrefAlignD, &align_d, sizeof(align_d));
    LtHeuristic found{};
    int count = 0;
    if (st == kLtSuccess) st = lt.heuristic(handle, plan.desc, plan.a, plan.b, plan.d, plan.d, pref, 1, &found, &count);
    if (pref != nullptr) lt.prefDestroy(pref);
    if (st == kLtSuccess && (count < 1 || found.state != kLtSuccess)) st = 15;  // no algorithm: NOT_SUPPORTED
    plan.algo = found.algo;
    return st;
}

}  // namespace

bool available() noexcept {
    try {
        return api().ok;
    } catch (...) {
        return false;
    }
}

char const* describe() noexcept {
    try {
        return api().line.c_str();
    } catch (...) {
        return "own tensor-core GEMM (cuBLASLt could not be looked up)";
    }
}

int32_t alignmentOf(void const* ptr) noexcept {
    uintptr_t const address = reinterpret_cast<uintptr_t>(ptr);
    int32_t align = 256;
    while (align > 1 && address % static_cast<uintptr_t>(align) != 0) align /= 2;
    return align;
}

std::shared_ptr<Plan const> plan(Shape const& s, cudaError_t& status) noexcept {
    try {
        if (!available()) {
            status = cudaErrorNotSupported;
            return nullptr;
        }
        int device = 0;
        status = cudaGetDevice(&device);
        if (status != cudaSuccess) return nullptr;
        Key const key{device, static_cast<int64_t>(s.type), static_cast<int64_t>(s.out_type), s.m, s.n, s.k, s.lda,
                      s.ldb, s.ldd, s.batch, s.stride_a, s.stride_b, s.stride_d, s.align_a, s.align_b, s.align_d};
        Cache& c = cache();
        std::lock_guard<std::mutex> lock(c.mutex);
        auto const found = c.plans.find(key);
        if (found != c.plans.end()) {
            status = found->second != nullptr ? cudaSuccess : cudaErrorNotSupported;
            return found->second;
        }
        LtHandle& handle = c.handles[device];  // one per device, kept for the process
        if (handle == nullptr) {
            LtStatus const st = api().create(&handle);
            if (st != kLtSuccess) {
                handle = nullptr;
                status = toCuda(st);
                return nullptr;
            }
        }
        auto made = std::make_shared<Plan>();
        LtStatus const st = makePlan(*made, s, handle);
        status = toCuda(st);
        if (st != kLtSuccess) made = nullptr;
        if (status != cudaSuccess && status != cudaErrorNotSupported) return nullptr;  // a failure that may pass
        // A shape without an algorithm is kept too (as null), so a caller that then falls back to another GEMM does
        // not ask the heuristic again on every call.
        if (c.plans.size() >= kMaxPlans) c.plans.clear();  // plans in use elsewhere live on in their shared_ptr
        c.plans.emplace(key, made);
        return made;
    } catch (...) {
        status = cudaErrorMemoryAllocation;  // std::bad_alloc from the map or the string
        return nullptr;
    }
}

cudaError_t run(Plan const& p, void const* a, void const* b, void* d, bool accumulate, void* workspace,
                cudaStream_t stream) noexcept {
    float const alpha = 1.f, beta = accumulate ? 1.f : 0.f;
    return toCuda(api().matmul(p.handle, p.desc, &alpha, a, p.a, b, p.b, &beta, d, p.d, d, p.d, &p.algo, workspace,
                               static_cast<size_t>(kWorkspaceBytes), stream));
}

}  // namespace cublaslt
}  // namespace torchtrt_ext

extern "C" TORCHTRT_EXT_API char const* torchtrt_ext_gemm_library(void) {
    return torchtrt_ext::cublaslt::describe();
}
