// DeformConv2d behind torchtrt_ext_deform_conv2d (deform_conv2d.h): transpose (NCHW input only), sampling, GEMM; or,
// for fp16/bf16 on sm_90a where it fits, transpose and the fused implicit GEMM of deform_conv2d_sm90.cuh; or, for small
// problems, the one kernel of deform_conv2d_direct.cuh.
//
// Columns: per image [pixel][groups * rows_pad], group g's rows at [g * rows_pad, g * rows_pad + rows) tap-major,
// row = k * Cg + c' (k = i * kernel_w + j the tap, c' the channel within the conv group, Cg the group's channels),
// then the ones row (it meets the bias), then zeros up to rows_pad (rows + 1 rounded up to 8 elements, so that every
// group's rows start 16-byte aligned):
//
//     columns[n * P + p][g * rows_pad + k * Cg + c'] = mask[n][og * K + k][p] * bilinear(input[n][.][.][g * Cg + c'], y, x)
//     y = oy * stride_h - pad_h + i * dil_h + offset[n][og * 2K + 2k][p]       (og: the channel's offset group)
//     x = ox * stride_w - pad_w + j * dil_w + offset[n][og * 2K + 2k + 1][p]
//
// Bilinear sampling follows torchvision.ops.deform_conv2d: a point outside (-1, height) x (-1, width) gives 0; each
// of its four corners outside the image contributes 0 on its own. Positions, weights and sums are FP32; columns are
// stored in the data type (rounded once).
//
// Sampling: a thread owns one pixel and one run of VEC channels (16 bytes when the channel counts allow, else one
// channel), consecutive threads on consecutive runs of the same pixel, so the corner reads of a warp are contiguous
// runs of the channels-last input. Tap-major rows put a thread's VEC channels of one tap side by side: one 16-byte
// store per tap, and the threads of a pixel store each tap's channels as one contiguous range. (Rows in the weight's
// own order, c' * K + k, put a thread's channels K elements apart: 2-byte stores, or a round trip through shared
// memory to gather them.) fp16/bf16 (and unsplit float32) blocks sample 2D tiles of pixels for a slice of channels
// with the bilinear corners of each (tap, pixel) computed once into shared memory (sampleKernel); the float32 split
// sampler has each thread compute its own corners (sampleSplitKernel), which measured faster there.
//
// The prepared weight: prep[oc][k * Cg + c'] = weight[oc][c'][k], bias[oc] in the ones row's place, zeros after it:
// written per call by the first pass's sampling launch, and read by either GEMM, which so adds the bias.
//
// cuBLASLt: per conv group, one strided-batched TN GEMM (a batch per image) with the prepared weight. float32 is
// split into bf16 pairs ("split"): the sampler and the weight copy write every value x as hi = bf16(x) and
// lo = bf16(x - hi) (x = hi + lo within 2^-18 |x|), a group's rows as [hi rows | lo rows] in the columns and
// [lo rows | hi rows] in the prepared weight, the same bytes as float32. Two GEMMs with FP32 sums and a float32 output
// then give the three products that matter: lo_w * hi_c + hi_w * lo_c (one GEMM of 2 * rows_pad steps), then
// hi_w * hi_c added to it (beta = 1), so the large products sum apart from the small ones: the tensor cores' FP32
// sums lose bits against a large running sum, so all three products in one GEMM are less accurate. bf16 pairs, not
// TF32 pairs, because TF32 runs at half bf16's rate; true FP32 GEMMs are several times slower still (the figures
// and bench/fp32_gemm.py, which times the alternatives: bench/README.md). Where cuBLASLt has no bf16 algorithm,
// float32 runs one true FP32 GEMM.
//
// Our own GEMM (no cuBLASLt): out[img][g * Mg + m][p] = sum_r prep[g * Mg + m][r] * columns[img * P + p][g * rows_pad
// + r] over the rows_pad rows, both operands K-contiguous ("TN"). Block tile kBM x kBN (output channels x pixels of
// all images of the slice, so small images still fill the tile), kBK = 32 reduction steps per stage, cp.async
// multi-stage pipeline in padded shared memory (conflict-free fragment reads), 8 warps. fp16/bf16: mma.sync m16n8k16
// with FP32 accumulators, fragments by ldmatrix. float32: mma.sync m16n8k8 TF32 three times (a_lo*b_hi + a_hi*b_lo +
// a_hi*b_hi, splits by cvt.rna.tf32 in registers) into partial sums that are added to FP32 accumulators after every
// stage (a tensor-core chain's rounding error grows with its length). The grid runs the output-channel tiles of one
// pixel tile next to each other, so the columns are read from DRAM once and from L2 by the other tiles.
#include "kernels/deform_conv2d.h"
#include "kernels/cublaslt.h"
#include "kernels/numeric.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>

