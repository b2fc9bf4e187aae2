// L2Norm kernels behind the extern "C" launchers of l2norm.h.
//
// Four kernels, one plan chooses among them from the [outer, reduced, inner] view:
//   * rows         inner == 1 (last axis): a group of `lanes` threads (1..32, inside one warp) owns a row, holds it
//                  in registers with 16-byte loads, reduces with warp shuffles, scales and stores: one read, one write.
//   * cols_smem    inner > 1 (NCHW channel axis), 16-byte aligned: a block owns a tile [reduced, tx * VEC] of one
//                  outer slice, staged in shared memory by cp.async (no registers held while loading), so 3-6 blocks
//                  per SM overlap their load / reduce / store phases; partial sums meet in shared memory. One read
//                  of HBM, one write. Used while the tile fits in shared memory (reduced up to ~7000).
//   * cols_cached  the same tile held in registers (R rows of VEC columns per thread): unaligned data (VEC = 1),
//                  long rows (inner == 1, reduced > 32 * 16 vectors) and tiles too tall for shared memory.
//   * cols_twopass the fallback for any reduced: the same tile, read once for the sums of squares and once more
//                  to scale (the second read mostly hits L2 while the tile is small).
// Measured on an H200 (bench/kernels.py, time / x.clone() time): the register-cached column kernel leaves HBM idle
// while a block reduces (its registers hold the tile, nothing else is in flight): 1.05-1.45x at C = 256..1024, worst
// for fp16 and C = 1024; staged in shared memory: 1.04-1.06x at C = 256, 1.13-1.20x at C = 1024 (4x1024x64x64).
// Tried and dropped: thread-block clusters splitting C over 2-8 blocks (no gain), L2 prefetch of the next tile with
// a persistent grid (small gain, lost to evict-first load/store hints, which cost 5-15%).
// All arithmetic is FP32; data are float, __half or __nv_bfloat16.
#include "kernels/l2norm.h"
#include "kernels/numeric.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace torchtrt_ext {
namespace l2norm_detail {

constexpr int kWarp = 32;
constexpr int kMaxPerThread = 16;       // registers cache at most 16 vectors (256 bytes) per thread
constexpr int kMaxCachedThreads = 512;  // __launch_bounds__ of the register-caching kernels: <= 128 registers
constexpr int64_t kMaxGrid = 0x7fffffff;

template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> loadPack(T const* p) {
    return *reinterpret_cast<Pack<T, VEC> const*>(p);
}

// Keeps 16-bit data packed in registers between the sum of squares and the scaling: without this barrier the
// compiler may keep the FP32 conversions alive instead (twice the registers) to reuse them in the scaling.
template <typename T, int VEC>
__device__ __forceinline__ void keepPacked(Pack<T, VEC>& p) {
    if constexpr (sizeof(T) < 4 && (sizeof(T) * VEC) % 4 == 0) {
        constexpr int kWords = static_cast<int>(sizeof(T) * VEC / 4);
        uint32_t words[kWords];
        __builtin_memcpy(words, &p, sizeof(words));
#pragma unroll
        for (int i = 0; i < kWords; ++i) asm volatile("" : "+r"(words[i]));
        __builtin_memcpy(&p, words, sizeof(words));
    }
}

template <typename T, int VEC>
__device__ __forceinline__ void zeroPack(Pack<T, VEC>& p) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) p.v[j] = fromF32<T>(0.f);
}

// 1 / max(sqrt(sumsq), eps). `n < eps` is false for NaN, so a NaN in the vector propagates like torch's clamp_min.
__device__ __forceinline__ float invNorm(float sumsq, float eps) {
    float const n = sqrtf(sumsq);
    return 1.f / (n < eps ? eps : n);
}

template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> scaled(Pack<T, VEC> const& in, float const (&inv)[VEC]) {
    Pack<T, VEC> out;
#pragma unroll
    for (int j = 0; j < VEC; ++j) out.v[j] = fromF32<T>(toF32(in.v[j]) * inv[j]);
    return out;
}

