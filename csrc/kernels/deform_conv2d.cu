// DeformConv2d sampling kernel behind the extern "C" launchers of deform_conv2d.h.
//
// One launch samples the whole batch. A block owns a tile of kTilePixels consecutive output pixels of one image and
// walks its items (pixel, kernel tap, run of VEC channels: 16 bytes when the channel counts allow, else one
// channel), consecutive threads on consecutive channel runs of the same pixel and tap. With a channels-last input the
// four corner reads of a warp are contiguous 16-byte runs, the column writes ([pixel][group, tap, channel]) are
// contiguous too, and the tile's corners (a window a few pixels larger than the tile) stay in L1 while all its taps
// read them, so most corner reads never reach L2. When 256 is a multiple of the number of channel runs, a thread
// keeps one run for the whole tile, so its channel-dependent addressing (64-bit divisions) is computed once. The
// sampling point, corner indices and bilinear weights (mask folded in) are recomputed per item from one broadcast
// read of the offsets and mask: a few dozen ALU instructions.
//
// All arithmetic is FP32; data are float, __half or __nv_bfloat16. The split variant (float only) writes each value
// twice, as its TF32 part and its FP32 remainder, for an error-compensated TF32 GEMM.
#include "kernels/deform_conv2d.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace torchtrt_ext {
namespace deform_conv2d_detail {

constexpr int kThreads = 256;
constexpr int kTilePixels = 16;
constexpr int64_t kMaxGridX = 0x7fffffff;

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

// The TF32 part of v (low 13 mantissa bits cleared: exactly representable in TF32); v - tf32High(v) is exact.
__device__ __forceinline__ float tf32High(float v) { return __uint_as_float(__float_as_uint(v) & 0xffffe000u); }

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
    int64_t per_group;         // channels / groups
    int64_t per_offset_group;  // channels / offset_groups
    int64_t row_stride;        // elements per pixel row of columns: C*K, or 2*C*K when split
};

// What a thread needs about its run of channels, computed once per run (two 64-bit divisions).
template <typename T>
struct Channels {
    T const* src;    // input + image + first channel of the run (channels-last)
    int64_t ng;      // image * offset_groups + offset group of the run
    int64_t row;     // column of the run at tap 0: gc * (K * Cg) + channel within its conv group
};

template <typename T, int VEC>
__device__ __forceinline__ Channels<T> channelsOf(T const* input, Params const& p, int64_t n, int64_t run) {
    int64_t const c = run * VEC;
    int64_t const gc = c / p.per_group;
    return {input + n * p.height * p.width * p.channels + c, n * p.offset_groups + c / p.per_offset_group,
            gc * (p.kernel_h * p.kernel_w * p.per_group) + (c - gc * p.per_group)};
}

