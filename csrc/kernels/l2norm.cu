// L2Norm kernels behind the extern "C" launchers of l2norm.h.
//
// Seven kernels; one plan chooses among them from the [outer, reduced, inner] view and the device (SM count, shared
// memory per block):
//   * rows_exact   inner == 1, aligned rows of exactly lanes x 16 elements (every power-of-two length from 16 to
//                  8192): the rows layout below with the lane count a template argument, no loop, no bounds checks.
//   * rows         inner == 1 (last axis), any length and alignment: `lanes` threads own a row (16 elements per lane,
//                  up to 512 lanes; a row wider than a warp has its block to itself and its warps meet in shared
//                  memory), hold it in registers with 16-byte loads, reduce, scale and store: one read, one write.
//   * cols_pipe    inner > 1, 512 < reduced <= 1024, 16-byte aligned: a persistent block holds tile k [reduced, 64 B]
//                  in registers while tile k + 1 lands in shared memory by cp.async, two blocks per SM, so HBM always
//                  has a tile in flight. One read, one write.
//   * cols_smem    inner > 1, 16-byte aligned: a block owns a tile [reduced, tx * VEC] of one outer slice, staged in
//                  shared memory by cp.async (no registers held while loading), so 3-6 blocks per SM overlap their
//                  load / reduce / store phases; partial sums meet in shared memory. Used while the tile fits in
//                  shared memory (reduced up to ~7000 on an H200).
//   * cols_small   inner > 1, reduced <= 512, 16-byte aligned, one wave of blocks (where staging latency shows): a
//                  block (8 x 32 threads, fixed at compile time) holds the tile [reduced, 128 B] in registers, R rows
//                  of 16 bytes per thread; a 2D grid (tile, outer slice), no loop, no division, 32-bit offsets.
//   * cols_cached  the same tile, any block shape, in a grid-stride loop: unaligned data (VEC = 1), long rows
//                  (inner == 1), tiles too tall for shared memory, and small tensors with rows of the slice under 5
//                  vectors.
//   * cols_twopass the fallback for any reduced: the same tile, read once for the sums of squares and once more
//                  to scale (the second read mostly hits L2 while the tile is small).
// Measurements behind these choices, and the designs tried and dropped: bench/README.md (L2Norm kernels).
// x and y are not __restrict__: the launchers accept x == y (in place), and the plain global loads that follow were
// measured on an H200 no slower (0.5-1% faster on the rows kernel) than the read-only path __restrict__ selects.
// All arithmetic is FP32; data are float, __half or __nv_bfloat16.
#include "kernels/l2norm.h"
#include "kernels/numeric.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace torchtrt_ext {
namespace l2norm_detail {

constexpr int kWarp = 32;
constexpr int kMaxPerThread = 16;       // registers cache at most 16 vectors (256 bytes) per thread
constexpr int kMaxCachedThreads = 512;  // __launch_bounds__ of the register-caching kernels: <= 128 registers
constexpr int kPipeThreads = 256;       // colsPipe block: 4 x 64 threads, two blocks per SM
constexpr int kPipeRows = 16;           // colsPipe rows per thread (R): reduced <= 16 * 64
constexpr int kRowElemsPerLane = 16;    // rows: a lane holds 16 elements (4 fp32 or 2 fp16 vectors)
constexpr int kRowsBlockThreads = 128;  // rows: block size while a row is at most a warp wide
constexpr int kSmallTx = 8;             // colsSmall block: 8 threads of 16 bytes along inner (128-byte tile rows)
constexpr int kSmallTy = 32;            // colsSmall block: 32 threads along reduced, up to 16 rows each

// Threads of a rows block: rows of at most a warp share 128-thread blocks, a wider row has its block to itself.
__host__ __device__ constexpr int rowsBlockThreads(int lanes) { return lanes <= kWarp ? kRowsBlockThreads : lanes; }

constexpr int64_t kMaxGrid = 0x7fffffff;
constexpr int64_t kMaxGridY = 65535;

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
    if constexpr (std::is_same_v<T, __nv_bfloat16> && VEC % 2 == 0) {
        // two elements per conversion into one 32-bit register: element-wise __float2bfloat16_rn goes through 16-bit
        // registers, and the compiler then spills the packs the register-caching kernels hold
#pragma unroll
        for (int j = 0; j < VEC; j += 2) {
            __nv_bfloat162 const two =
                __floats2bfloat162_rn(elementF32(in, j) * inv[j], elementF32(in, j + 1) * inv[j + 1]);
            __builtin_memcpy(&out.v[j], &two, sizeof(two));
        }
    } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) out.v[j] = fromF32<T>(elementF32(in, j) * inv[j]);
    }
    return out;
}

// One 16-byte store kept in program order by the asm (on an H200 1-3% faster than the compiler's own schedule of
// the same st.global.v4, measured on every case of bench/kernels.py); other packs are plain stores.
template <typename T, int VEC>
__device__ __forceinline__ void storePack(T* p, Pack<T, VEC> const& v) {
    if constexpr (sizeof(T) * VEC == 16) {
        uint32_t w[4];
        __builtin_memcpy(w, &v, sizeof(w));
        asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(__cvta_generic_to_global(p)), "r"(w[0]),
                     "r"(w[1]), "r"(w[2]), "r"(w[3])
                     : "memory");
    } else {
        *reinterpret_cast<Pack<T, VEC>*>(p) = v;
    }
}