template <typename T, int VEC>
__device__ __forceinline__ void storeScaled(T* p, Pack<T, VEC> const& in, float const (&inv)[VEC]) {
    *reinterpret_cast<Pack<T, VEC>*>(p) = scaled(in, inv);
}

// ---------------------------------------------------------------------------------------------------------------
// rows: inner == 1. blockDim.x = lanes * rowsPerBlock; lanes is a power of two <= 32, so a row never spans warps.
// Element e of a row lives in lane (e / VEC) % lanes, vector slot (e / VEC) / lanes: a group's loads are contiguous.
template <typename T, int VEC, int NV>
__global__ void __launch_bounds__(kMaxCachedThreads) l2normRowsKernel(T const* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t reduced,
                                 int lanes, float eps) {
    int const lane = static_cast<int>(threadIdx.x) & (lanes - 1);
    int const rowsPerBlock = static_cast<int>(blockDim.x) / lanes;
    int const sub = static_cast<int>(threadIdx.x) / lanes;
    // every thread of the block runs the same number of iterations: shuffles below see full warps
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * rowsPerBlock; base < rows;
         base += static_cast<int64_t>(gridDim.x) * rowsPerBlock) {
        int64_t const row = base + sub;
        bool const rowOk = row < rows;
        T const* xr = x + (rowOk ? row : 0) * reduced;
        Pack<T, VEC> v[NV];
        float ss = 0.f;
#pragma unroll
        for (int k = 0; k < NV; ++k) {
            int64_t const e = (static_cast<int64_t>(k) * lanes + lane) * VEC;
            if (rowOk && e < reduced) {
                v[k] = loadPack<T, VEC>(xr + e);
            } else {
                zeroPack(v[k]);
            }
        }
#pragma unroll
        for (int k = 0; k < NV; ++k) {
#pragma unroll
            for (int j = 0; j < VEC; ++j) {
                float const f = toF32(v[k].v[j]);
                ss = fmaf(f, f, ss);
            }
        }
#pragma unroll
        for (int k = 0; k < NV; ++k) keepPacked(v[k]);
        for (int m = lanes >> 1; m > 0; m >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, m);
        float inv[VEC];
        float const s = invNorm(ss, eps);
#pragma unroll
        for (int j = 0; j < VEC; ++j) inv[j] = s;
        T* yr = y + (rowOk ? row : 0) * reduced;
#pragma unroll
        for (int k = 0; k < NV; ++k) {
            int64_t const e = (static_cast<int64_t>(k) * lanes + lane) * VEC;
            if (rowOk && e < reduced) storeScaled<T, VEC>(yr + e, v[k], inv);
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Column tiles: block (tx, ty) owns columns [tile * tx * VEC, +tx * VEC) of one outer slice; thread (tx, ty) owns
// VEC adjacent columns and the rows ty, ty + blockDim.y, ...

// Sums acc[VEC] (this thread's partial sums of squares of its VEC columns) over the block's ty and returns
// inv[VEC] = 1 / max(sqrt(total), eps). smem: (partials + 1) * tx * VEC floats (see colsSmemBytes).
template <int VEC>
__device__ __forceinline__ void columnInvNorm(float (&acc)[VEC], float (&inv)[VEC], float eps, float* smem) {
    int const tx = static_cast<int>(threadIdx.x);
    int const ty = static_cast<int>(threadIdx.y);
    int const bx = static_cast<int>(blockDim.x);
    int const nthreads = bx * static_cast<int>(blockDim.y);
    int const tid = ty * bx + tx;
    int const cb = bx * VEC;
    int partials;
    if (bx < kWarp) {
        // a warp holds 32 / bx values of ty for the same tx: fold them with shuffles first
        for (int m = bx; m < kWarp; m <<= 1) {
#pragma unroll
            for (int j = 0; j < VEC; ++j) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], m);
        }
        int const lane = tid & (kWarp - 1);
        if (lane < bx) {
#pragma unroll
            for (int j = 0; j < VEC; ++j) smem[(tid / kWarp) * cb + tx * VEC + j] = acc[j];
        }
        partials = nthreads / kWarp;
    } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) smem[ty * cb + tx * VEC + j] = acc[j];
        partials = static_cast<int>(blockDim.y);
    }
    __syncthreads();
    float* invs = smem + partials * cb;
    for (int c = tid; c < cb; c += nthreads) {
        float s = 0.f;
        for (int p = 0; p < partials; ++p) s += smem[p * cb + c];
        invs[c] = invNorm(s, eps);
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < VEC; ++j) inv[j] = invs[tx * VEC + j];
    __syncthreads();  // smem is reused by the next tile
}

