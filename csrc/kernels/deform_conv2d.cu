// DeformConv2d sampling kernel behind the extern "C" launchers of deform_conv2d.h.
//
// One launch samples the whole batch. A thread owns one output pixel of one kernel tap and offset group: it reads
// the offset pair and the mask once, computes the four corner indices and weights once (mask folded in, corners
// outside the image given weight 0), then walks `channels_per_thread` channels of its offset group, reading four
// corners of each channel plane and writing one column element. Consecutive threads own consecutive output pixels,
// so the column writes (the dominant memory traffic) are fully coalesced; the corner reads are gathers that mostly
// hit L1/L2 because neighbouring pixels sample neighbouring points.
//
// Grid: x = pixel tiles, y = (offset group, tap, channel chunk), z = images (the launcher splits batches beyond the
// grid limit). All arithmetic is FP32; data are float, __half or __nv_bfloat16. The split variant (float only)
// writes each value twice, as its TF32 part and its FP32 remainder, for an error-compensated TF32 GEMM.
#include "kernels/deform_conv2d.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

namespace torchtrt_ext {
namespace deform_conv2d_detail {

constexpr int kThreads = 128;
constexpr int64_t kMaxGridX = 0x7fffffff;
constexpr int64_t kMaxGridYZ = 65535;

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

struct Params {
    int64_t channels;
    int64_t height;
    int64_t width;
    int64_t kernel_h;
    int64_t kernel_w;
    int64_t out_h;
    int64_t out_w;
    int64_t stride_h;
    int64_t stride_w;
    int64_t pad_h;
    int64_t pad_w;
    int64_t dil_h;
    int64_t dil_w;
    int64_t offset_groups;
    int64_t channels_per_thread;
    int64_t chunks;        // ceil(channels / offset_groups / channels_per_thread)
    int64_t image_stride;  // elements between two images' column blocks: C*K*P, or 2*C*K*P when split
};

// The TF32 part of v (low 13 mantissa bits cleared: exactly representable in TF32) and the FP32 remainder v - hi
// (exact). Tensor cores then compute hi*hi, hi*lo and lo*hi with errors near FP32's ("3xTF32").
__device__ __forceinline__ float tf32High(float v) { return __uint_as_float(__float_as_uint(v) & 0xffffe000u); }

template <typename T, bool kSplit>
__global__ void __launch_bounds__(kThreads)
    im2colKernel(T const* __restrict__ input, T const* __restrict__ offset, T const* __restrict__ mask,
                 T* __restrict__ columns, Params const p) {
    int64_t const pixels = p.out_h * p.out_w;
    int64_t const pix = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
    if (pix >= pixels) return;
    int64_t const taps = p.kernel_h * p.kernel_w;
    int64_t rest = blockIdx.y;
    int64_t const chunk = rest % p.chunks;
    rest /= p.chunks;
    int64_t const k = rest % taps;
    int64_t const g = rest / taps;
    int64_t const n = blockIdx.z;
    int64_t const i = k / p.kernel_w;
    int64_t const j = k - i * p.kernel_w;
    int64_t const oy = pix / p.out_w;
    int64_t const ox = pix - oy * p.out_w;

    int64_t const ng = n * p.offset_groups + g;
    int64_t const off = (ng * 2 * taps + 2 * k) * pixels + pix;
    float const dy = toF32(offset[off]);
    float const dx = toF32(offset[off + pixels]);
    float const m = mask != nullptr ? toF32(mask[(ng * taps + k) * pixels + pix]) : 1.f;
    float const y = static_cast<float>(oy * p.stride_h - p.pad_h + i * p.dil_h) + dy;
    float const x = static_cast<float>(ox * p.stride_w - p.pad_w + j * p.dil_w) + dx;

    int const h = static_cast<int>(p.height);
    int const w = static_cast<int>(p.width);
    float w00 = 0.f, w01 = 0.f, w10 = 0.f, w11 = 0.f;
    int i00 = 0, i01 = 0, i10 = 0, i11 = 0;
    if (y > -1.f && y < static_cast<float>(h) && x > -1.f && x < static_cast<float>(w)) {  // false for NaN
        float const y0f = floorf(y);
        float const x0f = floorf(x);
        int const y0 = static_cast<int>(y0f);
        int const x0 = static_cast<int>(x0f);
        float const ly = y - y0f, lx = x - x0f;
        float const hy = 1.f - ly, hx = 1.f - lx;
        bool const top = y0 >= 0, bottom = y0 + 1 <= h - 1, left = x0 >= 0, right = x0 + 1 <= w - 1;
        if (top && left) { w00 = hy * hx * m; i00 = y0 * w + x0; }
        if (top && right) { w01 = hy * lx * m; i01 = y0 * w + x0 + 1; }
        if (bottom && left) { w10 = ly * hx * m; i10 = (y0 + 1) * w + x0; }
        if (bottom && right) { w11 = ly * lx * m; i11 = (y0 + 1) * w + x0 + 1; }
    }

    int64_t const per_group = p.channels / p.offset_groups;
    int64_t const c_begin = g * per_group + chunk * p.channels_per_thread;
    int64_t const c_end = min(g * per_group + per_group, c_begin + p.channels_per_thread);
    int64_t const plane = p.height * p.width;
    int64_t const row_stride = taps * pixels;
    T const* src = input + (n * p.channels + c_begin) * plane;
    T* dst = columns + n * p.image_stride + (c_begin * taps + k) * pixels + pix;
    int64_t const lo_offset = p.channels * taps * pixels;  // split: the remainders' rows follow the TF32 rows
#pragma unroll 4
    for (int64_t c = c_begin; c < c_end; ++c) {
        float const v = w00 * toF32(src[i00]) + w01 * toF32(src[i01]) + w10 * toF32(src[i10]) + w11 * toF32(src[i11]);
        if constexpr (kSplit) {
            float const hi = tf32High(v);
            dst[0] = hi;
            dst[lo_offset] = v - hi;
        } else {
            *dst = fromF32<T>(v);
        }
        src += plane;
        dst += row_stride;
    }
}

template <typename T, bool kSplit>
int32_t im2col(void const* input, void const* offset, void const* mask, void* columns, int64_t n, int64_t channels,
               int64_t height, int64_t width, int64_t kernel_h, int64_t kernel_w, int64_t out_h, int64_t out_w,
               int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w,
               int64_t offset_groups, cudaStream_t stream) {
    if (n < 0 || channels < 0 || out_h < 0 || out_w < 0 || height < 1 || width < 1 || kernel_h < 1 ||
        kernel_w < 1 || stride_h < 1 || stride_w < 1 || dil_h < 1 || dil_w < 1 || pad_h < 0 || pad_w < 0 ||
        offset_groups < 1 || channels % offset_groups != 0 || height * width > 0x7fffffff) {
        return static_cast<int32_t>(cudaErrorInvalidValue);
    }
    int64_t const pixels = out_h * out_w;
    if (n == 0 || channels == 0 || pixels == 0) return static_cast<int32_t>(cudaSuccess);
    if (input == nullptr || offset == nullptr || columns == nullptr) return static_cast<int32_t>(cudaErrorInvalidValue);
    int64_t const taps = kernel_h * kernel_w;
    int64_t const per_group = channels / offset_groups;
    Params p{channels, height, width, kernel_h, kernel_w, out_h, out_w, stride_h, stride_w, pad_h, pad_w,
             dil_h, dil_w, offset_groups, 32, 0, (kSplit ? 2 : 1) * channels * kernel_h * kernel_w * out_h * out_w};
    p.channels_per_thread = std::min<int64_t>(p.channels_per_thread, per_group);
    p.chunks = (per_group + p.channels_per_thread - 1) / p.channels_per_thread;
    while (offset_groups * taps * p.chunks > kMaxGridYZ && p.chunks > 1) {  // fold more channels into a thread
        p.channels_per_thread *= 2;
        p.chunks = (per_group + p.channels_per_thread - 1) / p.channels_per_thread;
    }
    int64_t const grid_x = (pixels + kThreads - 1) / kThreads;
    int64_t const grid_y = offset_groups * taps * p.chunks;
    if (grid_x > kMaxGridX || grid_y > kMaxGridYZ) return static_cast<int32_t>(cudaErrorInvalidValue);
    T const* in = static_cast<T const*>(input);
    T const* off = static_cast<T const*>(offset);
    T const* msk = static_cast<T const*>(mask);
    T* cols = static_cast<T*>(columns);
    for (int64_t n0 = 0; n0 < n; n0 += kMaxGridYZ) {  // images beyond the grid's z limit: one more launch each
        int64_t const count = std::min<int64_t>(kMaxGridYZ, n - n0);
        dim3 const grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y), static_cast<unsigned>(count));
        im2colKernel<T, kSplit><<<grid, kThreads, 0, stream>>>(
            in + n0 * channels * height * width, off + n0 * 2 * offset_groups * taps * pixels,
            msk != nullptr ? msk + n0 * offset_groups * taps * pixels : nullptr,
            cols + n0 * p.image_stride, p);
        cudaError_t const status = cudaGetLastError();
        if (status != cudaSuccess) return static_cast<int32_t>(status);
    }
    return static_cast<int32_t>(cudaSuccess);
}

}  // namespace deform_conv2d_detail
}  // namespace torchtrt_ext