namespace torchtrt_ext {
namespace deform_conv2d_detail {

constexpr int kThreads = 256;
// Sampling blocks per SM the register allocator must allow: 4 (64 registers) is the most that compiles without spills
// (sm_90, ptxas -v: 5 blocks, 48 registers, spill); 3 blocks (more registers, fewer warps to hide the corner reads)
// were slower on the H200 (bench/README.md).
constexpr int kSampleBlocks = 4;
constexpr int64_t kMaxGridX = 0x7fffffff;
constexpr int64_t kMaxGridYZ = 65535;
constexpr int64_t kColumnsBudgetBytes = int64_t{256} << 20;  // columns of one pass (at least one image)
constexpr int64_t kWorkspaceAlign = 256;
constexpr int64_t kRowsAlign = 8;  // elements: 16 bytes of fp16/bf16, 32 of float
constexpr int kTransposeTile = 32;
constexpr int64_t kMaxWeightCopy = 0x7fffffff;  // elements of the prepared weight: 32-bit indices in the sampler

inline int64_t alignUp(int64_t bytes) { return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign; }
inline bool aligned16(void const* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// Programmatic dependent launch (sm_90 and later): a kernel launched with overlap = true may start while the kernel
// before it on the stream still runs, once every block of that one has called startNext() or finished. Before it
// reads what that kernel writes it calls waitPrevious(), which returns once that kernel has finished and its writes
// are visible; a kernel that waits so before it finishes thus passes on everything before it. Both are no-ops in a
// kernel launched without overlap and in code for older targets.
__device__ __forceinline__ void startNext() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void waitPrevious() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
template <typename... Params, typename... Args>
cudaError_t launchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool overlap,
                         Args const&... args) {
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = &attribute;
    config.numAttrs = overlap ? 1 : 0;
    return cudaLaunchKernelEx(&config, kernel, args...);
}

// ------------------------------------------------------------------------------------------ per-device state
// What a launch needs to know about its device, looked up once per device and cached: the host time of the
// cudaDeviceGetAttribute and cudaFuncSetAttribute calls is comparable to a small problem's GPU time.
// Caches are lock-free atomics; threads racing on a first lookup store the same value. Devices at or beyond
// kCachedDevices are looked up on every call.
constexpr int kCachedDevices = 64;

struct Device {
    int index;
    int sms;
    int major;  // compute capability: our own GEMM needs major 8 or more, the fused kernel 9.0
    int minor;
};

// The current device, its multiprocessor count and compute capability (queried on the first call per device, cached
// together as sms * 256 + major * 16 + minor).
inline cudaError_t currentDevice(Device& dev) {
    static std::atomic<int> packed_of[kCachedDevices];  // 0: not queried yet (static storage starts zeroed)
    cudaError_t status = cudaGetDevice(&dev.index);
    if (status != cudaSuccess) return status;
    bool const cached = dev.index >= 0 && dev.index < kCachedDevices;
    int const packed = cached ? packed_of[dev.index].load(std::memory_order_relaxed) : 0;
    if (packed > 0) {
        dev.sms = packed / 256;
        dev.major = packed % 256 / 16;
        dev.minor = packed % 16;
        return cudaSuccess;
    }
    status = cudaDeviceGetAttribute(&dev.sms, cudaDevAttrMultiProcessorCount, dev.index);
    if (status == cudaSuccess) {
        status = cudaDeviceGetAttribute(&dev.major, cudaDevAttrComputeCapabilityMajor, dev.index);
    }
    if (status == cudaSuccess) {
        status = cudaDeviceGetAttribute(&dev.minor, cudaDevAttrComputeCapabilityMinor, dev.index);
    }
    if (status == cudaSuccess && cached) {
        packed_of[dev.index].store(dev.sms * 256 + dev.major * 16 + dev.minor, std::memory_order_relaxed);
    }
    return status;
}

// cudaFuncSetAttribute(kernel, MaxDynamicSharedMemorySize, bytes) unless `set_on` (bit d: done on device d, one
// record per kernel instantiation, kept by its caller) says it was done on this device already.
template <typename Kernel>
cudaError_t allowDynamicSmem(Kernel* kernel, int bytes, Device const& dev, std::atomic<uint64_t>& set_on) {
    uint64_t const bit = dev.index >= 0 && dev.index < kCachedDevices ? uint64_t{1} << dev.index : 0;
    if (bit != 0 && (set_on.load(std::memory_order_acquire) & bit) != 0) return cudaSuccess;
    cudaError_t const status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (status == cudaSuccess && bit != 0) set_on.fetch_or(bit, std::memory_order_release);
    return status;
}

// How an environment variable routes the launcher (read once per process by its caller): "0" never takes a path,
// "1" takes it wherever it applies, anything else or unset lets the sizes choose.
enum class RouteMode { kOff, kWherever, kAuto };
inline RouteMode routeModeOf(char const* variable) {
    char const* env = std::getenv(variable);
    std::string const value = env != nullptr ? env : "";
    return value == "0" ? RouteMode::kOff : value == "1" ? RouteMode::kWherever : RouteMode::kAuto;
}

// ------------------------------------------------------------------------------------------------------ sizes
struct OpSizes {
    int64_t n, channels, height, width, out_channels, kernel_h, kernel_w, out_h, out_w;
    int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups, offset_groups, elem;
    bool channels_last;
    int64_t taps() const { return kernel_h * kernel_w; }
    int64_t pixels() const { return out_h * out_w; }
    int64_t rows() const { return channels / groups * taps(); }  // reduction length of one conv group
    // Its padded length: the rows, the ones row (the bias), zeros up to a multiple of kRowsAlign.
    int64_t rowsPad() const { return (rows() + 1 + kRowsAlign - 1) / kRowsAlign * kRowsAlign; }
    int64_t ld() const { return groups * rowsPad(); }  // column values per pixel
    int64_t nhwcBytes() const { return channels_last ? 0 : alignUp(n * channels * height * width * elem); }
    // The prepared weight: [out_channels][rowsPad], tap-major like the columns, the bias in the ones row's place.
    int64_t preparedBytes() const { return alignUp(out_channels * rowsPad() * elem); }
    int64_t fixedBytes() const { return nhwcBytes() + preparedBytes() + cublaslt::kWorkspaceBytes; }
    int64_t imageColumnsBytes() const { return alignUp(pixels() * ld() * elem); }
};

// True when the product of `factors` times 8 bytes stays below INT64_MAX / 4 (so sums of a few such counts fit).
inline bool fitsBytes(std::initializer_list<int64_t> factors) {
    int64_t total = 8;
    for (int64_t f : factors) {
        if (f < 0 || __builtin_mul_overflow(total, f, &total)) return false;
    }
    return total <= INT64_MAX / 4;
}

// False for a descriptor the launcher rejects; fills s (out_h/out_w computed) otherwise.
inline bool makeSizes(OpSizes& s, TorchtrtExtDeformConv2dDesc const* d) {
    if (d == nullptr) return false;
    int64_t const elem = d->dtype == TORCHTRT_EXT_DCN_FLOAT32 ? 4
                         : d->dtype == TORCHTRT_EXT_DCN_FLOAT16 || d->dtype == TORCHTRT_EXT_DCN_BFLOAT16 ? 2 : 0;
    if (elem == 0 || (d->input_layout != TORCHTRT_EXT_DCN_NCHW && d->input_layout != TORCHTRT_EXT_DCN_CHANNELS_LAST) ||
        d->n < 0 || d->channels < 0 || d->out_channels < 0 || d->height < 1 || d->width < 1 || d->kernel_h < 1 ||
        d->kernel_w < 1 || d->stride_h < 1 || d->stride_w < 1 || d->dil_h < 1 || d->dil_w < 1 || d->pad_h < 0 ||
        d->pad_w < 0 || d->groups < 1 || d->offset_groups < 1 || d->channels % d->groups != 0 ||
        d->out_channels % d->groups != 0 || d->channels % d->offset_groups != 0) {
        return false;
    }
    constexpr int64_t kBig = int64_t{1} << 31;  // every single size below 2^31 keeps the products below in int64
    for (int64_t v : {d->n, d->channels, d->height, d->width, d->out_channels, d->kernel_h, d->kernel_w, d->stride_h,
                      d->stride_w, d->pad_h, d->pad_w, d->dil_h, d->dil_w}) {
        if (v >= kBig) return false;
    }
    int64_t const span_h = d->height + 2 * d->pad_h - d->dil_h * (d->kernel_h - 1) - 1;
    int64_t const span_w = d->width + 2 * d->pad_w - d->dil_w * (d->kernel_w - 1) - 1;
    if (span_h < 0 || span_w < 0) return false;  // the kernel does not fit the padded input: no output
    s = OpSizes{d->n, d->channels, d->height, d->width, d->out_channels, d->kernel_h, d->kernel_w,
                span_h / d->stride_h + 1, span_w / d->stride_w + 1, d->stride_h, d->stride_w, d->pad_h, d->pad_w,
                d->dil_h, d->dil_w, d->groups, d->offset_groups, elem,
                d->input_layout == TORCHTRT_EXT_DCN_CHANNELS_LAST};
    return fitsBytes({s.out_h, s.out_w, s.channels + kRowsAlign * s.groups, s.taps()}) &&
           fitsBytes({s.n, s.channels, s.height, s.width}) && fitsBytes({s.out_channels, s.channels, s.taps()}) &&
           fitsBytes({s.n, s.out_channels, s.out_h, s.out_w}) && s.height * s.width <= 0x7fffffff &&
           s.out_channels * s.rowsPad() <= kMaxWeightCopy;
}

// Bytes of columns a launch wants: all images, or as many as fit the budget, but at least one. Non-decreasing in the
// per-image size and in n (min(n * image, max(image, budget))), unlike "whole images within the budget".
inline int64_t columnsBytes(OpSizes const& s) {
    int64_t const image = s.imageColumnsBytes();
    int64_t all = 0;
    if (__builtin_mul_overflow(image, s.n, &all)) all = INT64_MAX;
    return std::min(all, std::max(image, kColumnsBudgetBytes));
}

// -------------------------------------------------------------------------------------------------- transpose
// dst[n][p][c] = src[n][c][p] for every image (p: height * width pixels), through 32x32 shared-memory tiles (64x64
// tiles were slower: bench/README.md).
template <typename T>
__global__ void nchwToNhwcKernel(T const* __restrict__ src, T* __restrict__ dst, int64_t images, int64_t channels,
                                 int64_t pixels) {
    __shared__ T tile[kTransposeTile][kTransposeTile + 1];
    startNext();
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
    waitPrevious();  // launched with overlap (launchFused): done only once the kernel before it is
}

// dst[n][p][c] = src[n][c][p] with 8-byte loads and 16-byte stores through 64x64 shared-memory tiles, when pixels
// and pointers allow (pixels % (8 / sizeof(T)) == 0, channels % (16 / sizeof(T)) == 0, src 8-byte and dst 16-byte
// aligned). Shared memory holds 32-bit words: a float, or for 16-bit types the pair of channels (2c, 2c + 1) of one
// pixel, so a 16-byte store gathers 4 words: moving 16-bit types as 2-byte elements or words leaves them slower per
// byte than float32 (bench/README.md).
constexpr int kWideTile = 64;
template <typename T>
__global__ void __launch_bounds__(256) nchwToNhwcWideKernel(T const* __restrict__ src, T* __restrict__ dst,
                                                            int64_t images, int64_t channels, int64_t pixels) {
    constexpr int kPer = 4 / sizeof(T);                    // channels per shared-memory word
    constexpr int kRows = kWideTile / kPer;                // word rows of a tile
    constexpr int kLoad = 8 / sizeof(T);                   // pixels per 8-byte load
    __shared__ uint32_t tile[kRows][kWideTile + 1];        // [channel word][pixel]; 65 words: conflict-free stores
    startNext();
    int64_t const p0 = static_cast<int64_t>(blockIdx.x) * kWideTile;
    int64_t const c0 = static_cast<int64_t>(blockIdx.y) * kWideTile;
    for (int64_t img = blockIdx.z; img < images; img += gridDim.z) {
        T const* s = src + img * channels * pixels;
        T* d = dst + img * channels * pixels;
        for (int i = threadIdx.x; i < kRows * kWideTile / kLoad; i += blockDim.x) {
            int const r = i / (kWideTile / kLoad), q = (i % (kWideTile / kLoad)) * kLoad;
            int64_t const c = c0 + r * kPer, p = p0 + q;
            if (c < channels && p < pixels) {
                uint2 const a = *reinterpret_cast<uint2 const*>(s + c * pixels + p);
                if constexpr (kPer == 1) {
                    tile[r][q] = a.x;
                    tile[r][q + 1] = a.y;
                } else {  // rows c and c + 1, four pixels each: one word per pixel, channel c in the low half
                    uint2 const b = *reinterpret_cast<uint2 const*>(s + (c + 1) * pixels + p);
                    tile[r][q] = (a.x & 0xffffu) | (b.x << 16);
                    tile[r][q + 1] = (a.x >> 16) | (b.x & 0xffff0000u);
                    tile[r][q + 2] = (a.y & 0xffffu) | (b.y << 16);
                    tile[r][q + 3] = (a.y >> 16) | (b.y & 0xffff0000u);
                }
            }
        }
        __syncthreads();
        for (int i = threadIdx.x; i < kWideTile * kRows / 4; i += blockDim.x) {
            int const q = i / (kRows / 4), r = (i % (kRows / 4)) * 4;
            int64_t const p = p0 + q, c = c0 + r * kPer;
            if (c < channels && p < pixels) {
                // __stwb: a plain uint4 assignment through the T* compiles to four 4-byte stores
                __stwb(reinterpret_cast<uint4*>(d + p * channels + c),
                       make_uint4(tile[r][q], tile[r + 1][q], tile[r + 2][q], tile[r + 3][q]));
            }
        }
        __syncthreads();
    }
    waitPrevious();  // launched with overlap (launchFused): done only once the kernel before it is
}

// The channels-last copy of an NCHW input, by the wide kernel where it applies; with overlap, it may start while the
// kernel before it runs (and finishes after it: see startNext).
template <typename T>
cudaError_t launchTranspose(T const* src, T* dst, int64_t images, int64_t channels, int64_t pixels, cudaStream_t stream,
                            bool overlap) {
    constexpr int kLoad = 8 / sizeof(T), kStore = 16 / sizeof(T);
    if (pixels % kLoad == 0 && channels % kStore == 0 && reinterpret_cast<uintptr_t>(src) % 8 == 0 && aligned16(dst)) {
        dim3 const grid(static_cast<unsigned>((pixels + kWideTile - 1) / kWideTile),
                        static_cast<unsigned>((channels + kWideTile - 1) / kWideTile),
                        static_cast<unsigned>(std::min(images, kMaxGridYZ)));
        return launchKernel(nchwToNhwcWideKernel<T>, grid, dim3(256), 0, stream, overlap, src, dst, images, channels,
                            pixels);
    }
    dim3 const grid(static_cast<unsigned>((pixels + kTransposeTile - 1) / kTransposeTile),
                    static_cast<unsigned>((channels + kTransposeTile - 1) / kTransposeTile),
                    static_cast<unsigned>(std::min(images, kMaxGridYZ)));
    return launchKernel(nchwToNhwcKernel<T>, grid, dim3(kTransposeTile, 8), 0, stream, overlap, src, dst, images,
                        channels, pixels);
}

// --------------------------------------------------------------------------------------------------- sampling
struct SampleParams {
    int64_t channels, height, width, kernel_w, out_w, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
    int64_t taps, pixels, offset_groups, per_group, per_offset_group;
    int64_t rows, rows_pad;  // a group's rows (per_group * taps), then its ones row and zeros up to rows_pad
    int64_t ld;              // column values per pixel (groups * rows_pad; twice that when split)
};

// The sampling parameters of an op with `ld` column values per pixel.
inline SampleParams sampleParamsOf(OpSizes const& s, int64_t ld) {
    return SampleParams{s.channels, s.height, s.width, s.kernel_w, s.out_w, s.stride_h, s.stride_w, s.pad_h, s.pad_w,
                        s.dil_h, s.dil_w, s.taps(), s.pixels(), s.offset_groups, s.channels / s.groups,
                        s.channels / s.offset_groups, s.rows(), s.rowsPad(), ld};
}

// The prepared weight (see the top of this file), written by the first pass's sampling launch besides its columns
// (one launch less: a kernel of its own costs about as much as the gap between launches on small problems).
// total = 0: nothing to write. 32-bit indices (total <= kMaxWeightCopy) keep the sampling kernel's registers down.
// Col: the element type of the columns and the prepared weight: T, or __nv_bfloat16 for a float32 op split into
// bf16 pairs (see the top of this file), whose rows then hold the lo parts and the hi parts one after the other.
template <typename T, typename Col>
struct WeightCopy {
    T const* weight;
    T const* bias;
    Col* prep;
    uint32_t total, rows, rows_pad, per_group, taps;  // total: out_channels * rows_pad values
};

// x = hi + lo + e with hi, lo bf16 rounded to nearest, |e| <= 2^-18 |x|; lo = 0 where hi is not finite (x - hi
// would be NaN there).
__device__ __forceinline__ float2 splitBf16(float x) {
    float const hi = __bfloat162float(__float2bfloat16_rn(x));
    return make_float2(hi, isfinite(hi) ? x - hi : 0.f);
}

template <typename T, typename Col>
__device__ __forceinline__ void copyWeight(WeightCopy<T, Col> const& w) {
    // the thread's place in the whole (3D) grid: every block copies its share once
    uint64_t const block = blockIdx.x + uint64_t{gridDim.x} * (blockIdx.y + uint64_t{gridDim.y} * blockIdx.z);
    uint64_t const first = block * blockDim.x + threadIdx.x;
    uint64_t const threads = uint64_t{gridDim.x} * gridDim.y * gridDim.z * blockDim.x;
    if (first >= w.total) return;
    uint32_t const stride = static_cast<uint32_t>(threads < w.total ? threads : w.total);  // i + stride never wraps
    for (uint32_t i = static_cast<uint32_t>(first); i < w.total; i += stride) {
        uint32_t const oc = i / w.rows_pad, r = i - oc * w.rows_pad;
        uint32_t const k = r / w.per_group, c = r - k * w.per_group;  // row r = k * Cg + c of the columns
        T const v = r < w.rows                          ? w.weight[static_cast<uint64_t>(oc) * w.rows + c * w.taps + k]
                    : r == w.rows && w.bias != nullptr ? w.bias[oc]
                                                       : fromF32<T>(0.f);
        if constexpr (std::is_same_v<T, Col>) {
            w.prep[i] = v;
        } else {  // [lo parts | hi parts] per output channel
            float2 const parts = splitBf16(v);
            w.prep[i + oc * w.rows_pad] = fromF32<Col>(parts.y);
            w.prep[i + (oc + 1) * w.rows_pad] = fromF32<Col>(parts.x);
        }
    }
}

// Bilinear corner weights (mask folded in) and element offsets within the image (-1: outside, not read) of tap k at
// output pixel pix of offset-group plane `plane` (= image * offset_groups + group); pixel_stride: the elements from one
// input pixel to the next (channels-last: the channel count; one NCHW channel plane: 1).
template <typename Idx>
struct alignas(16) Corners {
    float w[4];
    Idx at[4];
};

template <typename T, typename Idx>
__device__ __forceinline__ Corners<Idx> cornersOf(T const* __restrict__ offset, T const* __restrict__ mask,
                                                  SampleParams const& p, Idx plane, Idx pix, Idx oy, Idx ox, int k,
                                                  Idx pixel_stride) {
    int const i = k / static_cast<int>(p.kernel_w);
    int const j = k - i * static_cast<int>(p.kernel_w);
    Idx const taps = static_cast<Idx>(p.taps), pixels = static_cast<Idx>(p.pixels);
    Idx const off = (plane * 2 * taps + 2 * k) * pixels + pix;
    float const dy = toF32(offset[off]);
    float const dx = toF32(offset[off + pixels]);
    float const m = mask != nullptr ? toF32(mask[(plane * taps + k) * pixels + pix]) : 1.f;
    // The sampling point is (by + dy, bx + dx) with integer by, bx. Its floor and fraction are taken as by + floor(dy)
    // and dy - floor(dy): both exact in FP32 (integers below 2^24; past that, outside any image of fewer rows or
    // columns), where y = by + dy keeps 24 bits and past 2048 pixels rounded the fraction to 1/4096 (a relative error
    // of 3e-5 against float64 at width 2111 in FP32, where 1e-5 is the bar). Same instruction count.
    float const by = static_cast<float>(static_cast<int64_t>(oy) * p.stride_h - p.pad_h + i * p.dil_h);
    float const bx = static_cast<float>(static_cast<int64_t>(ox) * p.stride_w - p.pad_w + j * p.dil_w);
    float const fy = floorf(dy), fx = floorf(dx);
    float const y0f = by + fy, x0f = bx + fx;
    float const ly = dy - fy, lx = dx - fx;
    int const h = static_cast<int>(p.height);
    int const w = static_cast<int>(p.width);
    Corners<Idx> c{{0.f, 0.f, 0.f, 0.f}, {-1, -1, -1, -1}};
    // inside (-1, height) x (-1, width), torchvision's rule, for y = y0 + ly (0 <= ly < 1; -1 + ly rounds to -1 only
    // for ly below 2^-25, whose weight is negligible); false for NaN and inf
    if (y0f + ly > -1.f && y0f < static_cast<float>(h) && x0f + lx > -1.f && x0f < static_cast<float>(w)) {
        int const y0 = static_cast<int>(y0f);
        int const x0 = static_cast<int>(x0f);
        float const hy = 1.f - ly, hx = 1.f - lx;
        bool const top = y0 >= 0, bottom = y0 + 1 <= h - 1, left = x0 >= 0, right = x0 + 1 <= w - 1;
        Idx const row0 = static_cast<Idx>(y0) * w, row1 = row0 + w;
        if (top && left) { c.w[0] = hy * hx * m; c.at[0] = (row0 + x0) * pixel_stride; }
        if (top && right) { c.w[1] = hy * lx * m; c.at[1] = (row0 + x0 + 1) * pixel_stride; }
        if (bottom && left) { c.w[2] = ly * hx * m; c.at[2] = (row1 + x0) * pixel_stride; }
        if (bottom && right) { c.w[3] = ly * lx * m; c.at[3] = (row1 + x0 + 1) * pixel_stride; }
    }
    return c;
}

// The VEC channels at src of one tap, interpolated (FP32), read in packs of at most 16 bytes.
template <typename T, int VEC, typename Idx>
__device__ __forceinline__ void interpolate(T const* __restrict__ src, Corners<Idx> const& c, float (&acc)[VEC]) {
    constexpr int kLoad = VEC * sizeof(T) > 16 ? 16 / sizeof(T) : VEC;
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc[e] = 0.f;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        if (c.at[q] < 0) continue;  // a corner outside the image contributes 0 (it is not read)
#pragma unroll
        for (int h = 0; h < VEC; h += kLoad) {
            Pack<T, kLoad> const v = *reinterpret_cast<Pack<T, kLoad> const*>(src + c.at[q] + h);
#pragma unroll
            for (int e = 0; e < kLoad; ++e) acc[h + e] += c.w[q] * elementF32(v, e);
        }
    }
}

// The sampling kernel of fp16, bf16 and unsplit float32 columns tiles its work (sampleTiles): a block samples a tile
// of kTileW output pixels by kThreads / slice_runs / kTileW rows of one image, for one slice of slice_runs runs of VEC
// channels, at every tap. The slice lies in one offset group, so the tile's bilinear corners are computed once per
// (tap, pixel) into a shared-memory table and read by the slice_runs threads of the pixel, where a thread per
// (pixel, run) computing its own corners spent most of its instructions on them: the sampler issues an instruction
// on about 60% of cycles, so its instruction count is much of its time. Where the tiles are too few to fill the GPU
// (small images and batches), the taps are split over tap_groups blocks per tile too: a thread interpolates one tap
// after the other, each a round trip to memory, so 9 taps in one block made a 1x64x40x40 sampling (50 blocks of 9
// round trips) latency-bound. Block (x, y, z) = ((tile column * tap_groups + tap group) * slices + slice, tile row,
// image): the slices of one tile side by side (same offsets, same input pixels), and no 64-bit division in the index
// math.
struct SampleTiles {
    int slice_shift;  // slice_runs = 1 << slice_shift <= kMaxSliceRuns
    int chunk_taps;   // taps per filling of the corner table
    int tap_groups;   // blocks per tile and slice, each group_taps taps (the last one fewer)
    int group_taps;
    unsigned slices;  // per image
    int64_t tiles_x, tiles_y;
};
// Every block of a tile fills the corner table again, so the widest slice (the fewest blocks per tile) does the least
// corner work: 8 runs (64 fp16 channels, 128-byte corner reads) measured fastest of 8, 4 and 2.
constexpr int kMaxSliceRuns = 8;
constexpr int kTileW = 8;
constexpr int kTableBytes = 16384;  // the corner table: 512 (tap, pixel) entries of 32-bit indices

// Thread = pixel l of the tile (row-major) x run r of the slice; it stores each tap's VEC channels as one pack (row
// k * Cg + cg), then, as its conv group's last run, the ones row and the zeros after it. Taps are sampled in chunks of
// chunk_taps, the table refilled per chunk. One tap at a time per thread: the warps of 4 blocks per SM keep enough
// corner reads in flight, and a second tap's loads would only take registers.
template <typename T, int VEC, typename Idx>
__global__ void __launch_bounds__(kThreads, kSampleBlocks)
    sampleKernel(T const* __restrict__ input, T const* __restrict__ offset, T const* __restrict__ mask,
                 T* __restrict__ columns, SampleParams const p, SampleTiles const t, Idx const images,
                 WeightCopy<T, T> const copy) {
    __shared__ Corners<Idx> table[kTableBytes / sizeof(Corners<Idx>)];
    copyWeight(copy);
    int const tile_pixels = kThreads >> t.slice_shift;
    int const tile_h = tile_pixels / kTileW;
    int const l = threadIdx.x >> t.slice_shift;
    int const ly = l / kTileW, lx = l % kTileW;
    Idx const out_w = static_cast<Idx>(p.out_w), out_h = static_cast<Idx>(p.pixels / p.out_w);
    Idx const pixels = static_cast<Idx>(p.pixels), per_group = static_cast<Idx>(p.per_group);
    int const taps = static_cast<int>(p.taps);
    unsigned const slice = blockIdx.x % t.slices, rest = blockIdx.x / t.slices;
    unsigned const tap_group = rest % static_cast<unsigned>(t.tap_groups);
    Idx const x0 = static_cast<Idx>(rest / static_cast<unsigned>(t.tap_groups)) * kTileW;
    int const first_tap = static_cast<int>(tap_group) * t.group_taps, end_tap = min(taps, first_tap + t.group_taps);
    Idx const c = static_cast<Idx>((slice << t.slice_shift) + (threadIdx.x & ((1u << t.slice_shift) - 1))) * VEC;
    Idx const gc = c / per_group;
    Idx const cg = c - gc * per_group;  // first channel of the run within its conv group
    Idx const og = c / static_cast<Idx>(p.per_offset_group);  // the slice's offset group
    Idx const ox = x0 + lx;
    for (Idx img = blockIdx.z; img < images; img += gridDim.z) {
        Idx const plane = img * static_cast<Idx>(p.offset_groups) + og;
        T const* src = input + static_cast<int64_t>(img) * p.height * p.width * p.channels + c;
        for (Idx y0 = static_cast<Idx>(blockIdx.y) * tile_h; y0 < out_h; y0 += static_cast<Idx>(gridDim.y) * tile_h) {
            Idx const oy = y0 + ly;
            bool const mine = oy < out_h && ox < out_w;
            T* group_rows = columns + (img * pixels + oy * out_w + ox) * static_cast<Idx>(p.ld) +
                            gc * static_cast<Idx>(p.rows_pad);
            T* dst = group_rows + cg;
            for (int k0 = first_tap; k0 < end_tap; k0 += t.chunk_taps) {
                int const kc = min(t.chunk_taps, end_tap - k0);
                __syncthreads();  // the previous chunk's (or tile's) readers are done with the table
                for (int e = threadIdx.x; e < kc * tile_pixels; e += kThreads) {
                    int const k = e / tile_pixels, q = e - k * tile_pixels;
                    Idx const y = y0 + q / kTileW, x = x0 + q % kTileW;
                    if (y < out_h && x < out_w) {
                        table[e] = cornersOf<T, Idx>(offset, mask, p, plane, y * out_w + x, y, x, k0 + k,
                                                                   static_cast<Idx>(p.channels));
                    }
                }
                __syncthreads();
                if (!mine) continue;
#pragma unroll 1
                for (int k = 0; k < kc; ++k) {
                    float tap[VEC];
                    interpolate<T, VEC, Idx>(src, table[k * tile_pixels + l], tap);
                    storePack<T, VEC>(dst + static_cast<Idx>(k0 + k) * per_group, tap);
                }
            }
            // the group's last run (of the first tap group) also writes the ones row and the zeros after it
            if (mine && cg + VEC == per_group && tap_group == 0) {
                for (int64_t r = p.rows; r < p.rows_pad; ++r) group_rows[r] = fromF32<T>(r == p.rows);
            }
        }
    }
}

// The sampling kernel of float32 split into bf16 pairs. Item = (image * P + pixel) * runs + run: the thread
// interpolates its run's VEC channels at every tap (Grouped: the group_taps taps of tap group blockIdx.y), computing
// each tap's corners itself, and stores each tap's hi parts as one pack (row k * Cg + cg) and its lo parts rows_pad
// further, then, as the group's last run (in tap group 0), the ones row and the zeros after it. Small problems split
// the taps into groups until the blocks fill every multiprocessor's kSampleBlocks (groupTaps, as the tiled kernel; at 1x64x40x40
// the 50 blocks of 9 sequential taps, each a round trip to memory, are 450 blocks of one: 9.8 -> 5.7 us); the others
// run the kernel without groups, the code they ran before (the grouped kernel with one group took 156.7 us at
// 8x256x64x64 in the H200 run after one where this one took 138.7: bench/README.md, session 13). The tiled kernel
// above is slower here: its table indices and slice bookkeeping, with 8 floats per thread and their hi/lo packs, do
// not fit 64 registers (it spilled), and the split sampler's 32-byte corner reads, not its instruction count, bound it.
template <int VEC, typename Idx, bool Grouped>
__global__ void __launch_bounds__(kThreads, kSampleBlocks)
    sampleSplitKernel(float const* __restrict__ input, float const* __restrict__ offset, float const* __restrict__ mask,
                      __nv_bfloat16* __restrict__ columns, SampleParams const p, Idx const items,
                      int const group_taps, WeightCopy<float, __nv_bfloat16> const copy) {
    copyWeight(copy);
    Idx const runs = static_cast<Idx>(p.channels / VEC);
    Idx const pixels = static_cast<Idx>(p.pixels);
    Idx const out_w = static_cast<Idx>(p.out_w);
    int const first_tap = Grouped ? static_cast<int>(blockIdx.y) * group_taps : 0;
    int const end_tap = Grouped ? min(static_cast<int>(p.taps), first_tap + group_taps) : static_cast<int>(p.taps);
    for (Idx item = static_cast<Idx>(blockIdx.x) * kThreads + threadIdx.x; item < items;
         item += static_cast<Idx>(gridDim.x) * kThreads) {
        Idx const global_pix = item / runs;
        Idx const run = item - global_pix * runs;
        Idx const img = global_pix / pixels;
        Idx const pix = global_pix - img * pixels;
        Idx const oy = pix / out_w;
        Idx const ox = pix - oy * out_w;
        int64_t const c = static_cast<int64_t>(run) * VEC;
        int64_t const gc = c / p.per_group;
        int64_t const cg = c - gc * p.per_group;  // first channel of the run within its conv group
        Idx const plane = static_cast<Idx>(img * p.offset_groups + c / p.per_offset_group);
        float const* src = input + static_cast<int64_t>(img) * p.height * p.width * p.channels + c;
        __nv_bfloat16* group_rows = columns + static_cast<int64_t>(global_pix) * p.ld + gc * p.rows_pad * 2;
        __nv_bfloat16* dst = group_rows + cg;
#pragma unroll 1
        for (int k = first_tap; k < end_tap; ++k) {
            float tap[VEC];
            interpolate<float, VEC, Idx>(
                src, cornersOf<float, Idx>(offset, mask, p, plane, pix, oy, ox, k, static_cast<Idx>(p.channels)), tap);
            Pack<__nv_bfloat16, VEC> hi, lo;
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
                float2 const parts = splitBf16(tap[e]);
                hi.v[e] = __float2bfloat16_rn(parts.x);
                lo.v[e] = __float2bfloat16_rn(parts.y);
            }
            writePack(dst + k * p.per_group, hi);
            writePack(dst + p.rows_pad + k * p.per_group, lo);
        }
        if (cg + VEC == p.per_group && first_tap == 0) {
            for (int64_t r = p.rows; r < p.rows_pad; ++r) {
                group_rows[r] = __float2bfloat16_rn(r == p.rows);
                group_rows[p.rows_pad + r] = __float2bfloat16_rn(0.f);
            }
        }
    }
}