template <typename T, int VEC, int R>
__global__ void __launch_bounds__(kMaxCachedThreads)
    l2normColsCachedKernel(T const* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t reduced, int64_t inner,
                           int64_t tilesPerOuter, float eps) {
    extern __shared__ float smem[];
    int const ty = static_cast<int>(threadIdx.y);
    int const by = static_cast<int>(blockDim.y);
    int64_t const tileCols = static_cast<int64_t>(blockDim.x) * VEC;
    int64_t const tiles = outer * tilesPerOuter;
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        int64_t const o = t / tilesPerOuter;
        int64_t const col = (t - o * tilesPerOuter) * tileCols + static_cast<int64_t>(threadIdx.x) * VEC;
        bool const colOk = col < inner;
        int64_t const offset = o * reduced * inner + (colOk ? col : 0);
        T const* xo = x + offset;
        Pack<T, VEC> v[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            int64_t const c = static_cast<int64_t>(r) * by + ty;
            if (colOk && c < reduced) {
                v[r] = loadPack<T, VEC>(xo + c * inner);
            } else {
                zeroPack(v[r]);
            }
        }
        float acc[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc[j] = 0.f;
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
            for (int j = 0; j < VEC; ++j) {
                float const f = toF32(v[r].v[j]);
                acc[j] = fmaf(f, f, acc[j]);
            }
        }
#pragma unroll
        for (int r = 0; r < R; ++r) keepPacked(v[r]);
        float inv[VEC];
        columnInvNorm<VEC>(acc, inv, eps, smem);
        T* yo = y + offset;
#pragma unroll
        for (int r = 0; r < R; ++r) {
            int64_t const c = static_cast<int64_t>(r) * by + ty;
            if (colOk && c < reduced) storeScaled<T, VEC>(yo + c * inner, v[r], inv);
        }
    }
}

// 16 bytes global -> shared without passing through registers (cp.async, sm_80+; a plain copy before that).
__device__ __forceinline__ void copyAsync16(void* dst, void const* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint32_t const d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
#else
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<uint4 const*>(src);
#endif
}

__device__ __forceinline__ void copyAsyncWaitAll() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

