// L2Norm CUDA kernels: y = x / max(||x||_2, eps) along one axis (torch.nn.functional.normalize semantics).
//
// The tensor is seen as [outer, reduced, inner] (contiguous, row-major): the channel axis of NCHW is
// (N, C, H*W), the last axis is (prod(leading dims), D, 1). For every (o, i):
//     y[o, :, i] = x[o, :, i] / max(||x[o, :, i]||_2, eps)
// Sums of squares are accumulated in FP32 for every data type; a zero vector gives zeros (for eps > 0), a NaN in a
// vector gives NaNs in that vector (as torch's clamp_min does).
//
// No TensorRT and no torch headers here: the same launchers serve the eager op (ctypes), the C++ plugin (enqueue)
// and the Python plugin.
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "kernels/api.h"


#ifdef __cplusplus
extern "C" {
#endif

// x, y: contiguous device buffers of outer * reduced * inner elements (they must not overlap unless x == y).
// Sizes: outer >= 0, reduced >= 1, inner >= 0 (outer == 0 or inner == 0 launches nothing); 64-bit sizes are fine.
// The work is enqueued on `stream`; nothing is synchronized.
// Returns a cudaError_t as int32_t: 0 (cudaSuccess) once the launch was accepted; cudaErrorInvalidValue (1) for bad
// sizes or a null pointer; otherwise the error of the failed CUDA call or launch. Never exits or aborts.
TORCHTRT_EXT_API int32_t torchtrt_ext_l2norm_f32(void const* x, void* y, int64_t outer, int64_t reduced, int64_t inner,
                                                 float eps, cudaStream_t stream);
// Same, __half data.
TORCHTRT_EXT_API int32_t torchtrt_ext_l2norm_f16(void const* x, void* y, int64_t outer, int64_t reduced, int64_t inner,
                                                 float eps, cudaStream_t stream);
// Same, __nv_bfloat16 data.
TORCHTRT_EXT_API int32_t torchtrt_ext_l2norm_bf16(void const* x, void* y, int64_t outer, int64_t reduced, int64_t inner,
                                                  float eps, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