// Taps per tap group of a sampling launch of `blocks` blocks with all taps each: all of them, unless those blocks leave
// multiprocessors short of kSampleBlocks; then as few as fill them (or one tap a group).
inline int groupTaps(int64_t blocks, int64_t taps, int sms) {
    int64_t const wanted = std::min<int64_t>(taps, (int64_t{sms} * kSampleBlocks + blocks - 1) / blocks);
    return static_cast<int>((taps + wanted - 1) / wanted);
}

// The tiling of one pass's sampling (see SampleTiles), for runs of `vec` channels and table entries of entry_bytes.
inline SampleTiles sampleTiles(SampleParams const& p, int vec, int entry_bytes, int64_t images, int sms) {
    SampleTiles t{};
    int64_t const runs = p.per_offset_group / vec;  // runs of one offset group
    t.slice_shift = 0;
    while ((2 << t.slice_shift) <= kMaxSliceRuns && runs % (2 << t.slice_shift) == 0) ++t.slice_shift;
    int const tile_pixels = kThreads >> t.slice_shift;
    t.chunk_taps = static_cast<int>(std::min<int64_t>(p.taps, kTableBytes / entry_bytes / tile_pixels));
    t.slices = static_cast<unsigned>(p.channels / (vec << t.slice_shift));
    t.tiles_x = (p.out_w + kTileW - 1) / kTileW;
    t.tiles_y = (p.pixels / p.out_w + tile_pixels / kTileW - 1) / (tile_pixels / kTileW);
    t.group_taps = groupTaps(t.tiles_x * t.slices * std::min(t.tiles_y, kMaxGridYZ) * std::min(images, kMaxGridYZ),
                             p.taps, sms);
    t.tap_groups = static_cast<int>((p.taps + t.group_taps - 1) / t.group_taps);
    return t;
}

