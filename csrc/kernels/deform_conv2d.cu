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
//
// The full-op launchers (for the TensorRT plugins, which cannot use cuBLAS) add three kernels around the sampling,
// all in the caller's workspace: the weight reordered to the columns' row order (FP32), the NCHW input transposed to
// channels-last (32x32 shared-memory tiles), and a grouped GEMM of our own: 64x64 output tiles, K in steps of 16
// staged in shared memory, 4x4 outputs per thread in registers, FP32 accumulation, bias added in the epilogue,
// written NCHW. Images are processed in slices whose columns fit the workspace.
#include "kernels/deform_conv2d.h"
#include "kernels/numeric.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

namespace torchtrt_ext {
namespace deform_conv2d_detail {

constexpr int kThreads = 256;
constexpr int kTilePixels = 16;
constexpr int64_t kMaxGridX = 0x7fffffff;

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


// ------------------------------------------------------------------------------------------ the whole op (plugins)
constexpr int64_t kColumnsBudgetBytes = int64_t{256} << 20;  // columns of one GEMM pass (at least one image)
constexpr int64_t kWorkspaceAlign = 256;
constexpr int kGemmTile = 64;     // output tile: kGemmTile x kGemmTile (rows: output channels, cols: pixels)
constexpr int kGemmStep = 16;     // reduction step staged in shared memory
constexpr int kGemmThreads = 256; // 16 x 16 threads, 4 x 4 outputs each
constexpr int kTransposeTile = 32;
constexpr int64_t kMaxGridYZ = 65535;

inline int64_t alignUp(int64_t bytes) { return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign; }

// Sizes of the full op, checked once; every count fits int64 (checked) and the workspace layout follows from them.
struct OpSizes {
    int64_t n, channels, height, width, out_channels, kernel_h, kernel_w, out_h, out_w;
    int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups, offset_groups;
    int64_t taps() const { return kernel_h * kernel_w; }
    int64_t pixels() const { return out_h * out_w; }
    int64_t rows() const { return channels * taps(); }                      // column values per pixel
    int64_t weightBytes() const { return alignUp(out_channels * (channels / groups) * taps() * 4); }
    int64_t nhwcBytes(int64_t elem) const { return alignUp(n * channels * height * width * elem); }
    int64_t imageColumnsBytes(int64_t elem) const { return alignUp(pixels() * rows() * elem); }
};

// True when the product of `factors` times 4 bytes stays below INT64_MAX / 4 (so sums of a few such counts fit).
inline bool fitsBytes(std::initializer_list<int64_t> factors) {
    int64_t total = 4;
    for (int64_t f : factors) {
        if (f < 0 || __builtin_mul_overflow(total, f, &total)) return false;
    }
    return total <= INT64_MAX / 4;
}

// False for sizes the launchers reject; fills s (out_h/out_w computed) otherwise.
inline bool makeSizes(OpSizes& s, int64_t n, int64_t channels, int64_t height, int64_t width, int64_t out_channels,
                      int64_t kernel_h, int64_t kernel_w, int64_t stride_h, int64_t stride_w, int64_t pad_h,
                      int64_t pad_w, int64_t dil_h, int64_t dil_w, int64_t groups, int64_t offset_groups) {
    if (n < 0 || channels < 0 || out_channels < 0 || height < 1 || width < 1 || kernel_h < 1 || kernel_w < 1 ||
        stride_h < 1 || stride_w < 1 || dil_h < 1 || dil_w < 1 || pad_h < 0 || pad_w < 0 || groups < 1 ||
        offset_groups < 1 || channels % groups != 0 || out_channels % groups != 0 || channels % offset_groups != 0) {
        return false;
    }
    constexpr int64_t kBig = int64_t{1} << 31;  // every single size below 2^31 keeps the products below in int64
    for (int64_t v : {n, channels, height, width, out_channels, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w,
                      dil_h, dil_w}) {
        if (v >= kBig) return false;
    }
    int64_t const out_h = (height + 2 * pad_h - dil_h * (kernel_h - 1) - 1) / stride_h + 1;
    int64_t const out_w = (width + 2 * pad_w - dil_w * (kernel_w - 1) - 1) / stride_w + 1;
    if (out_h < 0 || out_w < 0 || height + 2 * pad_h - dil_h * (kernel_h - 1) - 1 < 0 ||
        width + 2 * pad_w - dil_w * (kernel_w - 1) - 1 < 0) {
        return false;  // the kernel does not fit the padded input: no output
    }
    s = OpSizes{n, channels, height, width, out_channels, kernel_h, kernel_w, out_h, out_w, stride_h, stride_w,
                pad_h, pad_w, dil_h, dil_w, groups, offset_groups};
    // byte counts of every buffer (with 4-byte elements), and a quarter of int64 more, must fit in int64
    int64_t const taps = kernel_h * kernel_w;
    return fitsBytes({out_h, out_w, channels, taps}) && fitsBytes({n, channels, height, width}) &&
           fitsBytes({out_channels, channels / groups, taps}) && fitsBytes({n, out_channels, out_h, out_w}) &&
           height * width <= 0x7fffffff;
}

// Bytes of columns a launch wants: all images, or as many as fit the budget, but at least one. Non-decreasing in the
// per-image size and in n (min(n * image, max(image, budget))), unlike "whole images within the budget".
inline int64_t columnsBytes(OpSizes const& s, int64_t elem) {
    int64_t const image = s.imageColumnsBytes(elem);
    int64_t all = 0;
    if (__builtin_mul_overflow(image, s.n, &all)) all = INT64_MAX;
    return std::min(all, std::max(image, kColumnsBudgetBytes));
}

inline int64_t workspaceBytes(OpSizes const& s, int64_t elem) {
    return s.weightBytes() + s.nhwcBytes(elem) + columnsBytes(s, elem);
}

// wcols[g][m][k * Cg + c] = weight[g * Mg + m][c][k] as FP32 (the columns' row order within a conv group).
template <typename T>
__global__ void reorderWeightKernel(T const* __restrict__ weight, float* __restrict__ wcols, int64_t total,
                                    int64_t per_group, int64_t taps) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        int64_t const k = i % taps;  // i indexes weight: [C_out][Cg][K]
        int64_t const c = (i / taps) % per_group;
        int64_t const o = i / (taps * per_group);
        wcols[o * taps * per_group + k * per_group + c] = toF32(weight[i]);
    }
}