template <typename T, int VEC, bool kSplit, typename Idx>
__device__ __forceinline__ void sampleItem(T const* __restrict__ offset, T const* __restrict__ mask,
                                           T* __restrict__ columns, Params const& p, Channels<T> const& ch,
                                           Idx const n, Idx const pix, Idx const k) {
    Idx const taps = static_cast<Idx>(p.kernel_h * p.kernel_w);
    Idx const pixels = static_cast<Idx>(p.out_h * p.out_w);
    Idx const out_w = static_cast<Idx>(p.out_w);
    Idx const oy = pix / out_w;
    Idx const ox = pix - oy * out_w;
    Idx const kw = static_cast<Idx>(p.kernel_w);
    Idx const i = k / kw;
    Idx const j = k - i * kw;

    int64_t const ng = ch.ng;
    int64_t const off = (ng * 2 * taps + 2 * static_cast<int64_t>(k)) * pixels + pix;
    float const dy = toF32(offset[off]);
    float const dx = toF32(offset[off + pixels]);
    float const m = mask != nullptr ? toF32(mask[(ng * taps + k) * pixels + pix]) : 1.f;
    float const y = static_cast<float>(static_cast<int64_t>(oy) * p.stride_h - p.pad_h + static_cast<int64_t>(i) * p.dil_h) + dy;
    float const x = static_cast<float>(static_cast<int64_t>(ox) * p.stride_w - p.pad_w + static_cast<int64_t>(j) * p.dil_w) + dx;

    int const h = static_cast<int>(p.height);
    int const w = static_cast<int>(p.width);
    float cw[4] = {0.f, 0.f, 0.f, 0.f};
    int ci[4] = {-1, -1, -1, -1};  // pixel index of each corner inside the image, -1 outside
    if (y > -1.f && y < static_cast<float>(h) && x > -1.f && x < static_cast<float>(w)) {  // false for NaN
        float const y0f = floorf(y);
        float const x0f = floorf(x);
        int const y0 = static_cast<int>(y0f);
        int const x0 = static_cast<int>(x0f);
        float const ly = y - y0f, lx = x - x0f;
        float const hy = 1.f - ly, hx = 1.f - lx;
        bool const top = y0 >= 0, bottom = y0 + 1 <= h - 1, left = x0 >= 0, right = x0 + 1 <= w - 1;
        if (top && left) { cw[0] = hy * hx * m; ci[0] = y0 * w + x0; }
        if (top && right) { cw[1] = hy * lx * m; ci[1] = y0 * w + x0 + 1; }
        if (bottom && left) { cw[2] = ly * hx * m; ci[2] = (y0 + 1) * w + x0; }
        if (bottom && right) { cw[3] = ly * lx * m; ci[3] = (y0 + 1) * w + x0 + 1; }
    }

    float acc[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc[e] = 0.f;
    T const* src = ch.src;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        if (ci[q] < 0) continue;  // a corner outside the image contributes 0 (it is not read)
        Pack<T, VEC> const v = *reinterpret_cast<Pack<T, VEC> const*>(src + static_cast<int64_t>(ci[q]) * p.channels);
#pragma unroll
        for (int e = 0; e < VEC; ++e) acc[e] += cw[q] * toF32(v.v[e]);
    }

    int64_t const row = ch.row + static_cast<int64_t>(k) * p.per_group;
    T* dst = columns + (static_cast<int64_t>(n) * pixels + pix) * p.row_stride + row;
    if constexpr (kSplit) {
        Pack<T, VEC> hi, lo;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
            hi.v[e] = tf32High(acc[e]);
            lo.v[e] = acc[e] - hi.v[e];
        }
        *reinterpret_cast<Pack<T, VEC>*>(dst) = hi;
        *reinterpret_cast<Pack<T, VEC>*>(dst + p.channels * taps) = lo;
    } else {
        Pack<T, VEC> out;
#pragma unroll
        for (int e = 0; e < VEC; ++e) out.v[e] = fromF32<T>(acc[e]);
        *reinterpret_cast<Pack<T, VEC>*>(dst) = out;
    }
}

// Block b samples pixels [tile * kTilePixels, +kTilePixels) of image n (b = n * tiles + tile), every tap and run.
template <typename T, int VEC, bool kSplit, typename Idx>
__global__ void __launch_bounds__(kThreads)
    im2colKernel(T const* __restrict__ input, T const* __restrict__ offset, T const* __restrict__ mask,
                 T* __restrict__ columns, Params const p, Idx const tiles) {
    Idx const runs = static_cast<Idx>(p.channels / VEC);
    Idx const taps = static_cast<Idx>(p.kernel_h * p.kernel_w);
    Idx const pixels = static_cast<Idx>(p.out_h * p.out_w);
    Idx const n = static_cast<Idx>(blockIdx.x) / tiles;
    Idx const first = (static_cast<Idx>(blockIdx.x) - n * tiles) * kTilePixels;
    Idx const count = min(static_cast<Idx>(kTilePixels), pixels - first);
    Idx const slots = count * taps;  // (pixel, tap) pairs of the tile
    if (kThreads % runs == 0) {  // the usual case: a thread keeps one run of channels for the whole tile
        Idx const run = static_cast<Idx>(threadIdx.x) % runs;
        Channels<T> const ch = channelsOf<T, VEC>(input, p, n, run);
        for (Idx slot = static_cast<Idx>(threadIdx.x) / runs; slot < slots; slot += kThreads / runs) {
            Idx const local = slot / taps;
            sampleItem<T, VEC, kSplit, Idx>(offset, mask, columns, p, ch, n, first + local, slot - local * taps);
        }
    } else {
        for (Idx item = threadIdx.x; item < slots * runs; item += kThreads) {
            Idx const slot = item / runs;
            Idx const local = slot / taps;
            Channels<T> const ch = channelsOf<T, VEC>(input, p, n, item - slot * runs);
            sampleItem<T, VEC, kSplit, Idx>(offset, mask, columns, p, ch, n, first + local, slot - local * taps);
        }
    }
}

