// Device helpers shared by the kernels: FP32 conversions of float / __half / __nv_bfloat16, and aligned packs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace torchtrt_ext {

__device__ __forceinline__ float toF32(float v) { return v; }
__device__ __forceinline__ float toF32(__half v) { return __half2float(v); }
__device__ __forceinline__ float toF32(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T fromF32(float v);
template <>
__device__ __forceinline__ float fromF32<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half fromF32<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 fromF32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// VEC consecutive elements moved as one aligned access (16 bytes when VEC * sizeof(T) == 16).
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
    T v[VEC];
};

}  // namespace torchtrt_ext