template <typename T, int VEC>
__device__ __forceinline__ void storeScaled(T* p, Pack<T, VEC> const& in, float const (&inv)[VEC]) {
    storePack<T, VEC>(p, scaled(in, inv));
}

// Adds the squares of a pack's elements to acc[j] (column j of the pack).
template <typename T, int VEC>
__device__ __forceinline__ void addSquares(Pack<T, VEC> const& v, float (&acc)[VEC]) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
        float const f = elementF32(v, j);
        acc[j] = fmaf(f, f, acc[j]);
    }
}

// acc[j] = the sum of squares of column j over R cached packs, which stay packed for the scaling (keepPacked).
template <typename T, int VEC, int R>
__device__ __forceinline__ void columnSquares(Pack<T, VEC> (&v)[R], float (&acc)[VEC]) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) acc[j] = 0.f;
#pragma unroll
    for (int r = 0; r < R; ++r) addSquares<T, VEC>(v[r], acc);
#pragma unroll
    for (int r = 0; r < R; ++r) keepPacked(v[r]);
}

// ---------------------------------------------------------------------------------------------------------------
// rows: inner == 1. A row belongs to `lanes` threads (a power of two <= kMaxCachedThreads); blockDim.x = lanes * rows
// per block, and a row wider than a warp is alone in its block.

// The sum of `ss` over the `lanes` threads of a row: shuffles within a warp; the warps of a row wider than a warp
// (alone in its block) meet in warpSums. A caller that reuses warpSums must synchronize before it writes again.
__device__ __forceinline__ float rowSum(float ss, int lanes, float* warpSums) {
    for (int m = min(lanes, kWarp) >> 1; m > 0; m >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, m);
    if (lanes > kWarp) {
        if ((threadIdx.x & (kWarp - 1)) == 0) warpSums[threadIdx.x / kWarp] = ss;
        __syncthreads();
        ss = 0.f;
        for (int w = 0; w < lanes / kWarp; ++w) ss += warpSums[w];
    }
    return ss;
}

template <typename T, int VEC, int NV>
__device__ __forceinline__ float sumSquares(Pack<T, VEC> const (&v)[NV]) {
    float ss = 0.f;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
            float const f = elementF32(v[k], j);
            ss = fmaf(f, f, ss);
        }
    }
    return ss;
}

