// cuBLASLt, loaded at run time: the tensor-core GEMMs of the kernels (DeformConv2d) go through NVIDIA's own library
// where it can be loaded, and through our own kernels where it cannot.
//
// The library is opened with dlopen on first use (`libcublasLt.so.<CUDA major of this build>`, the one torch and
// TensorRT load; TORCHTRT_EXT_CUBLASLT=<path> names another file, TORCHTRT_EXT_CUBLASLT=0 turns it off), so the
// kernels and plugin libraries neither link it nor need it installed. TensorRT gives IPluginV3 plugins no cuBLAS
// handle; we keep one handle per device for the process, and one plan (descriptors + the heuristic's algorithm) per
// GEMM shape, so a call after the first costs a map lookup. cuBLASLt's functions may be called from several threads
// on one handle.
//
// Host code only: no cuBLAS header is needed to build (the few declarations used are in cublaslt.cu).
#pragma once

#include <cuda_runtime_api.h>
#include <library_types.h>
#include <stdint.h>

#include <memory>

#include "kernels/api.h"

namespace torchtrt_ext {
namespace cublaslt {

// Bytes of workspace a GEMM may use (the heuristic is asked for algorithms that need no more).
constexpr int64_t kWorkspaceBytes = int64_t{4} << 20;

// One strided-batched "TN" GEMM, column-major as cuBLAS sees it: for each batch b,
//   D[b] (m x n, ldd) = A[b]^T (A: k x m, lda) * B[b] (k x n, ldb)  [+ D[b] when run() accumulates],
// A and B of `type`, D of `out_type`, sums in FP32 (CUBLAS_COMPUTE_32F: fp16/bf16 on tensor cores with FP32
// accumulation; float32 as true FP32, never TF32).
struct Shape {
    cudaDataType_t type, out_type;
    int64_t m, n, k, lda, ldb, ldd;
    int64_t batch, stride_a, stride_b, stride_d;
    int32_t align_a, align_b, align_d;  // bytes the pointers are aligned to (a power of 2, at most 256)
};

struct Plan;  // descriptors and algorithm of one Shape on one device

// True when the library is loaded (the first call tries). Thread-safe.
bool available() noexcept;

// One line for logs: "cuBLASLt <version> (<file>)", or why it is not used ("... could not be loaded: <dlerror>").
char const* describe() noexcept;

// The plan of `shape` on the current device, cached (a shape without an algorithm too); nullptr when cuBLASLt is not
// available or has no algorithm for it (status then says which: cudaErrorNotSupported, or the error of a failed
// cuBLASLt call).
std::shared_ptr<Plan const> plan(Shape const& shape, cudaError_t& status) noexcept;

// Enqueues the planned GEMM on `stream` (workspace: kWorkspaceBytes, 256-byte aligned); `accumulate` adds the
// product to what D holds (beta = 1) instead of overwriting it. Returns a cudaError_t.
cudaError_t run(Plan const& plan, void const* a, void const* b, void* d, bool accumulate, void* workspace,
                cudaStream_t stream) noexcept;

// The alignment Shape wants for a pointer: its largest power-of-2 divisor, at most 256.
int32_t alignmentOf(void const* ptr) noexcept;

}  // namespace cublaslt
}  // namespace torchtrt_ext

#ifdef __cplusplus
extern "C" {
#endif

// The GEMM library line of cublaslt::describe(), for the eager op's and the plugins' logs.
TORCHTRT_EXT_API char const* torchtrt_ext_gemm_library(void);

#ifdef __cplusplus
}
#endif