// dst[n][p][c] = src[n][c][p] for every image (p: height * width pixels), through 32x32 shared-memory tiles.
template <typename T>
__global__ void nchwToNhwcKernel(T const* __restrict__ src, T* __restrict__ dst, int64_t images, int64_t channels,
                                 int64_t pixels) {
    __shared__ T tile[kTransposeTile][kTransposeTile + 1];
    int64_t const p0 = static_cast<int64_t>(blockIdx.x) * kTransposeTile;
    int64_t const c0 = static_cast<int64_t>(blockIdx.y) * kTransposeTile;
    for (int64_t img = blockIdx.z; img < images; img += gridDim.z) {
        T const* s = src + img * channels * pixels;
        T* d = dst + img * channels * pixels;
        for (int r = threadIdx.y; r < kTransposeTile; r += blockDim.y) {
            int64_t const c = c0 + r, p = p0 + threadIdx.x;
            if (c < channels && p < pixels) tile[r][threadIdx.x] = s[c * pixels + p];
        }
        __syncthreads();
        for (int r = threadIdx.y; r < kTransposeTile; r += blockDim.y) {
            int64_t const p = p0 + r, c = c0 + threadIdx.x;
            if (c < channels && p < pixels) d[p * channels + c] = tile[threadIdx.x][r];
        }
        __syncthreads();
    }
}