// The general rows kernel: any row length, any alignment (VEC = 1 or 16 bytes), NV vectors per lane, a grid-stride
// loop over rows. Element e of a row lives in lane (e / VEC) % lanes, vector slot (e / VEC) / lanes: a group's loads
// are contiguous.
template <typename T, int VEC, int NV>
__global__ void __launch_bounds__(kMaxCachedThreads)
    l2normRowsKernel(T const* x, T* y, int64_t rows, int64_t reduced, int lanes, float eps) {
    __shared__ float warpSums[kMaxCachedThreads / kWarp];
    int const lane = static_cast<int>(threadIdx.x) & (lanes - 1);
    int const rowsPerBlock = static_cast<int>(blockDim.x) / lanes;
    int const sub = static_cast<int>(threadIdx.x) / lanes;
    // every thread of the block runs the same number of iterations: shuffles and barriers see the whole block
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * rowsPerBlock; base < rows;
         base += static_cast<int64_t>(gridDim.x) * rowsPerBlock) {
        int64_t const row = base + sub;
        bool const rowOk = row < rows;
        T const* xr = x + (rowOk ? row : 0) * reduced;
        Pack<T, VEC> v[NV];
#pragma unroll
        for (int k = 0; k < NV; ++k) {
            int64_t const e = (static_cast<int64_t>(k) * lanes + lane) * VEC;
            if (rowOk && e < reduced) {
                v[k] = loadPack<T, VEC>(xr + e);
            } else {
                zeroPack(v[k]);
            }
        }
        float ss = sumSquares(v);
#pragma unroll
        for (int k = 0; k < NV; ++k) keepPacked(v[k]);
        ss = rowSum(ss, lanes, warpSums);
        if (lanes > kWarp) __syncthreads();  // warpSums is rewritten by the next row
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

// The rows kernel for rows of exactly LANES * 16 elements in 16-byte vectors (every power-of-two length from 16 to
// 8192, aligned): the lane count is a constant, so a lane's loads are one address plus constant offsets, and there is
// no loop (the grid covers the rows) and no bounds check. Measured on an H200 at 8x4096x1024 (64 lanes): 32 registers
// where the general kernel takes 40, 0.4-0.8% faster, level with torch.compile's Triton kernel when both write the
// same buffer.
template <typename T, int LANES>
__global__ void __launch_bounds__(rowsBlockThreads(LANES))
    l2normRowsExactKernel(T const* x, T* y, int64_t rows, float eps) {
    constexpr int kVec = static_cast<int>(16 / sizeof(T));
    constexpr int kNv = kRowElemsPerLane / kVec;
    constexpr int64_t kLength = static_cast<int64_t>(LANES) * kRowElemsPerLane;
    __shared__ float warpSums[LANES > kWarp ? LANES / kWarp : 1];
    int const lane = static_cast<int>(threadIdx.x) % LANES;
    int64_t row = static_cast<int64_t>(blockIdx.x) * (rowsBlockThreads(LANES) / LANES) + threadIdx.x / LANES;
    bool const rowOk = row < rows;
    if (!rowOk) row = rows - 1;  // spare rows of the last block recompute the last row (whole warps shuffle), store nothing
    T const* xr = x + row * kLength + lane * kVec;
    Pack<T, kVec> v[kNv];
#pragma unroll
    for (int k = 0; k < kNv; ++k) v[k] = loadPack<T, kVec>(xr + k * LANES * kVec);
    float const ss = rowSum(sumSquares(v), LANES, warpSums);
    float inv[kVec];
    float const s = invNorm(ss, eps);
#pragma unroll
    for (int j = 0; j < kVec; ++j) inv[j] = s;
    if (!rowOk) return;
    T* yr = y + row * kLength + lane * kVec;
#pragma unroll
    for (int k = 0; k < kNv; ++k) storeScaled<T, kVec>(yr + k * LANES * kVec, v[k], inv);
}

// ---------------------------------------------------------------------------------------------------------------
// Column tiles: block (tx, ty) owns columns [tile * tx * VEC, +tx * VEC) of one outer slice; thread (tx, ty) owns
// VEC adjacent columns and the rows ty, ty + blockDim.y, ...

// Sums acc[VEC] (this thread's partial sums of squares of its VEC columns) over the block's ty and returns
// inv[VEC] = 1 / max(sqrt(total), eps). smem: (partials + 1) * tx * VEC floats (see colsSmemBytes). `another`: the
// block goes on to another tile, which rewrites smem (a block's last tile skips that barrier). BX, BY: the block's
// shape when the kernel fixes it at compile time (the loops then unroll), 0 for blockDim.
template <int VEC, int BX = 0, int BY = 0>
__device__ __forceinline__ void columnInvNorm(float (&acc)[VEC], float (&inv)[VEC], float eps, float* smem,
                                              bool another) {
    int const tx = static_cast<int>(threadIdx.x);
    int const ty = static_cast<int>(threadIdx.y);
    int const bx = BX > 0 ? BX : static_cast<int>(blockDim.x);
    int const nthreads = bx * (BY > 0 ? BY : static_cast<int>(blockDim.y));
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
        partials = BY > 0 ? BY : static_cast<int>(blockDim.y);
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
    if (another) __syncthreads();  // smem is reused by the next tile
}

// Where a thread's column of tile t starts: tile t covers columns [k * tileCols, (k + 1) * tileCols) of outer slice
// t / tilesPerOuter (k = t % tilesPerOuter); `ok` is false for a column past inner (offset then points at column 0).
struct TileColumn {
    int64_t offset;
    bool ok;
};

__device__ __forceinline__ TileColumn tileColumn(int64_t t, int64_t tilesPerOuter, int64_t tileCols, int64_t lane,
                                                 int64_t reduced, int64_t inner) {
    int64_t const o = t / tilesPerOuter;
    int64_t const col = (t - o * tilesPerOuter) * tileCols + lane;
    bool const ok = col < inner;
    return TileColumn{o * reduced * inner + (ok ? col : 0), ok};
}

// Rows ty, ty + by, ... (R of them) of this thread's column, which starts at xo, into v: zeros past `reduced` and for
// a column past inner (!colOk). I: the index type of the offsets.
template <typename T, int VEC, int R, typename I>
__device__ __forceinline__ void loadColumn(T const* xo, int ty, int by, I reduced, I inner, bool colOk,
                                           Pack<T, VEC> (&v)[R]) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
        I const c = static_cast<I>(r) * by + ty;
        if (colOk && c < reduced) {
            v[r] = loadPack<T, VEC>(xo + c * inner);
        } else {
            zeroPack(v[r]);
        }
    }
}

// The rows loadColumn read, scaled by inv, stored to the column that starts at yo.
template <typename T, int VEC, int R, typename I>
__device__ __forceinline__ void storeColumn(T* yo, int ty, int by, I reduced, I inner, bool colOk,
                                            Pack<T, VEC> const (&v)[R], float const (&inv)[VEC]) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
        I const c = static_cast<I>(r) * by + ty;
        if (colOk && c < reduced) storeScaled<T, VEC>(yo + c * inner, v[r], inv);
    }
}

template <typename T, int VEC, int R>
__global__ void __launch_bounds__(kMaxCachedThreads)
    l2normColsCachedKernel(T const* x, T* y, int64_t outer, int64_t reduced, int64_t inner,
                           int64_t tilesPerOuter, float eps) {
    extern __shared__ float smem[];
    int const ty = static_cast<int>(threadIdx.y);
    int const by = static_cast<int>(blockDim.y);
    int64_t const tileCols = static_cast<int64_t>(blockDim.x) * VEC;
    int64_t const tiles = outer * tilesPerOuter;
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        auto const [offset, colOk] =
            tileColumn(t, tilesPerOuter, tileCols, static_cast<int64_t>(threadIdx.x) * VEC, reduced, inner);
        Pack<T, VEC> v[R];
        loadColumn(x + offset, ty, by, reduced, inner, colOk, v);
        float acc[VEC];
        columnSquares(v, acc);
        float inv[VEC];
        columnInvNorm<VEC>(acc, inv, eps, smem, t + gridDim.x < tiles);
        storeColumn(y + offset, ty, by, reduced, inner, colOk, v, inv);
    }
}