// True when 32-bit index arithmetic (cheaper, fewer registers, a smaller corner table) covers a pass of `images`:
// one image's input, the pass's offsets and its columns below 2^31 elements.
inline bool narrowIndices(SampleParams const& p, int64_t images) {
    constexpr int64_t kNarrow = 0x7fffffff;
    return p.height * p.width * p.channels <= kNarrow && images * 2 * p.offset_groups * p.taps * p.pixels <= kNarrow &&
           images * p.pixels * p.ld <= kNarrow;
}

template <typename T, int VEC>
cudaError_t launchSample(T const* input, T const* offset, T const* mask, T* columns, SampleParams const& p,
                         int64_t images, WeightCopy<T, T> const& copy, int sms, cudaStream_t stream) {
    bool const narrow = narrowIndices(p, images);
    SampleTiles const t = sampleTiles(p, VEC, narrow ? sizeof(Corners<int32_t>) : sizeof(Corners<int64_t>), images, sms);
    if (t.tiles_x * t.slices * t.tap_groups > kMaxGridX) return cudaErrorInvalidValue;
    dim3 const grid(static_cast<unsigned>(t.tiles_x * t.slices * t.tap_groups),
                    static_cast<unsigned>(std::min(t.tiles_y, kMaxGridYZ)),
                    static_cast<unsigned>(std::min(images, kMaxGridYZ)));
    if (narrow) {
        sampleKernel<T, VEC, int32_t><<<grid, kThreads, 0, stream>>>(input, offset, mask, columns, p, t,
                                                                     static_cast<int32_t>(images), copy);
    } else {
        sampleKernel<T, VEC, int64_t><<<grid, kThreads, 0, stream>>>(input, offset, mask, columns, p, t, images, copy);
    }
    return cudaGetLastError();
}