// colsSmem: like colsCached, but the tile [reduced, tx * VEC] is staged in shared memory by cp.async instead of
// registers, so a block holds few registers and several blocks per SM overlap their load, reduce and store phases.
// Every thread reads back only the 16-byte slots it copied itself, so the copy needs no block barrier.
// Dynamic smem: tileBytes (reduced * tx * 16, see colsSmemTileBytes) then the reduction scratch.
template <typename T, int VEC>
__global__ void __launch_bounds__(kMaxCachedThreads)
    l2normColsSmemKernel(T const* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t reduced, int64_t inner,
                         int64_t tilesPerOuter, float eps, int64_t tileBytes) {
    static_assert(sizeof(T) * VEC == 16, "16-byte vectors only");
    extern __shared__ __align__(16) unsigned char smemRaw[];
    T* tile = reinterpret_cast<T*>(smemRaw);
    float* scratch = reinterpret_cast<float*>(smemRaw + tileBytes);
    int64_t const ty = threadIdx.y;
    int64_t const by = blockDim.y;
    int64_t const cb = static_cast<int64_t>(blockDim.x) * VEC;
    int64_t const slot = static_cast<int64_t>(threadIdx.x) * VEC;
    int64_t const tiles = outer * tilesPerOuter;
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        int64_t const o = t / tilesPerOuter;
        int64_t const col = (t - o * tilesPerOuter) * cb + slot;
        bool const colOk = col < inner;
        int64_t const offset = o * reduced * inner + (colOk ? col : 0);
        T const* xo = x + offset;
        float acc[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc[j] = 0.f;
        if (colOk) {
            for (int64_t c = ty; c < reduced; c += by) copyAsync16(tile + c * cb + slot, xo + c * inner);
            copyAsyncWaitAll();
            for (int64_t c = ty; c < reduced; c += by) {
                Pack<T, VEC> const v = loadPack<T, VEC>(tile + c * cb + slot);
#pragma unroll
                for (int j = 0; j < VEC; ++j) {
                    float const f = toF32(v.v[j]);
                    acc[j] = fmaf(f, f, acc[j]);
                }
            }
        }
        float inv[VEC];
        columnInvNorm<VEC>(acc, inv, eps, scratch);
        if (colOk) {
            T* yo = y + offset;
            for (int64_t c = ty; c < reduced; c += by) {
                storeScaled<T, VEC>(yo + c * inner, loadPack<T, VEC>(tile + c * cb + slot), inv);
            }
        }
    }
}