// colsSmall: colsCached for tensors of one wave of blocks, with nothing computed before the first load that the
// launch can fix: the block is kSmallTx x kSmallTy at compile time, the grid is (tile of the outer slice, outer
// slice), so there is no loop and no division, and offsets are 32-bit (the plan checks that they fit). Measured on an
// H200 against colsCached with the same tiling (.exp harness, 3 rounds of 400 runs): 1x64x80x80 6.05 vs 6.40 us fp32,
// 5.76 vs 6.14 fp16; 1x512x16x16 fp16 7.17 vs 11.65. colsCached's 64-bit tile division and loop bookkeeping came
// before its first load, and it took 62 registers to this kernel's 32 (fp32, R = 2).
template <typename T, int R>
__global__ void __launch_bounds__(kSmallTx * kSmallTy)
    l2normColsSmallKernel(T const* x, T* y, int32_t reduced, int32_t inner, float eps) {
    constexpr int kVec = static_cast<int>(16 / sizeof(T));
    extern __shared__ float smem[];
    int32_t const col = static_cast<int32_t>(blockIdx.x * kSmallTx + threadIdx.x) * kVec;
    bool const colOk = col < inner;
    int32_t const offset = static_cast<int32_t>(blockIdx.y) * reduced * inner + (colOk ? col : 0);
    int const ty = static_cast<int>(threadIdx.y);
    Pack<T, kVec> v[R];
    loadColumn(x + offset, ty, kSmallTy, reduced, inner, colOk, v);
    float acc[kVec];
    columnSquares(v, acc);
    float inv[kVec];
    columnInvNorm<kVec, kSmallTx, kSmallTy>(acc, inv, eps, smem, false);
    storeColumn(y + offset, ty, kSmallTy, reduced, inner, colOk, v, inv);
}

// 16 bytes global -> shared without passing through registers (cp.async, sm_80+; a plain copy before that). The
// L2::256B prefetch hint pulls the neighbouring columns, which the next tiles read, into L2 in the same DRAM burst
// (1-3% on an H200 for 64-byte tile rows). The memory clobber keeps this thread's earlier reads of the same slot
// before the copy that overwrites it.
__device__ __forceinline__ void copyAsync16(void* dst, void const* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint32_t const d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
#else
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<uint4 const*>(src);
#endif
}

__device__ __forceinline__ void copyAsyncCommit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

__device__ __forceinline__ void copyAsyncWaitAll() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

// The shared memory of the staged column kernels (colsSmem, colsPipe) and this thread's place in it: the tile
// [reduced, blockDim.x * VEC] first (tileBytes, see colsSmemTileBytes), then the reduction scratch. Thread (tx, ty) owns
// the 16-byte slot tx * VEC of rows ty, ty + blockDim.y, ... and reads back only what it copied itself, so staging
// needs no block barrier.
template <typename T, int VEC>
struct StagedTile {
    static_assert(sizeof(T) * VEC == 16, "16-byte vectors only");
    T* tile;
    float* scratch;
    int64_t ty;
    int64_t by;
    int64_t cb;  // columns of the tile
    int64_t slot;

    __device__ StagedTile(unsigned char* smem, int64_t tileBytes)
        : tile(reinterpret_cast<T*>(smem)),
          scratch(reinterpret_cast<float*>(smem + tileBytes)),
          ty(threadIdx.y),
          by(blockDim.y),
          cb(static_cast<int64_t>(blockDim.x) * VEC),
          slot(static_cast<int64_t>(threadIdx.x) * VEC) {}

    // this thread's slot in row c
    __device__ T* at(int64_t c) const { return tile + c * cb + slot; }
};

// colsSmem: like colsCached, but the tile [reduced, tx * VEC] is staged in shared memory by cp.async instead of
// registers, so a block holds few registers and several blocks per SM overlap their load, reduce and store phases.
template <typename T, int VEC>
__global__ void __launch_bounds__(kMaxCachedThreads)
    l2normColsSmemKernel(T const* x, T* y, int64_t outer, int64_t reduced, int64_t inner,
                         int64_t tilesPerOuter, float eps, int64_t tileBytes) {
    extern __shared__ __align__(16) unsigned char smemRaw[];
    StagedTile<T, VEC> const st(smemRaw, tileBytes);
    int64_t const tiles = outer * tilesPerOuter;
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        auto const [offset, colOk] = tileColumn(t, tilesPerOuter, st.cb, st.slot, reduced, inner);
        T const* xo = x + offset;
        float acc[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc[j] = 0.f;
        if (colOk) {
            for (int64_t c = st.ty; c < reduced; c += st.by) copyAsync16(st.at(c), xo + c * inner);
            copyAsyncCommit();
            copyAsyncWaitAll();
            for (int64_t c = st.ty; c < reduced; c += st.by) addSquares<T, VEC>(loadPack<T, VEC>(st.at(c)), acc);
        }
        float inv[VEC];
        columnInvNorm<VEC>(acc, inv, eps, st.scratch, t + gridDim.x < tiles);
        if (colOk) {
            T* yo = y + offset;
            for (int64_t c = st.ty; c < reduced; c += st.by) {
                storeScaled<T, VEC>(yo + c * inner, loadPack<T, VEC>(st.at(c)), inv);
            }
        }
    }
}