template <int VEC>
cudaError_t launchSampleSplit(float const* input, float const* offset, float const* mask, __nv_bfloat16* columns,
                              SampleParams const& p, int64_t images, WeightCopy<float, __nv_bfloat16> const& copy,
                              int sms, cudaStream_t stream) {
    int64_t const items = images * p.pixels * (p.channels / VEC);
    int64_t const blocks = std::min<int64_t>((items + kThreads - 1) / kThreads, int64_t{sms} * 16);
    bool const narrow = items <= 0x7fffffff - kThreads * blocks && narrowIndices(p, images);
    int const group_taps = groupTaps((items + kThreads - 1) / kThreads, p.taps, sms);
    if (narrow && group_taps < p.taps) {
        dim3 const grid(static_cast<unsigned>(blocks), static_cast<unsigned>((p.taps + group_taps - 1) / group_taps));
        sampleSplitKernel<VEC, int32_t, true><<<grid, kThreads, 0, stream>>>(
            input, offset, mask, columns, p, static_cast<int32_t>(items), group_taps, copy);
    } else if (narrow) {
        sampleSplitKernel<VEC, int32_t, false><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
            input, offset, mask, columns, p, static_cast<int32_t>(items), 0, copy);
    } else {
        sampleSplitKernel<VEC, int64_t, false><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
            input, offset, mask, columns, p, items, 0, copy);
    }
    return cudaGetLastError();
}

// ------------------------------------------------------------------------------------------------------- GEMM
// A GEMM tile configuration: warps (kWarpsM x kWarpsN), each computing kTilesM x 16 output channels by kTilesN x 8
// pixels, kBK reduction steps per stage, kStages pipeline stages, kMinBlocks blocks per SM asked of the register
// allocator.
template <int WarpsM, int WarpsN, int TilesM, int TilesN, int BK, int Stages, int MinBlocks>
struct Tiling {
    static constexpr int kWarpsM = WarpsM, kWarpsN = WarpsN, kTilesM = TilesM, kTilesN = TilesN;
    static constexpr int kBK = BK, kStages = Stages, kMinBlocks = MinBlocks;
    static constexpr int kThreads = 32 * WarpsM * WarpsN;
    static constexpr int kBM = WarpsM * TilesM * 16, kBN = WarpsN * TilesN * 8;
};
// Large problems: fp16/bf16 128 x 128 per block (64x32 warp tiles, 2 blocks per SM); float32 64 x 256 (32x64 warp
// tiles, its split fragments and partial sums double the registers): the fastest of the tilings measured (bench/
// README.md).
template <typename T>
using LargeTiling = std::conditional_t<std::is_same_v<T, float>, Tiling<2, 4, 2, 8, 32, 3, 1>, Tiling<2, 4, 4, 4, 32, 4, 2>>;
// Problems with fewer large tiles than multiprocessors: 64 x 32 per block, 4 warps.
using SmallTiling = Tiling<2, 2, 2, 2, 32, 4, 4>;

template <typename T, class C>
struct GemmShape {
    static constexpr int kChunk = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte copy
    static constexpr int kLds = C::kBK + kChunk;                         // padded row: conflict-free fragment reads
    static constexpr int kStageElems = (C::kBM + C::kBN) * kLds;
    static constexpr int kSmemBytes = C::kStages * kStageElems * static_cast<int>(sizeof(T));
};

struct GemmParams {
    int64_t per_group_out;  // Mg
    int64_t rows_pad;       // reduction length of a group: a row of the prepared weight, a group's rows of columns
    int64_t ld;             // column values per pixel
    int64_t cols;           // images of the slice * P
    int64_t pixels;         // P
    int64_t out_channels;
};

// The GEMM needs sm_80 (cp.async, mma.sync m16n8k16 f16/bf16 and m16n8k8 tf32). Code for older targets (sm_75 in
// the default build) compiles these to a trap, and the launcher refuses such a device before any launch.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define TORCHTRT_EXT_SM80_ONLY(...) __trap()
#else
#define TORCHTRT_EXT_SM80_ONLY(...) __VA_ARGS__
#endif

__device__ __forceinline__ void cpAsync16(void* smem, void const* gmem, bool ok) {
    unsigned const s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    TORCHTRT_EXT_SM80_ONLY(
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(ok ? 16 : 0)));
}
__device__ __forceinline__ void cpAsyncCommit() { TORCHTRT_EXT_SM80_ONLY(asm volatile("cp.async.commit_group;\n" ::)); }
template <int N>
__device__ __forceinline__ void cpAsyncWait() {
    TORCHTRT_EXT_SM80_ONLY(asm volatile("cp.async.wait_group %0;\n" ::"n"(N)));
}