#define TORCHTRT_EXT_DCN_ARGS                                                                                      \
    void const *input, void const *offset, void const *mask, void *columns, int64_t n, int64_t channels,          \
        int64_t height, int64_t width, int64_t kernel_h, int64_t kernel_w, int64_t out_h, int64_t out_w,           \
        int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w,            \
        int64_t offset_groups, cudaStream_t stream
#define TORCHTRT_EXT_DCN_PASS                                                                                      \
    input, offset, mask, columns, n, channels, height, width, kernel_h, kernel_w, out_h, out_w, stride_h,          \
        stride_w, pad_h, pad_w, dil_h, dil_w, offset_groups, stream

extern "C" {

TORCHTRT_EXT_API int32_t torchtrt_ext_deform_conv2d_im2col_f32(TORCHTRT_EXT_DCN_ARGS) {
    return torchtrt_ext::deform_conv2d_detail::im2col<float, false>(TORCHTRT_EXT_DCN_PASS);
}

TORCHTRT_EXT_API int32_t torchtrt_ext_deform_conv2d_im2col_split_tf32(TORCHTRT_EXT_DCN_ARGS) {
    return torchtrt_ext::deform_conv2d_detail::im2col<float, true>(TORCHTRT_EXT_DCN_PASS);
}

TORCHTRT_EXT_API int32_t torchtrt_ext_deform_conv2d_im2col_f16(TORCHTRT_EXT_DCN_ARGS) {
    return torchtrt_ext::deform_conv2d_detail::im2col<__half, false>(TORCHTRT_EXT_DCN_PASS);
}

TORCHTRT_EXT_API int32_t torchtrt_ext_deform_conv2d_im2col_bf16(TORCHTRT_EXT_DCN_ARGS) {
    return torchtrt_ext::deform_conv2d_detail::im2col<__nv_bfloat16, false>(TORCHTRT_EXT_DCN_PASS);
}

}  // extern "C"

#undef TORCHTRT_EXT_DCN_ARGS
#undef TORCHTRT_EXT_DCN_PASS
