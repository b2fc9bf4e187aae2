// Device helpers shared by the kernels: FP32 conversions of float / __half / __nv_bfloat16, and aligned packs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

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

// A pack stored at dst (aligned to the pack) as one access: a 16-byte pack by __stwb (st.global.wb.v4, the default
// cache policy), as nvcc splits a plain uint4 or pack assignment through a T* into 2- and 4-byte stores.
template <typename T, int VEC>
__device__ __forceinline__ void writePack(T* dst, Pack<T, VEC> const& pack) {
    if constexpr (sizeof(pack) == sizeof(uint4)) {
        uint4 bits;
        __builtin_memcpy(&bits, &pack, sizeof(bits));
        __stwb(reinterpret_cast<uint4*>(dst), bits);
    } else {
        *reinterpret_cast<Pack<T, VEC>*>(dst) = pack;
    }
}

// v rounded to T, stored at dst as one pack (writePack).
template <typename T, int VEC>
__device__ __forceinline__ void storePack(T* dst, float const (&v)[VEC]) {
    Pack<T, VEC> pack;
#pragma unroll
    for (int e = 0; e < VEC; ++e) pack.v[e] = fromF32<T>(v[e]);
    writePack(dst, pack);
}

// Element j of a pack as FP32 (j a constant once the caller's loop is unrolled). A bf16 pair is read straight from the 32-bit word that holds it (bf16 is the upper half
// of an fp32): converting element by element unpacks a 16-byte pack into one 16-bit register per element, and the
// register-caching kernels then spill.
template <typename T, int VEC>
__device__ __forceinline__ float elementF32(Pack<T, VEC> const& p, int j) {
    if constexpr (std::is_same_v<T, __nv_bfloat16> && VEC % 2 == 0) {
        uint32_t word;
        __builtin_memcpy(&word, &p.v[j & ~1], sizeof(word));
        return __uint_as_float((j & 1) ? (word & 0xffff0000u) : (word << 16));
    } else {
        return toF32(p.v[j]);
    }
}

}  // namespace torchtrt_ext