__device__ __forceinline__ void ldmatrixX4(uint32_t (&r)[4], void const* smem) {
    unsigned const s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t const (&a)[4], uint32_t const (&b)[2]) {
    if constexpr (std::is_same_v<T, __half>) {
        TORCHTRT_EXT_SM80_ONLY(
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                         "{%8, %9}, {%0, %1, %2, %3};\n"
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1])));
    } else {
        TORCHTRT_EXT_SM80_ONLY(
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                         "{%8, %9}, {%0, %1, %2, %3};\n"
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1])));
    }
}

__device__ __forceinline__ void mma1688(float (&d)[4], uint32_t const (&a)[4], uint32_t const (&b)[2]) {
    TORCHTRT_EXT_SM80_ONLY(
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1])));
}

// x rounded to TF32, to nearest with ties away from zero, as cvt.rna.tf32.f32 rounds a finite x (an infinity becomes a
// NaN, which the products then give anyway): two integer instructions, where ptxas expands cvt.rna.tf32 into about six
// on sm_90 (its NaN and infinity checks).
__device__ __forceinline__ uint32_t roundTf32(float x) { return (__float_as_uint(x) + 0x1000u) & 0xffffe000u; }

// x = hi + lo with hi and lo TF32 (round to nearest): hi * y keeps the top bits, lo the next ones ("3xTF32").
__device__ __forceinline__ void splitTf32(float x, uint32_t& hi, uint32_t& lo) {
    hi = roundTf32(x);
    lo = roundTf32(x - __uint_as_float(hi));
}

// Rows [row0, row0 + ROWS) x reduction steps [k0, k0 + kBK) of a K-contiguous matrix (row length ld) into shared
// memory by 16-byte cp.async copies; zeros for rows >= row_end or steps >= k_end (a copy is wholly in or out: k_end
// and ld are multiples of a copy's elements).
template <typename T, class C, int ROWS>
__device__ __forceinline__ void copyTile(T* dst, T const* __restrict__ src, int64_t row0, int64_t row_end, int64_t ld,
                                         int64_t k0, int64_t k_end) {
    using S = GemmShape<T, C>;
    constexpr int kChunksPerRow = C::kBK / S::kChunk;
    static_assert((ROWS * kChunksPerRow) % C::kThreads == 0, "the tile must split evenly over the threads");
#pragma unroll
    for (int s = 0; s < ROWS * kChunksPerRow / C::kThreads; ++s) {
        int const i = s * C::kThreads + threadIdx.x;
        int const r = i / kChunksPerRow, ch = i % kChunksPerRow;
        int64_t const row = row0 + r, k = k0 + ch * S::kChunk;
        bool const ok = row < row_end && k < k_end;
        cpAsync16(dst + r * S::kLds + ch * S::kChunk, ok ? src + row * ld + k : src, ok);
    }
}

// One stage of A (prepared weight rows m0.., reduction k0..) and B (columns of pixels n0..) into shared memory, zeros
// outside the matrices.
template <typename T, class C>
__device__ __forceinline__ void loadStage(T* As, T* Bs, T const* __restrict__ a, T const* __restrict__ b,
                                          GemmParams const& p, int64_t m0, int64_t n0, int64_t k0) {
    copyTile<T, C, C::kBM>(As, a, m0, p.per_group_out, p.rows_pad, k0, p.rows_pad);
    copyTile<T, C, C::kBN>(Bs, b, n0, p.cols, p.ld, k0, p.rows_pad);
}

// The tensor-core products of one stage into acc (fp16/bf16) or into part (float: 3xTF32, folded by the caller).
template <typename T, class C>
__device__ __forceinline__ void computeStage(T const* As, T const* Bs, int wm, int wn, int lane,
                                             float (&acc)[C::kTilesM][C::kTilesN][4]) {
    using S = GemmShape<T, C>;
    if constexpr (std::is_same_v<T, float>) {
        int const g = lane >> 2, t = lane & 3;
#pragma unroll
        for (int s = 0; s < C::kBK / 8; ++s) {
            uint32_t ahi[C::kTilesM][4], alo[C::kTilesM][4], bhi[C::kTilesN][2], blo[C::kTilesN][2];
#pragma unroll
            for (int i = 0; i < C::kTilesM; ++i) {
                float const* row = As + (wm * C::kTilesM * 16 + i * 16 + g) * S::kLds + s * 8 + t;
                splitTf32(row[0], ahi[i][0], alo[i][0]);
                splitTf32(row[8 * S::kLds], ahi[i][1], alo[i][1]);
                splitTf32(row[4], ahi[i][2], alo[i][2]);
                splitTf32(row[8 * S::kLds + 4], ahi[i][3], alo[i][3]);
            }
#pragma unroll
            for (int j = 0; j < C::kTilesN; ++j) {
                float const* col = Bs + (wn * C::kTilesN * 8 + j * 8 + g) * S::kLds + s * 8 + t;
                splitTf32(col[0], bhi[j][0], blo[j][0]);
                splitTf32(col[4], bhi[j][1], blo[j][1]);
            }
#pragma unroll
            for (int i = 0; i < C::kTilesM; ++i)
#pragma unroll
                for (int j = 0; j < C::kTilesN; ++j) {
                    mma1688(acc[i][j], alo[i], bhi[j]);
                    mma1688(acc[i][j], ahi[i], blo[j]);
                    mma1688(acc[i][j], ahi[i], bhi[j]);
                }
        }
    } else {
#pragma unroll
        for (int kk = 0; kk < C::kBK / 16; ++kk) {
            uint32_t a[C::kTilesM][4], b[C::kTilesN][2];
#pragma unroll
            for (int i = 0; i < C::kTilesM; ++i) {
                ldmatrixX4(a[i], As + (wm * C::kTilesM * 16 + i * 16 + (lane & 15)) * S::kLds + kk * 16 + (lane >> 4) * 8);
            }
#pragma unroll
            for (int jp = 0; jp < C::kTilesN / 2; ++jp) {
                uint32_t r[4];
                ldmatrixX4(r, Bs + (wn * C::kTilesN * 8 + jp * 16 + (lane & 7) + (lane >> 4) * 8) * S::kLds + kk * 16 +
                                  ((lane >> 3) & 1) * 8);
                b[2 * jp][0] = r[0];
                b[2 * jp][1] = r[1];
                b[2 * jp + 1][0] = r[2];
                b[2 * jp + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < C::kTilesM; ++i)
#pragma unroll
                for (int j = 0; j < C::kTilesN; ++j) mma16816<T>(acc[i][j], a[i], b[j]);
        }
    }
}

// Block (x, y, z): output-channel tile x of conv group z, pixel tiles y, y + gridDim.y, ...
template <typename T, class C>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks)
    gemmKernel(T const* __restrict__ prep, T const* __restrict__ columns, T* __restrict__ out, GemmParams const p) {
    using S = GemmShape<T, C>;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T* smem = reinterpret_cast<T*>(smem_raw);
    int const warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int const wm = warp / C::kWarpsN, wn = warp % C::kWarpsN;
    int const g = lane >> 2, t = lane & 3;
    int64_t const group = blockIdx.z;
    int64_t const m0 = static_cast<int64_t>(blockIdx.x) * C::kBM;
    T const* a = prep + group * p.per_group_out * p.rows_pad;
    T const* b = columns + group * p.rows_pad;
    int64_t const k_tiles = (p.rows_pad + C::kBK - 1) / C::kBK;
    int64_t const n_tiles = (p.cols + C::kBN - 1) / C::kBN;
    constexpr bool kSplit = std::is_same_v<T, float>;

    for (int64_t tile = blockIdx.y; tile < n_tiles; tile += gridDim.y) {
        int64_t const n0 = tile * C::kBN;
        float acc[C::kTilesM][C::kTilesN][4] = {};
        float part[C::kTilesM][C::kTilesN][4] = {};
#pragma unroll
        for (int s = 0; s < C::kStages - 1; ++s) {
            if (s < k_tiles) {
                T* stage = smem + s * S::kStageElems;
                loadStage<T, C>(stage, stage + C::kBM * S::kLds, a, b, p, m0, n0, s * C::kBK);
            }
            cpAsyncCommit();
        }
        for (int64_t kt = 0; kt < k_tiles; ++kt) {
            cpAsyncWait<C::kStages - 2>();
            __syncthreads();  // stage kt has landed for every thread; stage kt - 1 is free again
            int64_t const next = kt + C::kStages - 1;
            if (next < k_tiles) {
                T* stage = smem + (next % C::kStages) * S::kStageElems;
                loadStage<T, C>(stage, stage + C::kBM * S::kLds, a, b, p, m0, n0, next * C::kBK);
            }
            cpAsyncCommit();
            T const* stage = smem + (kt % C::kStages) * S::kStageElems;
            if constexpr (kSplit) {
                computeStage<T, C>(stage, stage + C::kBM * S::kLds, wm, wn, lane, part);
#pragma unroll
                for (int i = 0; i < C::kTilesM; ++i)
#pragma unroll
                    for (int j = 0; j < C::kTilesN; ++j)
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            acc[i][j][e] += part[i][j][e];
                            part[i][j][e] = 0.f;
                        }
            } else {
                computeStage<T, C>(stage, stage + C::kBM * S::kLds, wm, wn, lane, acc);
            }
        }
        cpAsyncWait<0>();
        __syncthreads();  // every warp is done with the stages before the next tile's prologue refills them

        // Epilogue: NCHW (the bias came with the ones row). Column q of the tile is pixel q % P of image q / P of the slice.
#pragma unroll
        for (int j = 0; j < C::kTilesN; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                int64_t const q = n0 + wn * C::kTilesN * 8 + j * 8 + 2 * t + e;
                if (q >= p.cols) continue;
                int64_t const img = q / p.pixels;
                T* dst = out + img * p.out_channels * p.pixels + (q - img * p.pixels);
#pragma unroll
                for (int i = 0; i < C::kTilesM; ++i)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        int64_t const m = m0 + wm * C::kTilesM * 16 + i * 16 + g + h * 8;
                        if (m >= p.per_group_out) continue;
                        dst[(group * p.per_group_out + m) * p.pixels] = fromF32<T>(acc[i][j][2 * h + e]);
                    }
            }
    }
}