// colsPipe: a persistent colsCached whose next tile already lands in shared memory (cp.async) while this one is
// reduced and stored from registers, so every block keeps a tile in flight. R rows of VEC columns per thread
// (R * blockDim.y >= reduced).
template <typename T, int VEC, int R>
__global__ void __launch_bounds__(kPipeThreads, 2)
    l2normColsPipeKernel(T const* x, T* y, int64_t outer, int64_t reduced, int64_t inner,
                         int64_t tilesPerOuter, float eps, int64_t tileBytes) {
    extern __shared__ __align__(16) unsigned char smemRaw[];
    StagedTile<T, VEC> const st(smemRaw, tileBytes);
    int64_t const ty = st.ty;
    int64_t const by = st.by;
    int64_t const tiles = outer * tilesPerOuter;
    // offset of this thread's first element in tile t; -1 past the last tile or past the last column
    auto offsetOf = [&](int64_t t) -> int64_t {
        if (t >= tiles) return -1;
        // tileColumn's arithmetic written out: through the helper the compiler turns this branch into a select, a
        // change not timed on the H200 (the other column kernels compile to the same PTX with the helper)
        int64_t const o = t / tilesPerOuter;
        int64_t const col = (t - o * tilesPerOuter) * st.cb + st.slot;
        return col < inner ? o * reduced * inner + col : -1;
    };
    auto stage = [&](int64_t offset) {
        if (offset >= 0) {
#pragma unroll
            for (int r = 0; r < R; ++r) {
                int64_t const c = r * by + ty;
                if (c < reduced) copyAsync16(st.at(c), x + offset + c * inner);
            }
        }
        copyAsyncCommit();
    };
    int64_t offset = offsetOf(blockIdx.x);
    stage(offset);
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        copyAsyncWaitAll();
        Pack<T, VEC> v[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            int64_t const c = r * by + ty;
            if (offset >= 0 && c < reduced) {
                v[r] = loadPack<T, VEC>(st.at(c));
            } else {
                zeroPack(v[r]);
            }
        }
        int64_t const next = offsetOf(t + gridDim.x);
        stage(next);
        float acc[VEC];
        columnSquares(v, acc);
        float inv[VEC];
        columnInvNorm<VEC>(acc, inv, eps, st.scratch, t + gridDim.x < tiles);
        if (offset >= 0) {
#pragma unroll
            for (int r = 0; r < R; ++r) {
                int64_t const c = r * by + ty;
                if (c < reduced) storeScaled<T, VEC>(y + offset + c * inner, v[r], inv);
            }
        }
        offset = next;
    }
}

template <typename T, int VEC>
__global__ void __launch_bounds__(1024) l2normColsTwoPassKernel(T const* x, T* y, int64_t outer, int64_t reduced,
                                        int64_t inner, int64_t tilesPerOuter, float eps) {
    extern __shared__ float smem[];
    constexpr int kUnroll = 4;
    int64_t const ty = threadIdx.y;
    int64_t const by = blockDim.y;
    int64_t const tileCols = static_cast<int64_t>(blockDim.x) * VEC;
    int64_t const tiles = outer * tilesPerOuter;
    for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        auto const [offset, colOk] =
            tileColumn(t, tilesPerOuter, tileCols, static_cast<int64_t>(threadIdx.x) * VEC, reduced, inner);
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
                for (int u = 0; u < kUnroll; ++u) addSquares<T, VEC>(v[u], acc);
            }
            for (; c < reduced; c += by) addSquares<T, VEC>(loadPack<T, VEC>(xo + c * inner), acc);
        }
        float inv[VEC];
        columnInvNorm<VEC>(acc, inv, eps, smem, t + gridDim.x < tiles);
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

enum class Kind : int32_t {
    kRows = 0,
    kColsCached = 1,
    kColsTwoPass = 2,
    kColsSmem = 3,
    kColsPipe = 4,
    kRowsExact = 5,
    kColsSmall = 6,
};

struct Plan {
    Kind kind;
    int32_t vec;        // elements per access: 1 or 16 / sizeof(T)
    int32_t perThread;  // rows, rowsExact: vectors per lane (NV); colsCached, colsSmall, colsPipe: rows per thread (R);
                        // others: 1
    int32_t tx;         // rows, rowsExact: lanes per row; cols: threads along inner (blockDim.x)
    int32_t ty;         // rows, rowsExact: rows per block; cols: threads along reduced (blockDim.y)
    int64_t grid;       // blocks (colsSmall: tiles per outer slice x outer, launched as a 2D grid)
    size_t smemBytes;   // cols: the reduction scratch (colsSmem and colsPipe add their staged tile at launch)
};

// What a plan needs to know of the device it runs on (the current device at launch).
struct Device {
    int64_t sms;
    int64_t maxSmemPerBlock;  // opt-in dynamic shared memory of one block
};