// out[img][g * Mg + m][p] = bias[g * Mg + m] + sum_r wcols[g][m][r] * columns[img][p][g * R + r]  (R = K * Cg)
// for img in [0, images) of the slice; block (x, y, z): pixel tile x, output-channel tile y, (image, group) z.
template <typename T>
__global__ void __launch_bounds__(kGemmThreads)
    gemmKernel(float const* __restrict__ wcols, T const* __restrict__ columns, T const* __restrict__ bias,
               T* __restrict__ out, int64_t batches, int64_t groups, int64_t per_group_out, int64_t reduce,
               int64_t pixels) {
    __shared__ float As[kGemmStep][kGemmTile];  // [r][m]
    __shared__ float Bs[kGemmStep][kGemmTile];  // [r][p]
    int const t = threadIdx.x;
    int const tx = t % 16, ty = t / 16;
    int const load_row = t / 4;       // 0..63: m (A) or p (B) of the tile
    int const load_k = (t % 4) * 4;   // 0, 4, 8, 12: first of 4 consecutive r
    int64_t const m0 = static_cast<int64_t>(blockIdx.y) * kGemmTile;
    int64_t const p0 = static_cast<int64_t>(blockIdx.x) * kGemmTile;
    int64_t const row_stride = groups * reduce;  // column values per pixel
    for (int64_t bz = blockIdx.z; bz < batches; bz += gridDim.z) {
        int64_t const img = bz / groups;
        int64_t const g = bz - img * groups;
        float const* a = wcols + g * per_group_out * reduce;
        T const* b = columns + img * pixels * row_stride + g * reduce;
        float acc[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
        int64_t const am = m0 + load_row, bp = p0 + load_row;
        for (int64_t r0 = 0; r0 < reduce; r0 += kGemmStep) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                int64_t const r = r0 + load_k + e;
                bool const in_r = r < reduce;
                As[load_k + e][load_row] = in_r && am < per_group_out ? a[am * reduce + r] : 0.f;
                Bs[load_k + e][load_row] = in_r && bp < pixels ? toF32(b[bp * row_stride + r]) : 0.f;
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < kGemmStep; ++kk) {
                float av[4], bv[4];
#pragma unroll
                for (int i = 0; i < 4; ++i) av[i] = As[kk][ty + 16 * i];
#pragma unroll
                for (int j = 0; j < 4; ++j) bv[j] = Bs[kk][tx + 16 * j];
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
            }
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            int64_t const m = m0 + ty + 16 * i;
            if (m >= per_group_out) continue;
            int64_t const oc = g * per_group_out + m;
            float const add = bias != nullptr ? toF32(bias[oc]) : 0.f;
            T* dst = out + (img * groups * per_group_out + oc) * pixels;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                int64_t const p = p0 + tx + 16 * j;
                if (p < pixels) dst[p] = fromF32<T>(acc[i][j] + add);
            }
        }
    }
}