template <typename T, class C>
cudaError_t launchGemmAs(T const* prep, T const* columns, T* out, GemmParams const& p, int64_t groups,
                         Device const& dev, cudaStream_t stream) {
    constexpr int kSmem = GemmShape<T, C>::kSmemBytes;
    int64_t const m_tiles = (p.per_group_out + C::kBM - 1) / C::kBM;
    int64_t const n_tiles = (p.cols + C::kBN - 1) / C::kBN;
    if (m_tiles > kMaxGridX || groups > kMaxGridYZ) return cudaErrorInvalidValue;
    static std::atomic<uint64_t> smem_set_on{0};  // one per instantiation: the kernels share one function type
    cudaError_t const status = allowDynamicSmem(gemmKernel<T, C>, kSmem, dev, smem_set_on);
    if (status != cudaSuccess) return status;
    dim3 const grid(static_cast<unsigned>(m_tiles), static_cast<unsigned>(std::min(n_tiles, kMaxGridYZ)),
                    static_cast<unsigned>(groups));
    gemmKernel<T, C><<<grid, C::kThreads, kSmem, stream>>>(prep, columns, out, p);
    return cudaGetLastError();
}

// The large tiling when it gives every multiprocessor at least one block, else the small one.
template <typename T>
cudaError_t launchGemm(T const* prep, T const* columns, T* out, GemmParams const& p, int64_t groups, Device const& dev,
                       cudaStream_t stream) {
    using L = LargeTiling<T>;
    int64_t const large_blocks =
        (p.per_group_out + L::kBM - 1) / L::kBM * ((p.cols + L::kBN - 1) / L::kBN) * groups;
    return large_blocks >= dev.sms
               ? launchGemmAs<T, L>(prep, columns, out, p, groups, dev, stream)
               : launchGemmAs<T, SmallTiling>(prep, columns, out, p, groups, dev, stream);
}

}  // namespace deform_conv2d_detail
}  // namespace torchtrt_ext

#include "kernels/deform_conv2d_direct.cuh"
#include "kernels/deform_conv2d_sm90.cuh"

namespace torchtrt_ext {
namespace deform_conv2d_detail {

// ---------------------------------------------------------------------------------------- cuBLASLt operands
// out[img][oc][p] = bias[oc] (or 0): the whole op when there are no input channels.
template <typename T>
__global__ void fillBiasKernel(T const* __restrict__ bias, T* __restrict__ out, int64_t total, int64_t out_channels,
                               int64_t pixels) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        out[i] = bias != nullptr ? bias[i / pixels % out_channels] : fromF32<T>(0.f);
    }
}

// The alignment (bytes, power of 2, <= 256) shared by base + j * step for every j and every step.
inline int32_t alignmentOver(void const* base, std::initializer_list<int64_t> steps) {
    int32_t align = cublaslt::alignmentOf(base);
    for (int64_t step : steps) {
        align = std::min(align, cublaslt::alignmentOf(reinterpret_cast<void const*>(static_cast<uintptr_t>(step))));
    }
    return align;
}

// How one call runs its GEMM (cuBLASLt's, or our own kernel) and slices its images into passes.
struct Route {
    int64_t slice = 0;  // images per pass: as many as fit, spread evenly over the passes
    int64_t passes = 0;
    bool split = false;  // float32 as bf16 pairs: two cuBLASLt GEMMs per group (see the top of this file)
    // cuBLASLt's plans for [a full pass, the last pass]: [0] the GEMM (split: the cross products), [1] split: hi * hi.
    // Null: our own GEMM.
    std::shared_ptr<cublaslt::Plan const> plans[2][2];
};

template <typename T>
constexpr cudaDataType_t cudaTypeOf() {
    return std::is_same_v<T, float> ? CUDA_R_32F : std::is_same_v<T, __half> ? CUDA_R_16F : CUDA_R_16BF;
}

// cuBLASLt's plans for every GEMM of the call (per conv group g and pass: D = out + g * Mg * P, pixels x Mg, ld P;
// A = group g's columns; B = group g's prepared weight; one batch per image), split or not. False, and no plans,
// when one is missing.
template <typename T>
bool planGemms(Route& r, OpSizes const& s, bool split, void const* columns, void const* prep, T const* out) {
    int64_t const parts = split ? 2 : 1, e = split ? 2 : static_cast<int64_t>(sizeof(T));
    int64_t const pixels = s.pixels(), mg = s.out_channels / s.groups, rp = s.rowsPad(), ld = parts * s.ld();
    int32_t const align_a = alignmentOver(columns, {parts * rp * e, pixels * ld * e});
    int32_t const align_b = split ? alignmentOver(prep, {mg * parts * rp * e, rp * e}) : alignmentOver(prep, {mg * rp * e});
    int64_t const out_elem = sizeof(T);
    int32_t const align_d = alignmentOver(out, {mg * pixels * out_elem, s.out_channels * pixels * out_elem});
    auto const planFor = [&](int64_t images, int64_t k) {
        cublaslt::Shape const shape{split ? CUDA_R_16BF : cudaTypeOf<T>(), cudaTypeOf<T>(), pixels, mg, k, ld,
                                    parts * rp, pixels, images, pixels * ld, 0, s.out_channels * pixels, align_a,
                                    align_b, align_d};
        cudaError_t status = cudaSuccess;
        return cublaslt::plan(shape, status);
    };
    int64_t const last = s.n - (r.passes - 1) * r.slice;
    for (int kind = 0; kind < 2; ++kind) {
        if (kind == 1 && last == r.slice) {  // one cache lookup when the passes are equal
            r.plans[1][0] = r.plans[0][0];
            r.plans[1][1] = r.plans[0][1];
            break;
        }
        int64_t const images = kind == 0 ? r.slice : last;
        r.plans[kind][0] = planFor(images, parts * rp);
        if (split) r.plans[kind][1] = planFor(images, rp);
        if (r.plans[kind][0] == nullptr || (split && r.plans[kind][1] == nullptr)) {
            r.plans[0][0] = r.plans[0][1] = r.plans[1][0] = r.plans[1][1] = nullptr;  // none: our own GEMM runs
            return false;
        }
    }
    r.split = split;
    return true;
}

// The route of a call: cuBLASLt where it is loaded and has algorithms for every GEMM of the call (float32: split
// into bf16 pairs, else in true FP32), else our own GEMM. False: neither can run (no cuBLASLt and a device below sm_80).
template <typename T>
bool chooseRoute(Route& r, OpSizes const& s, Device const& dev, int64_t room, void const* columns, void const* prep,
                 T const* out) {
    int64_t const image = s.imageColumnsBytes();
    int64_t const fit = image > 0 ? std::min(s.n, room / image) : s.n;
    r.passes = (s.n + fit - 1) / fit;
    r.slice = (s.n + r.passes - 1) / r.passes;
    if (cublaslt::available()) {
        if (std::is_same_v<T, float> && planGemms<T>(r, s, true, columns, prep, out)) return true;
        if (planGemms<T>(r, s, false, columns, prep, out)) return true;
    }
    return dev.major >= 8;  // our own GEMM needs sm_80+
}

// Channels per thread: a 16-byte store of columns (split: 8 floats, two 16-byte loads per corner, for 16-byte stores
// of the hi and the lo parts; 4 floats with 8-byte stores are slower: bench/README.md).
template <typename Col>
constexpr int kSampleVec = 16 / sizeof(Col);

// The sampling of one pass of `images` images.
template <typename T, typename Col>
cudaError_t sampleColumns(T const* x, T const* offset, T const* mask, Col* columns, SampleParams const& sp, bool vec,
                          int64_t images, WeightCopy<T, Col> const& copy, int sms, cudaStream_t stream) {
    constexpr int kVec = kSampleVec<Col>;
    if constexpr (std::is_same_v<T, Col>) {
        return vec ? launchSample<T, kVec>(x, offset, mask, columns, sp, images, copy, sms, stream)
                   : launchSample<T, 1>(x, offset, mask, columns, sp, images, copy, sms, stream);
    } else {
        return vec ? launchSampleSplit<kVec>(x, offset, mask, columns, sp, images, copy, sms, stream)
                   : launchSampleSplit<1>(x, offset, mask, columns, sp, images, copy, sms, stream);
    }
}