// Knobs of the colsCached / colsTwoPass heuristic (defaults chosen by measurement on an H200, see bench/kernels.py).
struct Tuning {
    int32_t rowBytes = 128;       // bytes of one channel row a cols block reads (tx * VEC * sizeof(T))
    int32_t rowsPerThread = 8;    // target R of the cols kernels
    int32_t minThreads = 256;     // cols blocks are widened along inner up to this many threads
    int32_t maxThreads = 512;     // cols blocks grow along reduced up to this many threads before R grows
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

// Bytes of the staged tile of the colsSmem and colsPipe kernels (16-byte vectors).
inline int64_t colsSmemTileBytes(int64_t reduced, int32_t tx) { return reduced * tx * 16; }

inline int64_t maxPerThread(int32_t) { return kMaxPerThread; }

// Columns of 16-byte vectors: x and y aligned and every row of the [reduced, inner] slice a whole number of vectors.
template <typename T>
bool vectorColumns(void const* x, void const* y, int64_t inner) {
    return aligned16(x) && aligned16(y) && inner % static_cast<int64_t>(16 / sizeof(T)) == 0;
}

// The plan for small tensors (one wave of 256-thread blocks, reduced <= 512): colsSmall, or colsCached with narrower
// tiles where a row of the slice is under 5 vectors. Loads straight into registers, no staging latency. Measured on
// an H200 at 1x64x80x80: 1.01-1.03x copy, colsSmem 1.04-1.07x (copy into the kernel's buffer, no spin before the
// runs); with the inputs and outputs of bench/kernels.py's slots, tx 8, ty 32 was the fastest of tx 4-32, ty 4-64 in
// fp32, fp16 and bf16.
template <typename T>
bool planColumnsSmall(void const* x, void const* y, int64_t outer, int64_t reduced, int64_t inner, Device const& dev,
                      Plan& p) {
    constexpr int32_t kVec16 = static_cast<int32_t>(16 / sizeof(T));
    constexpr int64_t kTy = kSmallTy;
    if (!vectorColumns<T>(x, y, inner) || reduced > kTy * kMaxPerThread) return false;
    int64_t const tx = std::min<int64_t>(kSmallTx, pow2Ceil(inner / kVec16));
    int64_t const tiles = outer * ceilDiv(inner, tx * kVec16);
    if (tiles > 4 * dev.sms) return false;
    p = Plan{};
    p.kind = tx == kSmallTx ? Kind::kColsSmall : Kind::kColsCached;
    p.vec = kVec16;
    p.tx = static_cast<int32_t>(tx);
    p.ty = static_cast<int32_t>(kTy);
    p.perThread = static_cast<int32_t>(pow2Ceil(ceilDiv(reduced, kTy)));
    p.grid = tiles;
    p.smemBytes = colsSmemBytes(p.tx, p.ty, p.vec);
    return true;
}

// The colsPipe plan (512 < reduced <= 1024): 64-byte tile rows (tx = 4), 64 threads along reduced, 16 rows per thread,
// a persistent grid of two blocks per SM. Measured on an H200 at 4x1024x64x64: 1.07x copy, where colsSmem (1024 tiles
// of 64 KB, three blocks per SM, no overlap inside a block) gave 1.18x.
template <typename T>
bool planColumnsPipe(void const* x, void const* y, int64_t outer, int64_t reduced, int64_t inner, Device const& dev,
                     Plan& p) {
    constexpr int32_t kVec16 = static_cast<int32_t>(16 / sizeof(T));
    constexpr int32_t kTx = 4;
    constexpr int32_t kTy = kPipeThreads / kTx;
    if (!vectorColumns<T>(x, y, inner) || reduced <= 512 || reduced > kPipeRows * kTy) return false;
    p = Plan{};
    p.kind = Kind::kColsPipe;
    p.vec = kVec16;
    p.perThread = kPipeRows;
    p.tx = kTx;
    p.ty = kTy;
    p.grid = std::min<int64_t>(outer * ceilDiv(inner, kTx * kVec16), 2 * dev.sms);
    p.smemBytes = colsSmemBytes(p.tx, p.ty, p.vec);
    return colsSmemTileBytes(reduced, p.tx) + static_cast<int64_t>(p.smemBytes) <= dev.maxSmemPerBlock;
}

// The colsSmem plan: 16-byte vectors, tiles of tx * 16-byte rows (tx <= 8, at most ~64 KB so that 3 or more
// blocks share an SM), 256 threads. Returns false when the tile would not fit in shared memory.
template <typename T>
bool planColumnsSmem(void const* x, void const* y, int64_t outer, int64_t reduced, int64_t inner, Device const& dev,
                     Plan& p) {
    constexpr int32_t kVec16 = static_cast<int32_t>(16 / sizeof(T));
    if (!vectorColumns<T>(x, y, inner)) return false;
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
    return colsSmemTileBytes(reduced, p.tx) + static_cast<int64_t>(p.smemBytes) <= dev.maxSmemPerBlock;
}

template <typename T>
Plan planColumns(void const* x, void const* y, int64_t outer, int64_t reduced, int64_t inner, Device const& dev,
                 Tuning const& tune) {
    Plan p{};
    if (inner > 1 && (planColumnsSmall<T>(x, y, outer, reduced, inner, dev, p) ||
                      planColumnsPipe<T>(x, y, outer, reduced, inner, dev, p) ||
                      planColumnsSmem<T>(x, y, outer, reduced, inner, dev, p))) {
        return p;
    }
    p = Plan{};
    int64_t const elem = static_cast<int64_t>(sizeof(T));
    int32_t const vec16 = static_cast<int32_t>(16 / elem);
    p.vec = vectorColumns<T>(x, y, inner) ? vec16 : 1;
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

// rows (inner == 1): 16 elements per lane, so a row of D elements gets D / 16 lanes (a power of two, at most 512);
// rows wider than a warp get a block each, narrower ones share 128-thread blocks. Measured on an H200 at 8x4096x1024:
// 64 lanes per row 1.00x copy in fp32 and fp16, where a warp per row (4 rows per block) gave 1.02-1.05x.
// Aligned rows of exactly lanes * 16 elements take rowsExact; rows longer than 512 lanes x 16 vectors go to the column
// kernels (a block per row).
template <typename T>
Plan makePlan(void const* x, void const* y, int64_t outer, int64_t reduced, int64_t inner, Device const& dev,
              Tuning const& tune) {
    if (inner != 1) return planColumns<T>(x, y, outer, reduced, inner, dev, tune);
    int32_t const vec16 = static_cast<int32_t>(16 / sizeof(T));
    int32_t const vec = (aligned16(x) && aligned16(y) && reduced % vec16 == 0) ? vec16 : 1;
    int64_t const vecs = ceilDiv(reduced, vec);
    int64_t const maxNv = maxPerThread(vec);
    if (vecs > kMaxCachedThreads * maxNv) return planColumns<T>(x, y, outer, reduced, inner, dev, tune);
    int64_t const perLane = std::max<int64_t>(1, kRowElemsPerLane / vec);
    int64_t const lanes = std::min<int64_t>(kMaxCachedThreads, pow2Ceil(ceilDiv(vecs, perLane)));
    int64_t const threads = rowsBlockThreads(static_cast<int>(lanes));
    Plan p{};
    p.kind = Kind::kRows;
    p.vec = vec;
    p.tx = static_cast<int32_t>(lanes);
    p.perThread = static_cast<int32_t>(pow2Ceil(ceilDiv(vecs, lanes)));
    p.ty = static_cast<int32_t>(threads / lanes);
    p.grid = ceilDiv(outer, p.ty);
    if (vec == vec16 && reduced == lanes * kRowElemsPerLane && p.grid <= kMaxGrid) {
        p.kind = Kind::kRowsExact;
    } else {
        p.grid = std::min<int64_t>(p.grid, kMaxGrid);
    }
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
        return cudaGetLastError();
    }
    dim3 const block(static_cast<unsigned>(p.tx), static_cast<unsigned>(p.ty));
    int64_t const tilesPerOuter = ceilDiv(inner, static_cast<int64_t>(p.tx) * VEC);
    if (p.kind == Kind::kColsSmall) {
        if constexpr (sizeof(T) * VEC == 16) {
            dim3 const tiles(static_cast<unsigned>(tilesPerOuter), static_cast<unsigned>(outer));
            l2normColsSmallKernel<T, PT><<<tiles, block, p.smemBytes, stream>>>(
                x, y, static_cast<int32_t>(reduced), static_cast<int32_t>(inner), eps);
        } else {
            return cudaErrorInvalidValue;
        }
    } else if (p.kind == Kind::kColsCached) {
        l2normColsCachedKernel<T, VEC, PT>
            <<<grid, block, p.smemBytes, stream>>>(x, y, outer, reduced, inner, tilesPerOuter, eps);
    } else if (p.kind == Kind::kColsTwoPass) {
        l2normColsTwoPassKernel<T, VEC>
            <<<grid, block, p.smemBytes, stream>>>(x, y, outer, reduced, inner, tilesPerOuter, eps);
    } else if constexpr (sizeof(T) * VEC == 16) {
        // colsSmem (PT == 1) and colsPipe (PT == kPipeRows): the staged tile first, then the reduction scratch
        auto* const kernel = p.kind == Kind::kColsSmem ? l2normColsSmemKernel<T, VEC> : l2normColsPipeKernel<T, VEC, kPipeRows>;
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
    return cudaGetLastError();
}

template <typename T, int LANES>
cudaError_t launchRowsExact(Plan const& p, T const* x, T* y, int64_t outer, float eps, cudaStream_t stream) {
    l2normRowsExactKernel<T, LANES><<<static_cast<unsigned>(p.grid), rowsBlockThreads(LANES), 0, stream>>>(x, y, outer, eps);
    return cudaGetLastError();
}

template <typename T>
cudaError_t launchRowsExactLanes(Plan const& p, T const* x, T* y, int64_t outer, float eps, cudaStream_t stream) {
    switch (p.tx) {
        case 1: return launchRowsExact<T, 1>(p, x, y, outer, eps, stream);
        case 2: return launchRowsExact<T, 2>(p, x, y, outer, eps, stream);
        case 4: return launchRowsExact<T, 4>(p, x, y, outer, eps, stream);
        case 8: return launchRowsExact<T, 8>(p, x, y, outer, eps, stream);
        case 16: return launchRowsExact<T, 16>(p, x, y, outer, eps, stream);
        case 32: return launchRowsExact<T, 32>(p, x, y, outer, eps, stream);
        case 64: return launchRowsExact<T, 64>(p, x, y, outer, eps, stream);
        case 128: return launchRowsExact<T, 128>(p, x, y, outer, eps, stream);
        case 256: return launchRowsExact<T, 256>(p, x, y, outer, eps, stream);
        case 512: return launchRowsExact<T, 512>(p, x, y, outer, eps, stream);
        default: return cudaErrorInvalidValue;
    }
}

template <typename T, int VEC>
cudaError_t launchVec(Plan const& p, T const* x, T* y, int64_t outer, int64_t reduced, int64_t inner, float eps,
                      cudaStream_t stream) {
    if (p.kind == Kind::kColsTwoPass || p.kind == Kind::kColsSmem || p.kind == Kind::kColsPipe) {
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
inline bool planIsValid(Plan const& p, int32_t vec16, int64_t outer, int64_t reduced, int64_t inner, void const* x,
                        void const* y, Device const& dev) {
    auto const pow2 = [](int64_t v) { return v > 0 && (v & (v - 1)) == 0; };
    if (p.grid < 1 || p.grid > kMaxGrid || !pow2(p.tx) || p.ty < 1) return false;
    int64_t const threads = static_cast<int64_t>(p.tx) * p.ty;
    if (p.kind == Kind::kRowsExact) {
        return inner == 1 && p.vec == vec16 && aligned16(x) && aligned16(y) && p.tx <= kMaxCachedThreads &&
               threads == rowsBlockThreads(p.tx) && reduced == static_cast<int64_t>(p.tx) * kRowElemsPerLane &&
               p.grid * p.ty >= outer;
    }
    if (p.kind == Kind::kColsSmall) {
        // a 2D grid of (tiles per outer slice, outer) and 32-bit offsets
        int64_t const tilesPerOuter = ceilDiv(inner, static_cast<int64_t>(kSmallTx) * vec16);
        return p.vec == vec16 && aligned16(x) && aligned16(y) && inner % p.vec == 0 && p.tx == kSmallTx &&
               p.ty == kSmallTy && pow2(p.perThread) && p.perThread <= kMaxPerThread &&
               static_cast<int64_t>(p.perThread) * p.ty >= reduced && p.grid == outer * tilesPerOuter &&
               outer <= kMaxGridY && outer * reduced * inner <= INT32_MAX &&
               p.smemBytes == colsSmemBytes(p.tx, p.ty, p.vec);
    }
    if (p.kind == Kind::kColsSmem || p.kind == Kind::kColsPipe) {
        bool const shape = p.kind == Kind::kColsSmem
                               ? p.perThread == 1 && threads <= kMaxCachedThreads
                               : p.perThread == kPipeRows && threads == kPipeThreads &&
                                     static_cast<int64_t>(p.perThread) * p.ty >= reduced;
        return shape && p.vec == vec16 && aligned16(x) && aligned16(y) && inner % p.vec == 0 &&
               threads % kWarp == 0 && p.smemBytes == colsSmemBytes(p.tx, p.ty, p.vec) &&
               colsSmemTileBytes(reduced, p.tx) + static_cast<int64_t>(p.smemBytes) <= dev.maxSmemPerBlock;
    }
    if (p.kind != Kind::kColsTwoPass && (!pow2(p.perThread) || p.perThread > maxPerThread(p.vec))) return false;
    if (p.vec != 1 && (p.vec != vec16 || !aligned16(x) || !aligned16(y))) return false;
    if (p.kind == Kind::kRows) {
        return p.tx <= kMaxCachedThreads && (p.tx <= kWarp || p.ty == 1) && threads % kWarp == 0 &&
               threads <= kMaxCachedThreads && reduced % p.vec == 0 &&
               static_cast<int64_t>(p.perThread) * p.tx * p.vec >= reduced;
    }
    if (threads % kWarp != 0 || threads > 1024 || !pow2(p.ty) || inner % p.vec != 0) return false;
    if (p.smemBytes != colsSmemBytes(p.tx, p.ty, p.vec) || p.smemBytes > 48 * 1024) return false;
    if (p.kind == Kind::kColsCached) {
        return threads <= kMaxCachedThreads && static_cast<int64_t>(p.perThread) * p.ty >= reduced;
    }
    return p.kind == Kind::kColsTwoPass;
}

template <typename T>
cudaError_t launchPlan(Plan const& p, void const* x, void* y, int64_t outer, int64_t reduced, int64_t inner, float eps,
                       Device const& dev, cudaStream_t stream) {
    constexpr int kVec16 = static_cast<int>(16 / sizeof(T));
    if (!planIsValid(p, kVec16, outer, reduced, inner, x, y, dev)) return cudaErrorInvalidValue;
    T const* xt = static_cast<T const*>(x);
    T* yt = static_cast<T*>(y);
    if (p.kind == Kind::kRowsExact) return launchRowsExactLanes<T>(p, xt, yt, outer, eps, stream);
    if (p.vec == 1) return launchVec<T, 1>(p, xt, yt, outer, reduced, inner, eps, stream);
    return launchVec<T, kVec16>(p, xt, yt, outer, reduced, inner, eps, stream);
}

// The current device's SM count and opt-in shared memory per block.
inline cudaError_t currentDevice(Device& dev) {
    int id = 0;
    int sms = 0;
    int smem = 0;
    cudaError_t status = cudaGetDevice(&id);
    if (status == cudaSuccess) status = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, id);
    if (status == cudaSuccess) status = cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, id);
    dev = Device{sms, smem};
    return status;
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
    Device dev{};
    status = currentDevice(dev);
    if (status != cudaSuccess) return static_cast<int32_t>(status);
    Plan const plan = makePlan<T>(x, y, outer, reduced, inner, dev, Tuning{});
    status = launchPlan<T>(plan, x, y, outer, reduced, inner, eps, dev, stream);
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