template <typename T>
int32_t deformConv2d(void const* input, void const* offset, void const* weight, void const* bias, void const* mask,
                     void* output, void* workspace, int64_t workspace_bytes, int64_t n, int64_t channels,
                     int64_t height, int64_t width, int64_t out_channels, int64_t kernel_h, int64_t kernel_w,
                     int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w,
                     int64_t groups, int64_t offset_groups, cudaStream_t stream) noexcept {
    OpSizes s{};
    if (!makeSizes(s, n, channels, height, width, out_channels, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w,
                   dil_h, dil_w, groups, offset_groups)) {
        return static_cast<int32_t>(cudaErrorInvalidValue);
    }
    int64_t const pixels = s.pixels();
    if (n == 0 || out_channels == 0 || pixels == 0) return static_cast<int32_t>(cudaSuccess);
    constexpr int64_t kElem = sizeof(T);
    int64_t const fixed = s.weightBytes() + s.nhwcBytes(kElem);
    int64_t const image = s.imageColumnsBytes(kElem);
    if (input == nullptr || offset == nullptr || weight == nullptr || output == nullptr || workspace == nullptr ||
        reinterpret_cast<uintptr_t>(workspace) % kWorkspaceAlign != 0 || workspace_bytes < fixed + image) {
        return static_cast<int32_t>(cudaErrorInvalidValue);
    }
    int64_t const slice = std::min(n, (workspace_bytes - fixed) / image);  // images per GEMM pass, >= 1
    int64_t const per_group_out = out_channels / groups;
    int64_t const reduce = s.rows() / groups;
    if ((per_group_out + kGemmTile - 1) / kGemmTile > kMaxGridYZ || (pixels + kGemmTile - 1) / kGemmTile > kMaxGridX ||
        (height * width + kTransposeTile - 1) / kTransposeTile > kMaxGridX ||
        (channels + kTransposeTile - 1) / kTransposeTile > kMaxGridYZ) {
        return static_cast<int32_t>(cudaErrorInvalidValue);
    }
    auto* base = static_cast<unsigned char*>(workspace);
    float* wcols = reinterpret_cast<float*>(base);
    T* nhwc = reinterpret_cast<T*>(base + s.weightBytes());
    T* columns = reinterpret_cast<T*>(base + fixed);
    T const* in = static_cast<T const*>(input);
    T const* off = static_cast<T const*>(offset);
    T const* msk = static_cast<T const*>(mask);
    T* out = static_cast<T*>(output);

    int64_t const weight_total = out_channels * (channels / groups) * s.taps();
    if (weight_total > 0) {
        int64_t const blocks = std::min<int64_t>((weight_total + kThreads - 1) / kThreads, 4096);
        reorderWeightKernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
            static_cast<T const*>(weight), wcols, weight_total, channels / groups, s.taps());
        cudaError_t const status = cudaGetLastError();
        if (status != cudaSuccess) return static_cast<int32_t>(status);
    }
    if (channels > 0) {
        dim3 const grid(static_cast<unsigned>((height * width + kTransposeTile - 1) / kTransposeTile),
                        static_cast<unsigned>((channels + kTransposeTile - 1) / kTransposeTile),
                        static_cast<unsigned>(std::min(n, kMaxGridYZ)));
        nchwToNhwcKernel<T><<<grid, dim3(kTransposeTile, 8), 0, stream>>>(in, nhwc, n, channels, height * width);
        cudaError_t const status = cudaGetLastError();
        if (status != cudaSuccess) return static_cast<int32_t>(status);
    }
    int64_t const taps = s.taps();
    for (int64_t n0 = 0; n0 < n; n0 += slice) {
        int64_t const m = std::min(slice, n - n0);
        int32_t const sampled = im2col<T, false>(
            nhwc + n0 * height * width * channels, off + n0 * 2 * offset_groups * taps * pixels,
            msk != nullptr ? msk + n0 * offset_groups * taps * pixels : nullptr, columns, m, channels, height, width,
            kernel_h, kernel_w, s.out_h, s.out_w, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups,
            offset_groups, stream);
        if (sampled != static_cast<int32_t>(cudaSuccess)) return sampled;
        int64_t const batches = m * groups;
        dim3 const grid(static_cast<unsigned>((pixels + kGemmTile - 1) / kGemmTile),
                        static_cast<unsigned>((per_group_out + kGemmTile - 1) / kGemmTile),
                        static_cast<unsigned>(std::min(batches, kMaxGridYZ)));
        gemmKernel<T><<<grid, kGemmThreads, 0, stream>>>(wcols, columns, static_cast<T const*>(bias),
                                                         out + n0 * out_channels * pixels, batches, groups,
                                                         per_group_out, reduce, pixels);
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

#define TORCHTRT_EXT_DCN_FULL_ARGS                                                                                 \
    void const *input, void const *offset, void const *weight, void const *bias, void const *mask, void *output,   \
        void *workspace, int64_t workspace_bytes, int64_t n, int64_t channels, int64_t height, int64_t width,       \
        int64_t out_channels, int64_t kernel_h, int64_t kernel_w, int64_t stride_h, int64_t stride_w,               \
        int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w, int64_t groups, int64_t offset_groups,          \
        cudaStream_t stream
#define TORCHTRT_EXT_DCN_FULL_PASS                                                                                 \
    input, offset, weight, bias, mask, output, workspace, workspace_bytes, n, channels, height, width,             \
        out_channels, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups, offset_groups,  \
        stream

extern "C" {

TORCHTRT_EXT_API int32_t torchtrt_ext_deform_conv2d_f32(TORCHTRT_EXT_DCN_FULL_ARGS) {
    return torchtrt_ext::deform_conv2d_detail::deformConv2d<float>(TORCHTRT_EXT_DCN_FULL_PASS);
}

TORCHTRT_EXT_API int32_t torchtrt_ext_deform_conv2d_f16(TORCHTRT_EXT_DCN_FULL_ARGS) {
    return torchtrt_ext::deform_conv2d_detail::deformConv2d<__half>(TORCHTRT_EXT_DCN_FULL_PASS);
}

TORCHTRT_EXT_API int32_t torchtrt_ext_deform_conv2d_bf16(TORCHTRT_EXT_DCN_FULL_ARGS) {
    return torchtrt_ext::deform_conv2d_detail::deformConv2d<__nv_bfloat16>(TORCHTRT_EXT_DCN_FULL_PASS);
}

TORCHTRT_EXT_API int64_t torchtrt_ext_deform_conv2d_workspace_size(
    int64_t n, int64_t channels, int64_t height, int64_t width, int64_t out_channels, int64_t kernel_h,
    int64_t kernel_w, int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w,
    int64_t groups, int64_t offset_groups, int64_t element_size) {
    using namespace torchtrt_ext::deform_conv2d_detail;
    OpSizes s{};
    if ((element_size != 2 && element_size != 4) ||
        !makeSizes(s, n, channels, height, width, out_channels, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w,
                   dil_h, dil_w, groups, offset_groups)) {
        return -1;
    }
    return workspaceBytes(s, element_size);
}

}  // extern "C"

#undef TORCHTRT_EXT_DCN_FULL_ARGS
#undef TORCHTRT_EXT_DCN_FULL_PASS