// ------------------------------------------------------------------------------------------------ the whole op
// The passes of a call whose route is chosen (Col: the columns' element type, see WeightCopy), from the channels-last
// input `nhwc`.
template <typename T, typename Col>
cudaError_t runPasses(OpSizes const& s, TorchtrtExtDeformConv2dTensors const& t, T const* nhwc, Route const& route,
                      unsigned char* base, Device const& dev, cudaStream_t stream) {
    int64_t const pixels = s.pixels(), taps = s.taps(), rp = s.rowsPad(), mg = s.out_channels / s.groups;
    int64_t const parts = std::is_same_v<T, Col> ? 1 : 2;
    Col* prep = reinterpret_cast<Col*>(base + s.nhwcBytes());
    void* lt_workspace = base + s.nhwcBytes() + s.preparedBytes();
    Col* columns = reinterpret_cast<Col*>(base + s.fixedBytes());
    T const* off = static_cast<T const*>(t.offset);
    T const* msk = static_cast<T const*>(t.mask);
    SampleParams const sp = sampleParamsOf(s, parts * s.ld());
    constexpr int kVec = kSampleVec<Col>;
    // Runs of kVec channels when the channel counts and the pointer allow (even for small problems, where a thread
    // per channel would put more threads in flight, runs are faster: bench/README.md).
    bool const vec = sp.per_group % kVec == 0 && sp.per_offset_group % kVec == 0 && aligned16(nhwc);
    for (int64_t n0 = 0; n0 < s.n; n0 += route.slice) {
        int64_t const m = std::min(route.slice, s.n - n0);
        T const* x = nhwc + n0 * s.height * s.width * s.channels;
        T const* o = off + n0 * 2 * s.offset_groups * taps * pixels;
        T const* mk = msk != nullptr ? msk + n0 * s.offset_groups * taps * pixels : nullptr;
        WeightCopy<T, Col> const copy{static_cast<T const*>(t.weight), static_cast<T const*>(t.bias), prep,
                                      static_cast<uint32_t>(n0 == 0 ? s.out_channels * rp : 0),
                                      static_cast<uint32_t>(s.rows()), static_cast<uint32_t>(rp),
                                      static_cast<uint32_t>(sp.per_group), static_cast<uint32_t>(taps)};
        cudaError_t status = sampleColumns<T, Col>(x, o, mk, columns, sp, vec, m, copy, dev.sms, stream);
        if (status != cudaSuccess) return status;
        T* y = static_cast<T*>(t.output) + n0 * s.out_channels * pixels;
        auto const& plans = route.plans[m == route.slice ? 0 : 1];
        if (plans[0] != nullptr) {
            for (int64_t g = 0; g < s.groups && status == cudaSuccess; ++g) {
                Col const* a = columns + g * parts * rp;
                Col const* b = prep + g * mg * parts * rp;
                T* d = y + g * mg * pixels;
                // split: lo_w * hi_c + hi_w * lo_c (weight [lo | hi] against columns [hi | lo]), then + hi_w * hi_c
                status = cublaslt::run(*plans[0], a, b, d, false, lt_workspace, stream);
                if (route.split && status == cudaSuccess) {
                    status = cublaslt::run(*plans[1], a, b + rp, d, true, lt_workspace, stream);
                }
            }
        } else if constexpr (std::is_same_v<T, Col>) {
            GemmParams const gp{mg, rp, s.ld(), m * pixels, pixels, s.out_channels};
            status = launchGemm<T>(prep, columns, y, gp, s.groups, dev, stream);
        }
        if (status != cudaSuccess) return status;
    }
    return cudaSuccess;
}

template <typename T>
int32_t deformConv2d(OpSizes const& s, TorchtrtExtDeformConv2dTensors const& t, void* workspace,
                     int64_t workspace_bytes, cudaStream_t stream) {
    int64_t const pixels = s.pixels();
    if (s.n == 0 || s.out_channels == 0 || pixels == 0) return static_cast<int32_t>(cudaSuccess);
    int64_t const fixed = s.fixedBytes();
    bool const any_input = s.channels > 0;  // without input channels, input and weight hold no element
    if ((any_input && (t.input == nullptr || t.weight == nullptr)) || t.offset == nullptr || t.output == nullptr ||
        workspace == nullptr || reinterpret_cast<uintptr_t>(workspace) % kWorkspaceAlign != 0 ||
        workspace_bytes < fixed + s.imageColumnsBytes()) {
        return static_cast<int32_t>(cudaErrorInvalidValue);
    }
    if ((s.height * s.width + kTransposeTile - 1) / kTransposeTile > kMaxGridX ||
        (s.channels + kTransposeTile - 1) / kTransposeTile > kMaxGridYZ) {
        return static_cast<int32_t>(cudaErrorInvalidValue);
    }
    T* out = static_cast<T*>(t.output);
    if (!any_input) {  // the output is the bias
        int64_t const total = s.n * s.out_channels * pixels;
        fillBiasKernel<T><<<static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, 4096)),
                            kThreads, 0, stream>>>(static_cast<T const*>(t.bias), out, total, s.out_channels, pixels);
        return static_cast<int32_t>(cudaGetLastError());
    }
    Device dev{};
    cudaError_t status = currentDevice(dev);
    if (status != cudaSuccess) return static_cast<int32_t>(status);
    auto* base = static_cast<unsigned char*>(workspace);
    // on sm_90a: the implicit GEMM (deform_conv2d_sm90.cuh), no columns
    bool const fused = fusedFits(s, dev, workspace_bytes) && (!s.channels_last || aligned16(t.input));
    // The direct kernel for small problems (deform_conv2d_direct.cuh) first, unless TORCHTRT_EXT_DCN_FUSED=1 forces
    // the fused kernel where that applies and TORCHTRT_EXT_DCN_DIRECT=1 does not force the direct one.
    if (directFits(s) && (directMode() == RouteMode::kWherever || !fused || fusedMode() != RouteMode::kWherever)) {
        return static_cast<int32_t>(launchDirect<T>(s, t, stream));
    }
    Route route{};
    if (!fused && !chooseRoute<T>(route, s, dev, workspace_bytes - fixed, base + fixed, base + s.nhwcBytes(), out)) {
        return static_cast<int32_t>(cudaErrorNotSupported);  // no cuBLASLt, and our own GEMM needs sm_80+
    }
    if (fused) return static_cast<int32_t>(launchFused<T>(s, t, base, workspace_bytes, dev, stream));
    T const* nhwc = static_cast<T const*>(t.input);
    if (!s.channels_last) {
        T* dst = reinterpret_cast<T*>(base);
        status = launchTranspose<T>(nhwc, dst, s.n, s.channels, s.height * s.width, stream, false);
        if (status != cudaSuccess) return static_cast<int32_t>(status);
        nhwc = dst;
    }
    if constexpr (std::is_same_v<T, float>) {
        if (route.split) return static_cast<int32_t>(runPasses<T, __nv_bfloat16>(s, t, nhwc, route, base, dev, stream));
    }
    return static_cast<int32_t>(runPasses<T, T>(s, t, nhwc, route, base, dev, stream));
}

}  // namespace deform_conv2d_detail
}  // namespace torchtrt_ext

extern "C" {

TORCHTRT_EXT_API int32_t torchtrt_ext_deform_conv2d(TorchtrtExtDeformConv2dDesc const* desc,
                                                    TorchtrtExtDeformConv2dTensors const* tensors, void* workspace,
                                                    int64_t workspace_bytes, cudaStream_t stream) {
    using namespace torchtrt_ext::deform_conv2d_detail;
    OpSizes s{};
    if (!makeSizes(s, desc) || tensors == nullptr) return static_cast<int32_t>(cudaErrorInvalidValue);
    switch (desc->dtype) {
    case TORCHTRT_EXT_DCN_FLOAT32: return deformConv2d<float>(s, *tensors, workspace, workspace_bytes, stream);
    case TORCHTRT_EXT_DCN_FLOAT16: return deformConv2d<__half>(s, *tensors, workspace, workspace_bytes, stream);
    default: return deformConv2d<__nv_bfloat16>(s, *tensors, workspace, workspace_bytes, stream);
    }
}

TORCHTRT_EXT_API int64_t torchtrt_ext_deform_conv2d_workspace_size(TorchtrtExtDeformConv2dDesc const* desc) {
    using namespace torchtrt_ext::deform_conv2d_detail;
    OpSizes s{};
    if (!makeSizes(s, desc)) return -1;
    return s.fixedBytes() + columnsBytes(s);
}

#ifdef TORCHTRT_EXT_DCN_TRACE
TORCHTRT_EXT_API int32_t torchtrt_ext_deform_conv2d_trace(void* host, int64_t bytes) {
    using namespace torchtrt_ext::deform_conv2d_detail;
    if (bytes < 0 || static_cast<uint64_t>(bytes) > sizeof(traceRows) || (host == nullptr && bytes != 0)) {
        return static_cast<int32_t>(cudaErrorInvalidValue);
    }
    cudaError_t status = bytes == 0 ? cudaSuccess : cudaMemcpyFromSymbol(host, traceRows, static_cast<size_t>(bytes));
    void* rows = nullptr;
    if (status == cudaSuccess) status = cudaGetSymbolAddress(&rows, traceRows);
    if (status == cudaSuccess) status = cudaMemset(rows, 0, sizeof(traceRows));
    return static_cast<int32_t>(status);
}
#endif

}  // extern "C"