template <typename T, int VEC>
__global__ void __launch_bounds__(1024) l2normColsTwoPassKernel(T const* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t reduced,
                                        int64_t inner, int64_t tilesPerOuter, float eps) {
    extern __shared__ float smem[];
    constexpr int kUnroll = 4;
    int64_t const ty = threadIdx.y;
    int64_t const by = blockDim.y;
    int64_t const tileCols = static_cast<int64_t>(blockDim.x) * VEC;
    int64_t const tiles = outer * tilesPerOuter;
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        int64_t const o = t / tilesPerOuter;
        int64_t const col = (t - o * tilesPerOuter) * tileCols + static_cast<int64_t>(threadIdx.x) * VEC;
        bool const colOk = col < inner;
        int64_t const offset = o * reduced * inner + (colOk ? col : 0);
        T const* xo = x + offset;
        float acc[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc[j] = 0.f;
        if (colOk) {
            int64_t c = ty;
            for (; c + (kUnroll - 1) * by < reduced; c += kUnroll * by) {
                Pack<T, VEC> v[kUnroll];
#pragma unroll
                for (int u = 0; u < kUnroll; ++u) v[u] = loadPack<T, VEC>(xo + (c + u * by) * inner);
#pragma unroll
                for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
                    for (int j = 0; j < VEC; ++j) {
                        float const f = toF32(v[u].v[j]);
                        acc[j] = fmaf(f, f, acc[j]);
                    }
                }
            }
            for (; c < reduced; c += by) {
                Pack<T, VEC> const v = loadPack<T, VEC>(xo + c * inner);
#pragma unroll
                for (int j = 0; j < VEC; ++j) {
                    float const f = toF32(v.v[j]);
                    acc[j] = fmaf(f, f, acc[j]);
                }
            }
        }
        float inv[VEC];
        columnInvNorm<VEC>(acc, inv, eps, smem);
        if (colOk) {
            T* yo = y + offset;
#pragma unroll 4
            for (int64_t c = ty; c < reduced; c += by) {
                storeScaled<T, VEC>(yo + c * inner, loadPack<T, VEC>(xo + c * inner), inv);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Host side: the plan.

enum class Kind : int32_t { kRows = 0, kColsCached = 1, kColsTwoPass = 2, kColsSmem = 3 };

struct Plan {
    Kind kind;
    int32_t vec;        // elements per access: 1 or 16 / sizeof(T)
    int32_t perThread;  // rows: vectors per lane (NV); colsCached: rows per thread (R); twoPass: unused (1)
    int32_t tx;         // rows: lanes per row; cols: threads along inner (blockDim.x)
    int32_t ty;         // rows: rows per block; cols: threads along reduced (blockDim.y)
    int64_t grid;
    size_t smemBytes;
};

// Knobs of the heuristic (defaults chosen by measurement on an H200, see bench/kernels.py).
struct Tuning {
    int32_t rowBytes = 128;       // bytes of one channel row a cols block reads (tx * VEC * sizeof(T))
    int32_t rowsPerThread = 8;    // target R of the cols kernels
    int32_t minThreads = 256;     // cols blocks are widened along inner up to this many threads
    int32_t maxThreads = 512;     // cols blocks grow along reduced up to this many threads before R grows
    int32_t rowsThreads = 128;    // rows kernel block size
    int32_t rowsVecPerLane = 4;   // target NV of the rows kernel
};

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline int64_t pow2Ceil(int64_t v) {
    int64_t p = 1;
    while (p < v) p <<= 1;
    return p;
}

inline bool aligned16(void const* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

inline size_t colsSmemBytes(int32_t tx, int32_t ty, int32_t vec) {
    int64_t const partials = tx < kWarp ? (static_cast<int64_t>(tx) * ty) / kWarp : ty;
    return static_cast<size_t>((partials + 1) * tx * vec) * sizeof(float);
}

// Bytes of the staged tile of the colsSmem kernel (16-byte vectors).
inline int64_t colsSmemTileBytes(int64_t reduced, int32_t tx) { return reduced * tx * 16; }

constexpr int64_t kMaxSmemPerBlock = 227 * 1024;

inline int64_t maxPerThread(int32_t) { return kMaxPerThread; }

// The colsSmem plan: 16-byte vectors, tiles of tx * 16-byte rows (tx <= 8, at most ~64 KB so that 3 or more
// blocks share an SM), 256 threads. Returns false when the tile would not fit in shared memory.
template <typename T>
bool planColumnsSmem(void const* x, void const* y, int64_t outer, int64_t reduced, int64_t inner, Plan& p) {
    constexpr int32_t kVec16 = static_cast<int32_t>(16 / sizeof(T));
    if (!aligned16(x) || !aligned16(y) || inner % kVec16 != 0) return false;
    int64_t const colVecsP2 = pow2Ceil(inner / kVec16);
    int64_t tx = std::min<int64_t>(8, colVecsP2);
    while (tx > 2 && colsSmemTileBytes(reduced, static_cast<int32_t>(tx)) > 64 * 1024) tx /= 2;
    int64_t const ty = std::max<int64_t>(kWarp / tx, std::min<int64_t>(256 / tx, pow2Ceil(reduced)));
    p = Plan{};
    p.kind = Kind::kColsSmem;
    p.vec = kVec16;
    p.perThread = 1;
    p.tx = static_cast<int32_t>(tx);
    p.ty = static_cast<int32_t>(ty);
    p.grid = std::min<int64_t>(outer * ceilDiv(inner, tx * kVec16), kMaxGrid);
    p.smemBytes = colsSmemBytes(p.tx, p.ty, p.vec);
    return colsSmemTileBytes(reduced, p.tx) + static_cast<int64_t>(p.smemBytes) <= kMaxSmemPerBlock;
}

template <typename T>
Plan planColumns(void const* x, void const* y, int64_t outer, int64_t reduced, int64_t inner, Tuning const& tune) {
    Plan p{};
    if (inner > 1 && planColumnsSmem<T>(x, y, outer, reduced, inner, p)) return p;
    p = Plan{};
    int64_t const elem = static_cast<int64_t>(sizeof(T));
    int32_t const vec16 = static_cast<int32_t>(16 / elem);
    p.vec = (aligned16(x) && aligned16(y) && inner % vec16 == 0) ? vec16 : 1;
    int64_t const maxR = maxPerThread(p.vec);
    int64_t const maxThreads = std::min<int64_t>(tune.maxThreads, kMaxCachedThreads);
    int64_t const colVecs = ceilDiv(inner, p.vec);
    int64_t const colVecsP2 = std::min<int64_t>(pow2Ceil(colVecs), 1024 / p.vec);
    int64_t tx = std::max<int64_t>(1, std::min<int64_t>(colVecsP2, tune.rowBytes / (p.vec * elem)));
    int64_t ty = std::min<int64_t>(pow2Ceil(ceilDiv(reduced, tune.rowsPerThread)), std::max<int64_t>(1, maxThreads / tx));
    int64_t r = pow2Ceil(ceilDiv(reduced, ty));
    // too many rows for the registers: more threads along reduced, then narrower tiles (down to 32-byte rows)
    while (r > maxR) {
        ty = std::min<int64_t>(pow2Ceil(ceilDiv(reduced, maxR)), std::max<int64_t>(1, kMaxCachedThreads / tx));
        r = pow2Ceil(ceilDiv(reduced, ty));
        if (r <= maxR || tx == 1 || tx * p.vec * elem <= 32) break;
        tx /= 2;
    }
    if (r > maxR) {
        p.kind = Kind::kColsTwoPass;
        tx = std::max<int64_t>(1, std::min<int64_t>(colVecsP2, tune.rowBytes / (p.vec * elem)));
        ty = std::max<int64_t>(1, maxThreads / tx);
    } else {
        p.kind = Kind::kColsCached;
        while (tx * ty < tune.minThreads && tx < colVecsP2 && tx * ty * 2 <= kMaxCachedThreads) tx *= 2;
    }
    if (tx * ty < kWarp) ty = kWarp / tx;  // whole warps: the reductions shuffle across full warps
    r = p.kind == Kind::kColsCached ? pow2Ceil(ceilDiv(reduced, ty)) : 1;
    p.tx = static_cast<int32_t>(tx);
    p.ty = static_cast<int32_t>(ty);
    p.perThread = static_cast<int32_t>(r);
    p.grid = std::min<int64_t>(outer * ceilDiv(inner, tx * p.vec), kMaxGrid);
    p.smemBytes = colsSmemBytes(p.tx, p.ty, p.vec);
    return p;
}

template <typename T>
Plan makePlan(void const* x, void const* y, int64_t outer, int64_t reduced, int64_t inner, Tuning const& tune) {
    if (inner != 1) return planColumns<T>(x, y, outer, reduced, inner, tune);
    int32_t const vec16 = static_cast<int32_t>(16 / sizeof(T));
    int32_t const vec = (aligned16(x) && aligned16(y) && reduced % vec16 == 0) ? vec16 : 1;
    int64_t const vecs = ceilDiv(reduced, vec);
    int64_t const maxNv = maxPerThread(vec);
    if (vecs > kWarp * maxNv) {
        // long rows: a block per row (the column kernels with inner == 1)
        return planColumns<T>(x, y, outer, reduced, inner, tune);
    }
    Plan p{};
    p.kind = Kind::kRows;
    p.vec = vec;
    int64_t const perLane = std::max<int64_t>(1, std::min<int64_t>(tune.rowsVecPerLane, maxNv));
    int64_t const lanes = std::min<int64_t>(kWarp, pow2Ceil(ceilDiv(vecs, perLane)));
    p.tx = static_cast<int32_t>(lanes);
    p.perThread = static_cast<int32_t>(pow2Ceil(ceilDiv(vecs, lanes)));
    int32_t const threads = std::min<int32_t>(kMaxCachedThreads, std::max<int32_t>(kWarp, tune.rowsThreads));
    p.ty = threads / p.tx;
    p.grid = std::min<int64_t>(ceilDiv(outer, p.ty), kMaxGrid);
    p.smemBytes = 0;
    return p;
}

template <typename T, int VEC, int PT>
cudaError_t launchFixed(Plan const& p, T const* x, T* y, int64_t outer, int64_t reduced, int64_t inner, float eps,
                        cudaStream_t stream) {
    dim3 const grid(static_cast<unsigned>(p.grid));
    if (p.kind == Kind::kRows) {
        dim3 const block(static_cast<unsigned>(p.tx * p.ty));
        l2normRowsKernel<T, VEC, PT><<<grid, block, 0, stream>>>(x, y, outer, reduced, p.tx, eps);
    } else {
        dim3 const block(static_cast<unsigned>(p.tx), static_cast<unsigned>(p.ty));
        int64_t const tilesPerOuter = ceilDiv(inner, static_cast<int64_t>(p.tx) * VEC);
        if (p.kind == Kind::kColsCached) {
            l2normColsCachedKernel<T, VEC, PT>
                <<<grid, block, p.smemBytes, stream>>>(x, y, outer, reduced, inner, tilesPerOuter, eps);
        } else if (p.kind == Kind::kColsSmem) {
            if constexpr (sizeof(T) * VEC == 16) {
                auto* const kernel = l2normColsSmemKernel<T, VEC>;
                int64_t const tileBytes = colsSmemTileBytes(reduced, p.tx);
                size_t const smem = static_cast<size_t>(tileBytes) + p.smemBytes;
                if (smem > 48 * 1024) {
                    cudaError_t const status =
                        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
                    if (status != cudaSuccess) return status;
                }
                kernel<<<grid, block, smem, stream>>>(x, y, outer, reduced, inner, tilesPerOuter, eps, tileBytes);
            } else {
                return cudaErrorInvalidValue;
            }
        } else {
            l2normColsTwoPassKernel<T, VEC>
                <<<grid, block, p.smemBytes, stream>>>(x, y, outer, reduced, inner, tilesPerOuter, eps);
        }
    }
    return cudaGetLastError();
}

template <typename T, int VEC>
cudaError_t launchVec(Plan const& p, T const* x, T* y, int64_t outer, int64_t reduced, int64_t inner, float eps,
                      cudaStream_t stream) {
    if (p.kind == Kind::kColsTwoPass || p.kind == Kind::kColsSmem) {
        return launchFixed<T, VEC, 1>(p, x, y, outer, reduced, inner, eps, stream);
    }
    switch (p.perThread) {
        case 1: return launchFixed<T, VEC, 1>(p, x, y, outer, reduced, inner, eps, stream);
        case 2: return launchFixed<T, VEC, 2>(p, x, y, outer, reduced, inner, eps, stream);
        case 4: return launchFixed<T, VEC, 4>(p, x, y, outer, reduced, inner, eps, stream);
        case 8: return launchFixed<T, VEC, 8>(p, x, y, outer, reduced, inner, eps, stream);
        case 16: return launchFixed<T, VEC, 16>(p, x, y, outer, reduced, inner, eps, stream);
        default: return cudaErrorInvalidValue;
    }
}

// Checks a plan against the kernels' assumptions; false means "do not launch".
inline bool planIsValid(Plan const& p, int32_t vec16, int64_t reduced, int64_t inner, void const* x, void const* y) {
    auto const pow2 = [](int64_t v) { return v > 0 && (v & (v - 1)) == 0; };
    if (p.grid < 1 || p.grid > kMaxGrid || !pow2(p.tx) || p.ty < 1) return false;
    if (p.kind == Kind::kColsSmem) {
        int64_t const threads = static_cast<int64_t>(p.tx) * p.ty;
        return p.vec == vec16 && inner % p.vec == 0 && threads % kWarp == 0 && threads <= kMaxCachedThreads &&
               p.smemBytes == colsSmemBytes(p.tx, p.ty, p.vec) &&
               colsSmemTileBytes(reduced, p.tx) + static_cast<int64_t>(p.smemBytes) <= kMaxSmemPerBlock;
    }
    if (p.kind != Kind::kColsTwoPass && (!pow2(p.perThread) || p.perThread > maxPerThread(p.vec))) return false;
    if (p.vec != 1 && (p.vec != vec16 || !aligned16(x) || !aligned16(y))) return false;
    if (p.kind == Kind::kRows) {
        int64_t const threads = static_cast<int64_t>(p.tx) * p.ty;
        return p.tx <= kWarp && threads % kWarp == 0 && threads <= kMaxCachedThreads && reduced % p.vec == 0 &&
               static_cast<int64_t>(p.perThread) * p.tx * p.vec >= reduced;
    }
    int64_t const threads = static_cast<int64_t>(p.tx) * p.ty;
    if (threads % kWarp != 0 || threads > 1024 || !pow2(p.ty) || inner % p.vec != 0) return false;
    if (p.smemBytes != colsSmemBytes(p.tx, p.ty, p.vec) || p.smemBytes > 48 * 1024) return false;
    if (p.kind == Kind::kColsCached) {
        return threads <= kMaxCachedThreads && static_cast<int64_t>(p.perThread) * p.ty >= reduced;
    }
    return p.kind == Kind::kColsTwoPass;
}

template <typename T>
cudaError_t launchPlan(Plan const& p, void const* x, void* y, int64_t outer, int64_t reduced, int64_t inner, float eps,
                       cudaStream_t stream) {
    constexpr int kVec16 = static_cast<int>(16 / sizeof(T));
    if (!planIsValid(p, kVec16, reduced, inner, x, y)) return cudaErrorInvalidValue;
    T const* xt = static_cast<T const*>(x);
    T* yt = static_cast<T*>(y);
    if (p.vec == 1) return launchVec<T, 1>(p, xt, yt, outer, reduced, inner, eps, stream);
    return launchVec<T, kVec16>(p, xt, yt, outer, reduced, inner, eps, stream);
}

// Size and pointer checks shared by every launcher; cudaSuccess with `empty` set means nothing to do.
inline cudaError_t checkArgs(void const* x, void const* y, int64_t outer, int64_t reduced, int64_t inner, bool& empty) {
    empty = false;
    if (outer < 0 || reduced < 1 || inner < 0) return cudaErrorInvalidValue;
    if (outer == 0 || inner == 0) {
        empty = true;
        return cudaSuccess;
    }
    int64_t total = 0;
    if (__builtin_mul_overflow(outer, reduced, &total) || __builtin_mul_overflow(total, inner, &total)) {
        return cudaErrorInvalidValue;
    }
    // byte offsets must fit too (16-byte elements at most is far beyond any tensor; 8 is enough for our types)
    if (total > INT64_MAX / 8) return cudaErrorInvalidValue;
    if (x == nullptr || y == nullptr) return cudaErrorInvalidValue;
    return cudaSuccess;
}

template <typename T>
int32_t l2norm(void const* x, void* y, int64_t outer, int64_t reduced, int64_t inner, float eps,
               cudaStream_t stream) noexcept {
    bool empty = false;
    cudaError_t status = checkArgs(x, y, outer, reduced, inner, empty);
    if (status != cudaSuccess || empty) return static_cast<int32_t>(status);
    Plan const plan = makePlan<T>(x, y, outer, reduced, inner, Tuning{});
    status = launchPlan<T>(plan, x, y, outer, reduced, inner, eps, stream);
    return static_cast<int32_t>(status);
}

}  // namespace l2norm_detail
}  // namespace torchtrt_ext

extern "C" {

TORCHTRT_EXT_API int32_t torchtrt_ext_l2norm_f32(void const* x, void* y, int64_t outer, int64_t reduced, int64_t inner,
                                                 float eps, cudaStream_t stream) {
    return torchtrt_ext::l2norm_detail::l2norm<float>(x, y, outer, reduced, inner, eps, stream);
}

TORCHTRT_EXT_API int32_t torchtrt_ext_l2norm_f16(void const* x, void* y, int64_t outer, int64_t reduced, int64_t inner,
                                                 float eps, cudaStream_t stream) {
    return torchtrt_ext::l2norm_detail::l2norm<__half>(x, y, outer, reduced, inner, eps, stream);
}

TORCHTRT_EXT_API int32_t torchtrt_ext_l2norm_bf16(void const* x, void* y, int64_t outer, int64_t reduced, int64_t inner,
                                                  float eps, cudaStream_t stream) {
    return torchtrt_ext::l2norm_detail::l2norm<__nv_bfloat16>(x, y, outer, reduced, inner, eps, stream);
}

}  // extern "C"