template <typename T, int VEC, bool kSplit>
cudaError_t launch(T const* input, T const* offset, T const* mask, T* columns, Params const& p, int64_t n,
                   int64_t total, cudaStream_t stream) {
    int64_t const pixels = p.out_h * p.out_w;
    int64_t const tiles = (pixels + kTilePixels - 1) / kTilePixels;
    int64_t const blocks = n * tiles;
    if (blocks > kMaxGridX) return cudaErrorInvalidValue;
    if (total <= 0x7fffffff) {  // 32-bit index arithmetic (cheaper divisions) when every index fits
        im2colKernel<T, VEC, kSplit, int32_t><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
            input, offset, mask, columns, p, static_cast<int32_t>(tiles));
    } else {
        im2colKernel<T, VEC, kSplit, int64_t><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
            input, offset, mask, columns, p, tiles);
    }
    return cudaGetLastError();
}

inline bool aligned16(void const* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

template <typename T, bool kSplit>
int32_t im2col(void const* input, void const* offset, void const* mask, void* columns, int64_t n, int64_t channels,
               int64_t height, int64_t width, int64_t kernel_h, int64_t kernel_w, int64_t out_h, int64_t out_w,
               int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w,
               int64_t groups, int64_t offset_groups, cudaStream_t stream) {
    if (n < 0 || channels < 0 || out_h < 0 || out_w < 0 || height < 1 || width < 1 || kernel_h < 1 ||
        kernel_w < 1 || stride_h < 1 || stride_w < 1 || dil_h < 1 || dil_w < 1 || pad_h < 0 || pad_w < 0 ||
        groups < 1 || offset_groups < 1 || channels % offset_groups != 0 || channels % groups != 0 ||
        height * width > 0x7fffffff) {
        return static_cast<int32_t>(cudaErrorInvalidValue);
    }
    int64_t const pixels = out_h * out_w;
    if (n == 0 || channels == 0 || pixels == 0) return static_cast<int32_t>(cudaSuccess);
    if (input == nullptr || offset == nullptr || columns == nullptr) return static_cast<int32_t>(cudaErrorInvalidValue);
    int64_t const taps = kernel_h * kernel_w;
    Params const p{channels, height, width, kernel_h, kernel_w, out_h, out_w, stride_h, stride_w, pad_h, pad_w,
                   dil_h, dil_w, offset_groups, channels / groups, channels / offset_groups,
                   (kSplit ? 2 : 1) * channels * taps};
    T const* in = static_cast<T const*>(input);
    T const* off = static_cast<T const*>(offset);
    T const* msk = static_cast<T const*>(mask);
    T* cols = static_cast<T*>(columns);
    constexpr int kVec = 16 / sizeof(T);
    bool const vec = p.per_group % kVec == 0 && p.per_offset_group % kVec == 0 && aligned16(input) &&
                     aligned16(columns);
    int64_t const total = n * pixels * taps * (vec ? channels / kVec : channels);
    cudaError_t const status = vec ? launch<T, kVec, kSplit>(in, off, msk, cols, p, n, total, stream)
                                   : launch<T, 1, kSplit>(in, off, msk, cols, p, n, total, stream);
    return static_cast<int32_t>(status);
}

}  // namespace deform_conv2d_detail
}  // namespace torchtrt_ext

#define TORCHTRT_EXT_DCN_ARGS                                                                                      \
    void const *input, void const *offset, void const *mask, void *columns, int64_t n, int64_t channels,          \
        int64_t height, int64_t width, int64_t kernel_h, int64_t kernel_w, int64_t out_h, int64_t out_w,           \
        int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w,            \
        int64_t groups, int64_t offset_groups, cudaStream_t stream
#define TORCHTRT_EXT_DCN_PASS                                                                                      \
    input, offset, mask, columns, n, channels, height, width, kernel_h, kernel_w, out_h, out_w, stride_h,          \
        stride_w, pad_h, pad_w, dil_h, dil_w, groups, offset_groups, stream

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
