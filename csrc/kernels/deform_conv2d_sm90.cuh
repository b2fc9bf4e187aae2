// DeformConv2d as one implicit GEMM on sm_90a (Hopper's wgmma): no column buffer. Included by deform_conv2d.cu after
// its sampling helpers (cornersOf) and cp.async wrappers; used where fusedFits() holds (fp16, bf16, and float32 as
// bf16 pairs).
//
// Per conv group g the op is D[oc][pixel] = sum_r A[oc][r] * B[pixel][r] with r = (tap k, channel c) in blocks of 64
// channels of one tap (reduction blocks in FusedParams::at's order): A is the weight, B the bilinear samples. A
// block computes kFusedBN pixels (of all images: a tile may span several) by 64 * WG output channels, one m64 tile per
// warpgroup. Per reduction block, a stage of shared memory holds A's tile (copied by cp.async from the weight that
// prepareFusedWeightKernel reorders once per call into the kernel's tiles, each one contiguous block) and B's tile,
// which the block's threads sample straight into shared memory: the corners of every (tap, pixel) of a chunk of taps
// are computed once into a table (cornersOf, the column-buffer sampler's rule), and each thread interpolates one
// 8-channel vector at a few pixels: four 16-byte corner reads (the 8 lanes of a pixel read one 128-byte line) and one
// 16-byte shared-memory store per pixel. The tensor cores run block kb's wgmma asynchronously while the warps store
// the samples of block kb + 1 and issue the corner reads of block kb + 2 (into registers, used after the next
// barrier): the sampling (CUDA cores, L1) and the products (tensor cores) overlap instead of meeting through a 151 MB
// buffer in DRAM, and the reads' latency overlaps the barrier and the wgmma issue instead of following them. With
// 16-byte table entries (FusedCorner) and 32-bit offsets the kernel went from 112.6 to 102.5 us at 8x256x64x64 fp16
// (bench/README.md, session 12).
//
// The bilinear sums are in the data type's packed arithmetic (HFMA2), where the column path sums in FP32: at
// 8x256x64x64 the relative error against float64 went from 2.5e-4 to 3.3e-4 (fp16) and 2.0e-3 to 2.6e-3 (bf16), within
// the tests' 2e-3 / 1e-2 and far below torchvision's 1.1e-2 (fp16); with the division-free block order, made at the
// same time, the kernel went from 175.5 to 147.6 us there (bench/README.md).
//
// Two kernels share that plan. fusedKernel (tiles of 256 output channels) has every thread sample and its warpgroup
// multiply, in lock step with block barriers. fusedWsKernel (tiles of 128 output channels) is warp-specialized: 2
// consumer warpgroups only wait and issue wgmma, 2 producer warpgroups sample (4 pixels a thread) and start each weight
// tile's bulk copy (cp.async.bulk), with 2 stages of shared memory between them handed over by mbarriers (full: the
// samples and the copy have landed; empty: every consumer warp's wgmma has read the stage), so the sampling of block
// kb + 1 runs while block kb multiplies, without a barrier of the whole block. At 4x128x100x76 fp16 the kernel went
// from 50.6 to 48.4 us (bench/README.md, session 15). The same design for 256-channel tiles was slower (113 against 104
// us at 8x256x64x64): its consumers hold 128 accumulators a thread, which leaves registers for 8 producer warps only,
// and those keep fewer corner reads in flight than the 16 warps of fusedKernel. With 4 consumer warpgroups of 64
// accumulators and 4 producer warps (640 threads, 96 registers a thread) it took 134 against 100 us (H100, session 23).
// The op transposed (pixels as M: 2 warpgroups of 64 pixels by all 256 channels, wgmma m64n256k16, 128 sums a
// thread) moves fewer bytes through shared memory and L1, yet with 8 warps it hides less latency: 108 against 105 us
// with the sample tile in shared memory, 111.6 against 103.7 with the samples as register A fragments (double-buffered,
// no wgmma serialization; session 14's version serialized) and the weight by bulk copies (H100, session 24).
//
// A block runs one tile (pixel tile, output-channel tile, conv group) at a time per multiprocessor, so a shape pays for
// whole waves of tiles. (A persistent fusedKernel whose pipeline ran through a block's tiles back to back took 125.8
// against 104.4 us at 8x256x64x64, and the same code one tile a block 125.9: its longer loop cost, the back-to-back
// tiles saved nothing; session 24.) Where the last wave would hold at most half a wave of tiles, those tiles are cut into pieces of
// consecutive reduction blocks (fusedSplit), a block each: the pieces write FP32 partial sums to the workspace and
// fusedFixupKernel adds them up in a fixed order with the bias. At 8x256x80x80 (400 tiles on 132 multiprocessors) the
// fourth wave of 4 tiles became 64 blocks of 2-3 reduction blocks.
//
// launchFused queues the weight reorder, then the transpose of an NCHW input and the fused kernel as programmatic
// dependent launches (startNext / waitPrevious in deform_conv2d.cu): the transpose runs beside the reorder (it reads
// only the input) and finishes after it, and the fused kernel's blocks start while the transpose's last wave runs,
// fill their first corner table (offsets and mask only) and wait for both before reading the input copy or the
// weight. The plugin path went from 126.4 to 123.4 us at 8x256x64x64 fp16 and from 66.3 to 62.1 at 4x128x100x76
// (session 14, bench/README.md).
//
// Shared-memory tiles are K-major with 128-byte swizzle, wgmma's canonical layout: a [rows][64] tile has rows of 128
// bytes, 16-byte chunk c of row r at r * 128 + ((c ^ (r % 8)) * 16) (swizzled()), 1024-byte aligned; descriptors
// with the 8-row groups 1024 bytes apart, a k16 step 32 bytes further. The swizzle is what lets the 8 lanes of a
// pixel (chunks 0..7 of one row) store without bank conflicts where their loads are one line.
#pragma once

#include "kernels/deform_conv2d_trace.cuh"

namespace torchtrt_ext {
namespace deform_conv2d_detail {

constexpr int kFusedBN = 128;       // pixels per block
constexpr int kFusedBK = 64;        // reduction steps (channels of one tap) per stage
constexpr int kFusedStages = 3;
constexpr int kFusedTableTaps = 9;  // taps per filling of the corner table

// A corner-table entry, read with one 16-byte shared-memory load: the element offset of the top-left corner in the
// channels-last image with the four corners' validity in its low 4 bits (offsets are multiples of the channel count, a
// multiple of kFusedBK, so those bits are free), and the four corner weights (mask folded in) rounded to T as pairs
// (w0, w1), (w2, w3), the form the packed sums take. Half of cornersOf's 32 bytes, and no conversions in the sampling.
template <typename T>
struct alignas(16) FusedCorner {
    int32_t base_flags;
    int32_t unused;
    T w[4];
};
static_assert(sizeof(FusedCorner<__half>) == 16 && sizeof(FusedCorner<__nv_bfloat16>) == 16, "one 16-byte load");

// The element type of the kernels' shared-memory tiles (wgmma operands): T, or bf16 pairs for float32.
template <typename T>
using FusedOperand = std::conditional_t<std::is_same_v<T, float>, __nv_bfloat16, T>;

// Sizes of a block of WG warpgroups, each one m64 tile of output channels (64 * WG channels).
template <int WG>
struct FusedTile {
    static constexpr int kThreads = 128 * WG;
    static constexpr int kBM = 64 * WG;
    static constexpr int kPixelsPerWarp = kFusedBN / (4 * WG);  // a warp samples them, 4 pixels a read
    static constexpr int kABytes = kBM * kFusedBK * 2;
    static constexpr int kBBytes = kFusedBN * kFusedBK * 2;
    static constexpr int kStageBytes = kABytes + kBBytes;
    static constexpr int kTableBytes = kFusedTableTaps * kFusedBN * 16;  // FusedCorner entries
    static constexpr int kSmemBytes = kFusedStages * kStageBytes + kTableBytes + 1024;  // + room to align to 1024
};

// A place in the order of the reduction blocks (FusedParams::at): tap k_local of tap chunk `chunk` (chunk_taps taps),
// channel block cb.
struct FusedCursor {
    int k_local, cb, chunk, chunk_taps;
    __host__ __device__ int tap() const { return chunk * kFusedTableTaps + k_local; }
};

struct FusedParams {
    int32_t height, width, channels, pixels, out_w, taps, offset_groups;
    int32_t per_group, per_offset_group, per_group_out, out_channels;
    int32_t cblocks;   // per_group / kFusedBK
    int32_t k_blocks;  // taps * cblocks
    int32_t m_tiles;   // output-channel tiles per conv group
    int32_t total;     // images * pixels
    int32_t pixel_tiles;  // (total + BN - 1) / BN, BN the kernel's pixels a tile (fusedBN)

    // The order of the reduction blocks: taps in chunks of kFusedTableTaps (one filling of the corner table), per
    // chunk every channel block, per channel block the chunk's taps. Consecutive blocks then read the same 64 channels
    // around the same pixels at the next tap, so the corner reads mostly hit L1, where tap-major blocks streamed
    // every channel of a tap through it first. Only the last chunk may hold fewer taps. Block kb's place:
    __host__ __device__ FusedCursor at(int kb) const {
        int const full = kFusedTableTaps * cblocks;
        int const chunk = kb / full, rest = kb - chunk * full;
        int const chunk_taps = min(kFusedTableTaps, taps - chunk * kFusedTableTaps);
        int const cb = rest / chunk_taps;
        return FusedCursor{rest - cb * chunk_taps, cb, chunk, chunk_taps};
    }
    // The block of tap k, channel block cb (at()'s inverse).
    __host__ __device__ int blockOf(int k, int cb) const {
        int const chunk = k / kFusedTableTaps;
        int const chunk_taps = min(kFusedTableTaps, taps - chunk * kFusedTableTaps);
        return chunk * kFusedTableTaps * cblocks + cb * chunk_taps + (k - chunk * kFusedTableTaps);
    }
    // The place of the block after c's, without divisions (the kernel walks its blocks in order).
    __host__ __device__ void advance(FusedCursor& c) const {
        if (++c.k_local < c.chunk_taps) return;
        c.k_local = 0;
        if (++c.cb < cblocks) return;
        c.cb = 0;
        ++c.chunk;
        c.chunk_taps = min(kFusedTableTaps, taps - c.chunk * kFusedTableTaps);
    }
};

// How the kernel's tiles (pixel tile, output-channel tile, conv group; `tiles` of them, one block per multiprocessor at
// a time) are cut when the last wave would be mostly idle: the first `whole` tiles take a block each, every reduction
// block; each tile after them (the tail) is cut into `pieces` ranges of reduction blocks, a block each, whose FP32
// partial sums fusedFixupKernel adds up. At 8x256x80x80 the 400 tiles on 132 multiprocessors took 4 waves, the
// fourth holding 4 tiles: now 3 waves and 4 x 16 short blocks.
struct FusedSplit {
    int64_t whole;
    int32_t pieces;  // 1: no tail
    __host__ __device__ int64_t blocks(int64_t tiles) const { return whole + (tiles - whole) * pieces; }
    // Reduction blocks [first, end) of piece p of k_blocks: balanced, none empty (pieces <= k_blocks).
    __host__ __device__ static int first(int p, int pieces, int k_blocks) {
        return static_cast<int>(int64_t{p} * k_blocks / pieces);
    }
};
constexpr int kFusedMinPieceBlocks = 2;  // reduction blocks a piece takes at least, besides its start (corner table,
                                         // pipeline fill)
constexpr int kFusedMaxPieces = 16;      // caps the partial sums a tail tile writes (and the fixup reads)

// The cut of `tiles` tiles over `sms` multiprocessors (one block each at a time) of k_blocks reduction blocks: the
// tail (the last wave's tiles) is cut into as many pieces as fill that wave (at least 2 reduction blocks each, at most
// kFusedMaxPieces), where that makes 2 pieces or more (a tail of at most half a wave); otherwise nothing is cut.
__host__ __device__ inline FusedSplit fusedSplit(int64_t tiles, int sms, int k_blocks) {
    int64_t const tail = tiles % sms;
    if (tail == 0) return FusedSplit{tiles, 1};
    int64_t pieces = sms / tail;
    if (pieces > k_blocks / kFusedMinPieceBlocks) pieces = k_blocks / kFusedMinPieceBlocks;
    if (pieces > kFusedMaxPieces) pieces = kFusedMaxPieces;
    return pieces < 2 ? FusedSplit{tiles, 1} : FusedSplit{tiles - tail, static_cast<int32_t>(pieces)};
}

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TORCHTRT_EXT_SM90A_ONLY(...) __VA_ARGS__
#else
#define TORCHTRT_EXT_SM90A_ONLY(...) __trap()
#endif

// Byte offset of 16-byte chunk `chunk` (8 channels) of row `row` in a [rows][64] tile of 16-bit elements, K-major with
// 128-byte swizzle: rows of 128 bytes, the chunk index XOR the row's place in its group of 8.
__host__ __device__ constexpr int swizzled(int row, int chunk) { return row * 128 + ((chunk ^ (row & 7)) << 4); }

// A shared-memory matrix descriptor of such a tile (1024-byte aligned): 128-byte swizzle (bits 62-63 = 1), the 8-row
// groups 1024 bytes apart (stride byte offset), the leading byte offset unused by swizzled K-major layouts. Only the
// low word depends on the address (bits 0-13: address / 16, below 256 KB): a tile `bytes` further is the low word plus
// bytes / 16, so the kernel keeps low words and adds offsets in 32 bits.
__device__ __forceinline__ uint32_t smemDescriptorLow(void const* p) {
    return ((static_cast<uint32_t>(__cvta_generic_to_shared(p)) & 0x3ffff) >> 4) | (uint32_t{1} << 16);
}
__device__ __forceinline__ uint64_t smemDescriptor(uint32_t low) {
    return low | (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

__device__ __forceinline__ void wgmmaFence() { TORCHTRT_EXT_SM90A_ONLY(asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory")); }
__device__ __forceinline__ void wgmmaCommit() {
    TORCHTRT_EXT_SM90A_ONLY(asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"));
}
template <int N>
__device__ __forceinline__ void wgmmaWait() {
    TORCHTRT_EXT_SM90A_ONLY(asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"));
}
// Keeps the compiler from moving accumulator registers across the asynchronous wgmma (it does not know they are
// written between the issue and the wait).
template <int N>
__device__ __forceinline__ void pinRegisters(float (&d)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define TORCHTRT_EXT_ACC4(b) "+f"(d[b]), "+f"(d[b + 1]), "+f"(d[b + 2]), "+f"(d[b + 3])
#define TORCHTRT_EXT_ACC16(b) TORCHTRT_EXT_ACC4(b), TORCHTRT_EXT_ACC4(b + 4), TORCHTRT_EXT_ACC4(b + 8), TORCHTRT_EXT_ACC4(b + 12)
#define TORCHTRT_EXT_WGMMA_M64N128K16(types)                                                                    \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                                  \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." types " "                                      \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                     \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "            \
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "            \
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "           \
                 "%64, %65, p, 1, 1, 0, 0;\n}\n"                                                                \
                 : TORCHTRT_EXT_ACC16(0), TORCHTRT_EXT_ACC16(16), TORCHTRT_EXT_ACC16(32), TORCHTRT_EXT_ACC16(48) \
                 : "l"(a), "l"(b), "r"(accumulate))

// d[64] = A (64 x 16, descriptor a) * B (16 x 128, descriptor b) (+ d when accumulate != 0), both K-major in shared
// memory; FP32 sums.
// Accumulator layout: thread (warp w of the warpgroup, lane = 4 * r + q) holds rows 16 * w + r (+ 8) and columns
// 8 * j + 2 * q (+ 1): d[4 * j + 2 * h + e] = D[16 * w + r + 8 * h][8 * j + 2 * q + e].
template <typename T>
__device__ __forceinline__ void wgmma64x128(float (&d)[64], uint64_t a, uint64_t b, int accumulate) {
    if constexpr (std::is_same_v<T, __half>) {
        TORCHTRT_EXT_SM90A_ONLY(TORCHTRT_EXT_WGMMA_M64N128K16("f16.f16"));
    } else {
        TORCHTRT_EXT_SM90A_ONLY(TORCHTRT_EXT_WGMMA_M64N128K16("bf16.bf16"));
    }
}
// The same for B of 16 x 64 into d[Off, Off + 32) (columns 8 * j + 2 * q (+ 1) for j < 8), bf16 operands.
template <int Off>
__device__ __forceinline__ void wgmma64x64Bf16(float (&d)[64], uint64_t a, uint64_t b, int accumulate) {
    TORCHTRT_EXT_SM90A_ONLY(asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                                         "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                                         "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                                         "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, "
                                         "%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                                         : TORCHTRT_EXT_ACC16(Off), TORCHTRT_EXT_ACC16(Off + 16)
                                         : "l"(a), "l"(b), "r"(accumulate)));
}
#undef TORCHTRT_EXT_WGMMA_M64N128K16
#undef TORCHTRT_EXT_ACC16
#undef TORCHTRT_EXT_ACC4

// The weight as the kernel reads it: per (group, output-channel tile, reduction block) one [BM][64] tile in
// core-matrix order, contiguous, rows beyond the group's output channels zero. A thread writes one 16-byte chunk (8
// channels of a row at one tap, gathered from the weight's [oc][c][tap] layout); consecutive threads take consecutive
// taps of the same channels, so a warp's 8 gathers each read a few contiguous runs of the weight (the tiles' order put
// a row's 8 chunks on consecutive threads: each gather touched about 36 lines). A float32 weight is stored as bf16
// pairs (splitBf16: hi + lo), each tile its hi tile followed by its lo tile. prep has `chunks` * 8 elements per part.
template <typename T, int BM>
__global__ void prepareFusedWeightKernel(T const* __restrict__ weight, FusedOperand<T>* __restrict__ prep,
                                         FusedParams const f, int64_t chunks) {
    startNext();  // the transpose (or the fused kernel) may start beside it: see launchFused
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < chunks;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        // i = (((tile row of (group, mt)) * cblocks + cb) * 8 + c8) * taps + k, k fastest
        int64_t rest = i / f.taps;
        int const k = static_cast<int>(i - rest * f.taps);
        int const c8 = static_cast<int>(rest % 8);
        rest /= 8;
        int const cb = static_cast<int>(rest % f.cblocks);
        rest /= f.cblocks;
        int const row = static_cast<int>(rest % BM);
        int64_t const gm = rest / BM;  // group * m_tiles + mt
        int const mt = static_cast<int>(gm % f.m_tiles);
        int64_t const group = gm / f.m_tiles;
        int const oc = mt * BM + row;
        Pack<T, 8> values;
        if (oc < f.per_group_out) {
            T const* src = weight + ((group * f.per_group_out + oc) * f.per_group + cb * kFusedBK + c8 * 8) * f.taps + k;
#pragma unroll
            for (int e = 0; e < 8; ++e) values.v[e] = src[e * f.taps];
        } else {
#pragma unroll
            for (int e = 0; e < 8; ++e) values.v[e] = fromF32<T>(0.f);
        }
        int64_t const tile = gm * f.k_blocks + f.blockOf(k, cb);
        constexpr int kChunks = BM * kFusedBK / 8;  // of a [BM][64] tile
        auto* const dst = reinterpret_cast<Pack<FusedOperand<T>, 8>*>(prep) + swizzled(row, c8) / 16;
        if constexpr (std::is_same_v<T, float>) {
            Pack<__nv_bfloat16, 8> hi, lo;
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                float2 const parts = splitBf16(values.v[e]);
                hi.v[e] = __float2bfloat16_rn(parts.x);
                lo.v[e] = __float2bfloat16_rn(parts.y);
            }
            dst[tile * 2 * kChunks] = hi;
            dst[tile * 2 * kChunks + kChunks] = lo;
        } else {
            dst[tile * kChunks] = values;
        }
    }
}

// The bilinear sum of 8 channels (one 16-byte pack per corner) with the corner weights of a FusedCorner (w01, w23:
// pairs of T), in the data type's packed arithmetic (HFMA2: 4 instructions a corner, where FP32 sums take 8
// conversions and 8 FMAs).
template <typename T>
__device__ __forceinline__ uint4 interpolatePacked(uint4 const (&corner)[4], uint32_t w01, uint32_t w23) {
#if !defined(__CUDA_ARCH__) || !defined(__CUDA_ARCH_FEAT_SM90_ALL)  // bf16 HFMA2 needs sm_80+; the kernel runs on 90a
    (void)corner, (void)w01, (void)w23;
    __trap();
    return uint4{};
#else
    using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
    T2 pairs[2];
    __builtin_memcpy(&pairs[0], &w01, sizeof(w01));
    __builtin_memcpy(&pairs[1], &w23, sizeof(w23));
    T2 sum[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        T2 weight;  // w[q] in both halves
        if constexpr (std::is_same_v<T, __half>) {
            weight = q % 2 == 0 ? __low2half2(pairs[q / 2]) : __high2half2(pairs[q / 2]);
        } else {
            weight = q % 2 == 0 ? __low2bfloat162(pairs[q / 2]) : __high2bfloat162(pairs[q / 2]);
        }
        T2 values[4];
        __builtin_memcpy(&values, &corner[q], sizeof(values));
#pragma unroll
        for (int e = 0; e < 4; ++e) sum[e] = q == 0 ? __hmul2(weight, values[e]) : __hfma2(weight, values[e], sum[e]);
    }
    uint4 packed;
    __builtin_memcpy(&packed, &sum, sizeof(packed));
    return packed;
#endif
}

// cornersOf's corners as a table entry: the offset of the top-left corner, from any corner inside the image (0 where
// none is; row = elements from a pixel to the one below it), with the four corners' validity in its low 4 bits.
__device__ __forceinline__ int32_t cornerBase(Corners<int32_t> const& c, int32_t channels, int32_t row) {
    int32_t const base = c.at[0] >= 0   ? c.at[0]
                         : c.at[1] >= 0 ? c.at[1] - channels
                         : c.at[2] >= 0 ? c.at[2] - row
                         : c.at[3] >= 0 ? c.at[3] - row - channels
                                        : 0;
    int32_t const flags = (c.at[0] >= 0) | (c.at[1] >= 0) << 1 | (c.at[2] >= 0) << 2 | (c.at[3] >= 0) << 3;
    return base | flags;
}
// The same as a FusedCorner (weights rounded to T).
template <typename T>
__device__ __forceinline__ FusedCorner<T> packCorners(Corners<int32_t> const& c, int32_t channels, int32_t row) {
    return FusedCorner<T>{cornerBase(c, channels, row), 0,
                          {fromF32<T>(c.w[0]), fromF32<T>(c.w[1]), fromF32<T>(c.w[2]), fromF32<T>(c.w[3])}};
}

// Element index in the NCHW output of output channel `channel` at pixel gp of all images (image * pixels + pixel).
__device__ __forceinline__ int64_t fusedOutAt(FusedParams const& f, int64_t channel, int gp) {
    int const im = gp / f.pixels;
    return (static_cast<int64_t>(im) * f.out_channels + channel) * f.pixels + (gp - im * f.pixels);
}

// Tile `tile` (of pixel_tiles * m_tiles * groups, pixel tiles fastest; BN pixels a tile) as (first pixel,
// output-channel tile, group).
template <int BN = kFusedBN>
__device__ __forceinline__ void fusedTileOf(FusedParams const& f, int64_t tile, int& tile0, int& mt, int& group) {
    int64_t const rest = tile / f.pixel_tiles;
    tile0 = static_cast<int>(tile - rest * f.pixel_tiles) * BN;
    mt = static_cast<int>(rest % f.m_tiles);
    group = static_cast<int>(rest / f.m_tiles);
}

// A block's work: block b takes tile b (every reduction block) while b < split.whole, else piece (b - whole) % pieces
// of tail tile whole + (b - whole) / pieces, whose FP32 sums go to partials[piece] ([kBM][BN] each); see the top
// of this file. BN: pixels a tile.
struct FusedWork {
    int64_t piece;  // -1 for a whole tile
    int tile0, mt, group;
    int kb_first, k_blocks;  // its reduction blocks
};
template <int BN = kFusedBN>
__device__ __forceinline__ FusedWork fusedWorkOf(FusedParams const& f, FusedSplit const& split, int64_t b) {
    FusedWork w{};
    w.piece = b < split.whole ? -1 : b - split.whole;
    fusedTileOf<BN>(f, w.piece < 0 ? b : split.whole + w.piece / split.pieces, w.tile0, w.mt, w.group);
    int const p = w.piece < 0 ? 0 : static_cast<int>(w.piece % split.pieces);
    w.kb_first = w.piece < 0 ? 0 : FusedSplit::first(p, split.pieces, f.k_blocks);
    w.k_blocks = w.piece < 0 ? f.k_blocks : FusedSplit::first(p + 1, split.pieces, f.k_blocks) - w.kb_first;
    return w;
}

// The corners of every pixel of the tile at the taps of `chunk`, for offset group og: put(e, corners) stores entry
// e = tap in chunk * BN + pixel (BN pixels a tile). Thread `first` of `threads` fills every threads-th entry. (Reading
// all of a thread's offsets before computing any entry took the same time in fusedKernel, 1.5% more in
// fusedWsKernel and 2% more in fusedPairKernel<2>, 3% less in fusedPairKernel<1>: session 24, bench/README.md.)
template <int BN = kFusedBN, typename T, typename Put>
__device__ void fillCornerTable(Put const& put, T const* __restrict__ offset, T const* __restrict__ mask,
                                SampleParams const& sp, FusedParams const& f, int tile0, int chunk, int og, int first,
                                int threads) {
    int const first_tap = chunk * kFusedTableTaps;
    int const entries = min(kFusedTableTaps, f.taps - first_tap) * BN;
    for (int e = first; e < entries; e += threads) {
        int const k = first_tap + e / BN, gp = tile0 + e % BN;
        Corners<int32_t> c{{0.f, 0.f, 0.f, 0.f}, {-1, -1, -1, -1}};  // past the images: no corner inside, zeros read
        if (gp < f.total) {
            int const im = gp / f.pixels, px = gp - im * f.pixels;
            int const y = px / f.out_w;
            int64_t const planes = static_cast<int64_t>(im) * f.offset_groups * f.taps * f.pixels;
            c = cornersOf<T, int32_t>(offset + 2 * planes, mask != nullptr ? mask + planes : nullptr, sp, og, px, y,
                                      px - y * f.out_w, k, f.channels);
        }
        put(e, c);
    }
}
// put for a table of FusedCorner entries.
template <typename T>
struct PackedCorners {
    FusedCorner<T>* table;
    int32_t channels, row;
    __device__ __forceinline__ void operator()(int e, Corners<int32_t> const& c) const {
        table[e] = packCorners<T>(c, channels, row);
    }
};

// A thread's share of the sample tile: vector v (8 channels) of a 64-channel block at kPix pixels of the tile,
// pixel(jj) = first_pixel + 4 * jj, where the 8 lanes of a pixel (lane / 8 the same) read its 128 bytes of a corner as
// one line (4 lines a warp read). load() reads the corners of a reduction block into registers, every read issued
// before any is used; store() interpolates them into that block's sample tile.
template <typename T, int kPix>
struct FusedSampler {
    int v, first_pixel;
    int32_t row;              // elements from a pixel to the one below it
    int32_t image_at[kPix];   // the pixel's image in `input` (32-bit: fusedFits)
    uint4 corner[kPix][4];    // [pixel][corner] of the block loaded and not yet stored
    uint32_t weights[kPix][2];  // its FusedCorner weights (w01, w23) per pixel

    __device__ __forceinline__ FusedSampler(FusedParams const& f, int tile0, int first_pixel_, int lane)
        : v(lane & 7), first_pixel(first_pixel_), row(f.width * f.channels) {
#pragma unroll
        for (int jj = 0; jj < kPix; ++jj) {
            int const gp = tile0 + first_pixel + 4 * jj;
            image_at[jj] = (gp < f.total ? gp / f.pixels : 0) * f.height * row;
        }
    }
    // The block at `at` of conv group `group`, its corners from the table (which holds at's tap chunk).
    __device__ __forceinline__ void load(T const* __restrict__ input, FusedCorner<T> const* table,
                                         FusedParams const& f, FusedCursor const& at, int group) {
        int const c0 = group * f.per_group + at.cb * kFusedBK + v * 8;
        auto const* taps_of = reinterpret_cast<uint4 const*>(table + at.k_local * kFusedBN + first_pixel);
        int32_t const step[4] = {0, f.channels, row, row + f.channels};  // corner q from the top-left one
#pragma unroll
        for (int jj = 0; jj < kPix; ++jj) {
            uint4 const entry = taps_of[4 * jj];  // FusedCorner: one 16-byte read
            int32_t const flags = static_cast<int32_t>(entry.x) & 15;
            int32_t const top_left = image_at[jj] + (static_cast<int32_t>(entry.x) - flags) + c0;
            weights[jj][0] = entry.z;
            weights[jj][1] = entry.w;
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                // a corner outside the image is zeros, not the image times weight 0 (inf * 0 = NaN): a predicated
                // load, no branch around it (a zero-bordered copy of the input, every read unconditional, cost more in
                // its copy than it saved: session 23)
                corner[jj][q] = uint4{0, 0, 0, 0};
                if ((flags >> q & 1) != 0) corner[jj][q] = __ldg(reinterpret_cast<uint4 const*>(input + (top_left + step[q])));
            }
        }
    }
    // The bilinear sums into the block's [kFusedBN][64] sample tile at `samples` (128-byte swizzle).
    __device__ __forceinline__ void store(unsigned char* samples) const {
#pragma unroll
        for (int jj = 0; jj < kPix; ++jj) {
            *reinterpret_cast<uint4*>(samples + swizzled(first_pixel + 4 * jj, v)) =
                interpolatePacked<T>(corner[jj], weights[jj][0], weights[jj][1]);
        }
    }
};

// The offset group of channel block cb of conv group `group`.
__device__ __forceinline__ int fusedOffsetGroup(FusedParams const& f, int group, int cb) {
    return (group * f.per_group + cb * kFusedBK) / f.per_offset_group;
}

// The cursor to the next reduction block, og to that block's offset group.
__device__ __forceinline__ void fusedAdvance(FusedParams const& f, FusedCursor& at, int& og, int group) {
    int const cb = at.cb;
    f.advance(at);
    if (at.cb != cb) og = fusedOffsetGroup(f, group, at.cb);
}

// A weight tile of Bytes from `next` into `stage` by 16-byte cp.async (thread tid of Threads; one group, waited at the
// top of the next iteration), `next` then at the following tile. One bulk copy a tile on an mbarrier instead (no
// thread's cp.async through L1) took the same time in fp16 and 3% more in fusedPairKernel<1> (H100, session 24).
template <int Bytes, int Threads>
__device__ __forceinline__ void fusedCopyWeight(unsigned char* stage, unsigned char const*& next, int tid) {
#pragma unroll
    for (int i = 0; i < Bytes / 16 / Threads; ++i) {
        int const chunk = (i * Threads + tid) * 16;
        cpAsync16(stage + chunk, next + chunk, true);
    }
    cpAsyncCommit();
    next += Bytes;
}

// Bytes per row of an output tile of BN pixels: 8 elements more keep the fragment stores conflict-free.
template <typename T, int BN = kFusedBN>
constexpr int kFusedOutPitch = (BN + 8) * static_cast<int>(sizeof(T));

// The block's output from its accumulators (threads [0, Threads), warpgroup tid / 128 holding MT m64 tiles of
// output channels, rows 64 * (MT * (tid / 128) + m) ... of the kBM = BM, each against BN pixels: acc[m * BN / 2 + i]
// is element i of m64 tile m's fragment): for a piece of a tail tile its FP32 sums as they are (fusedFixupKernel adds
// bias and pieces); else D[oc][pixel] + bias, rounded to T, through shared memory (free once every wgmma and copy is
// done) into the NCHW output by 16-byte stores (8 pixels, 4 in float32): written from the fragments directly, a
// warp's store was 2 bytes a lane over 8 rows, and each pixel pair took an integer division. sync() orders the
// threads (a barrier of all of them).
template <typename T, int BM, int Threads, int BN = kFusedBN, int MT = 1, typename Sync>
__device__ __forceinline__ void fusedStoreTile(float (&acc)[64], FusedWork const& work, FusedParams const& f,
                                               T const* __restrict__ bias, T* __restrict__ out,
                                               float* __restrict__ partials, unsigned char* smem, int tid, Sync sync) {
    static_assert(MT * BN / 2 == 64, "a thread's fragments: MT tiles of m64 x BN");
    int const lane = tid & 31, wg = tid >> 7, r = lane >> 2, q = lane & 3, w = (tid >> 5) & 3;
    if (work.piece >= 0) {
        float* const dst = partials + work.piece * (BM * BN);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                int const row = (wg * MT + m) * 64 + w * 16 + r + 8 * h;
#pragma unroll
                for (int j = 0; j < BN / 8; ++j) {
                    *reinterpret_cast<float2*>(dst + row * BN + 8 * j + 2 * q) =
                        make_float2(acc[m * BN / 2 + 4 * j + 2 * h], acc[m * BN / 2 + 4 * j + 2 * h + 1]);
                }
            }
        }
        return;
    }
    constexpr int kPitch = kFusedOutPitch<T, BN>;
    constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // pixels of a 16-byte store
    sync();  // every warpgroup's last wgmma has read its stage
#pragma unroll
    for (int m = 0; m < MT; ++m) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            int const row = (wg * MT + m) * 64 + w * 16 + r + 8 * h;
            int const oc = work.mt * BM + row;
            float const b =
                bias != nullptr && oc < f.per_group_out ? toF32(bias[work.group * f.per_group_out + oc]) : 0.f;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
                Pack<T, 2> pair;
                pair.v[0] = fromF32<T>(acc[m * BN / 2 + 4 * j + 2 * h] + b);
                pair.v[1] = fromF32<T>(acc[m * BN / 2 + 4 * j + 2 * h + 1] + b);
                *reinterpret_cast<Pack<T, 2>*>(smem + row * kPitch + (8 * j + 2 * q) * static_cast<int>(sizeof(T))) =
                    pair;
            }
        }
    }
    sync();
    // the kVec pixels of a chunk in one image and 16-byte aligned in the output
    bool const vector_rows = f.pixels % kVec == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
    for (int chunk = tid; chunk < BM * (BN / kVec); chunk += Threads) {
        int const row = chunk / (BN / kVec), first = work.tile0 + (chunk % (BN / kVec)) * kVec;
        int const oc = work.mt * BM + row;
        if (oc >= f.per_group_out || first >= f.total) continue;
        int64_t const channel = work.group * f.per_group_out + oc;
        T const* values = reinterpret_cast<T const*>(smem + row * kPitch) + (first - work.tile0);
        if (vector_rows && first + kVec <= f.total) {
            *reinterpret_cast<uint4*>(out + fusedOutAt(f, channel, first)) = *reinterpret_cast<uint4 const*>(values);
        } else {
            for (int e = 0; e < kVec && first + e < f.total; ++e) out[fusedOutAt(f, channel, first + e)] = values[e];
        }
    }
}

// The 256-channel kernel: every thread samples and its warpgroup multiplies; see the top of this file.
template <typename T, int WG>
__global__ void __launch_bounds__(FusedTile<WG>::kThreads, 1)
    fusedKernel(T const* __restrict__ input, T const* __restrict__ offset, T const* __restrict__ mask,
                T const* __restrict__ prep, T const* __restrict__ bias, T* __restrict__ out,
                float* __restrict__ partials, SampleParams const sp, FusedParams const f, FusedSplit const split) {
    using Tile = FusedTile<WG>;
    extern __shared__ __align__(16) unsigned char fused_smem[];
    // 128-byte swizzled tiles repeat every 1024 bytes: their base must be 1024-byte aligned (kSmemBytes has the room)
    unsigned char* const smem =
        fused_smem + ((1024 - (static_cast<uint32_t>(__cvta_generic_to_shared(fused_smem)) & 1023)) & 1023);
    DCN_TRACE(kTraceStartNs, traceNs());
    DCN_TRACE(kTraceStart, clock64());
    int const tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    FusedWork const work = fusedWorkOf(f, split, blockIdx.x);
    int const k_blocks = work.k_blocks;
    FusedSampler<T, Tile::kPixelsPerWarp / 4> sampler(f, work.tile0, warp * Tile::kPixelsPerWarp + (lane >> 3), lane);
    // the next weight tile to copy (storeSamples() advances it: one tile per reduction block, in order)
    unsigned char const* weight_next = reinterpret_cast<unsigned char const*>(
        prep + ((static_cast<int64_t>(work.group) * f.m_tiles + work.mt) * f.k_blocks + work.kb_first) *
                   (Tile::kBM * kFusedBK));
    auto* table = reinterpret_cast<FusedCorner<T>*>(smem + kFusedStages * Tile::kStageBytes);
    PackedCorners<T> const put{table, f.channels, f.width * f.channels};

    // The reduction block the next loadSamples() call reads, advanced one block per call (calls come in order of kb),
    // in offset group og; table_of: the (tap chunk, offset group) the corner table holds.
    FusedCursor at = f.at(work.kb_first);
    int og = fusedOffsetGroup(f, work.group, at.cb);
    int table_of = at.chunk * f.offset_groups + og;
    int store_stage = 0;  // the stage the next storeSamples() call fills

    // The next reduction block's corners into registers, used only by storeSamples() after the next barrier: the reads
    // of block kb + 2 are in flight while the block waits at the barrier and issues the wgmma of block kb + 1.
    auto loadSamples = [&]() {
        if (at.chunk * f.offset_groups + og != table_of) {  // the same for every thread: all reach the barriers
            table_of = at.chunk * f.offset_groups + og;
            __syncthreads();  // every thread has read its entries of the table's last block
            fillCornerTable(put, offset, mask, sp, f, work.tile0, at.chunk, og, tid, Tile::kThreads);
            __syncthreads();
        }
        sampler.load(input, table, f, at, work.group);
        fusedAdvance(f, at, og, work.group);
    };
    // The block loadSamples() read last, into its stage: its weight tile by cp.async (one group: the wait at the top
    // of the next iteration), its bilinear sums into the sample tile.
    auto storeSamples = [&]() {
        unsigned char* stage = smem + store_stage * Tile::kStageBytes;
        store_stage = store_stage + 1 == kFusedStages ? 0 : store_stage + 1;
        fusedCopyWeight<Tile::kABytes, Tile::kThreads>(stage, weight_next, tid);
        sampler.store(stage + Tile::kABytes);
    };

    float acc[64];  // the first wgmma overwrites it (a zero fill would be an instruction ptxas must order the
                    // asynchronous wgmma after, serializing them)
    // The pipeline (3 stages): iteration kb multiplies block kb, stores block kb + 1 (its weight tile and the samples
    // of the corners read by the iteration before) and loads the corners of block kb + 2 into registers. Block kb + 1
    // goes into the stage of kb - 2, whose wgmma every warpgroup waited for (wait_group 1 at the end of iteration
    // kb - 1) before the barrier of iteration kb; the wgmma of kb - 1 may still be reading its own stage. The fence
    // ptxas puts before the wgmma (WARPGROUP.ARRIVE) waits for those reads, yet reading each block after the wgmma
    // of the one before, none in flight there, was 9% slower (session 23, bench/README.md).
    static_assert(kFusedStages == 3, "the loop below keeps 3 stages: kb multiplied, kb + 1 stored, kb - 1 reading");
    // The first table reads only offsets and mask, written before the kernels this one may overlap (launchFused): it
    // is filled while they finish, and the channels-last input and the reordered weight are read after they have.
    fillCornerTable(put, offset, mask, sp, f, work.tile0, at.chunk, og, tid, Tile::kThreads);
    DCN_TRACE(kTraceTableFilled, clock64());
    waitPrevious();
    __syncthreads();
    DCN_TRACE(kTraceWaited, clock64());
    loadSamples();  // block 0 (k_blocks >= 1)
    storeSamples();
    if (k_blocks > 1) loadSamples();
    int const wg = warp >> 2;
    // descriptor low words of stage 0: the warpgroup's 64 rows of the weight tile, the samples
    uint32_t const a0 = smemDescriptorLow(smem + wg * 64 * 128), b0 = smemDescriptorLow(smem + Tile::kABytes);
    int multiply_stage = 0;  // kb % kFusedStages
    DCN_TRACE(kTraceLoopStart, clock64());
    for (int kb = 0; kb < k_blocks; ++kb) {
        if (kb == k_blocks / 2) DCN_TRACE(kTraceMiddle, clock64());
        cpAsyncWait<0>();  // this thread's weight copies of block kb have landed
        TORCHTRT_EXT_SM90A_ONLY(asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"));  // visible to wgmma
        __syncthreads();
        uint32_t const stage_at = static_cast<uint32_t>(multiply_stage * (Tile::kStageBytes >> 4));
        multiply_stage = multiply_stage + 1 == kFusedStages ? 0 : multiply_stage + 1;
        pinRegisters(acc);
        wgmmaFence();
#pragma unroll
        for (int s = 0; s < kFusedBK / 16; ++s) {  // k16 steps: 32 bytes further along the swizzled rows
            wgmma64x128<T>(acc, smemDescriptor(a0 + stage_at + s * (32 >> 4)),
                           smemDescriptor(b0 + stage_at + s * (32 >> 4)), kb > 0 || s > 0);
        }
        wgmmaCommit();
        if (kb == 0) DCN_TRACE(kTraceFirstIssued, clock64());
        if (kb + 1 < k_blocks) storeSamples();
        wgmmaWait<1>();
        pinRegisters(acc);
        if (kb + 2 < k_blocks) loadSamples();
    }
    wgmmaWait<0>();
    pinRegisters(acc);
    DCN_TRACE(kTraceLoopEnd, clock64());
    static_assert(Tile::kBM * kFusedOutPitch<T> <= kFusedStages * Tile::kStageBytes, "the output tile must fit");
    fusedStoreTile<T, Tile::kBM, Tile::kThreads>(acc, work, f, bias, out, partials, smem, tid, [] { __syncthreads(); });
    DCN_TRACE_END(k_blocks);
}

// ------------------------------------------------------------------------------ the float32 kernel (bf16 pairs)
// float32 on the same plan, as bf16 pairs (the column path's split, splitBf16): every sample and weight x is stored as
// hi = bf16(x) and lo = bf16(x - hi) (x = hi + lo within 2^-18 |x|), and per k16 step three wgmma sum hi_w * hi_s
// into one set of accumulators and hi_w * lo_s + lo_w * hi_s into another (summed into the first one's running sum,
// the tensor cores' FP32 sums would lose the small products' bits: 1.3e-5 against float64 where two sets keep 5e-6,
// bench/README.md session 9). Two sets of sums take 128 registers a thread, so the block is 2 warpgroups (every thread
// samples, in lock step as fusedKernel), and the corner table keeps FP32 weights (float4) apart from the top-left
// offsets (int32). A stage holds the hi and lo tiles of both operands. MT is the m64 tiles of output channels a
// warpgroup multiplies:
// - MT = 1: 128 output channels x 128 pixels (wgmma n128), 3 stages of 64 KB, for conv groups of at most 128 output
//   channels. (Tiles of 64 pixels, 2 blocks of 128 registers a thread on a multiprocessor, were slower: 133.7 against
//   127.6 us at 4x128x100x76 on the plugin path, H100, session 22.)
// - MT = 2: 256 output channels x 64 pixels (wgmma n64, the same sums a thread), 2 stages of 80 KB. With 128-channel
//   tiles a conv group of 256 output channels had each pixel tile sampled twice (once per tile), and the sampling is
//   most of the kernel's time (bench/README.md, session 20); this tile samples it once. Its stages leave room for two
//   only, so each iteration waits for its own wgmma (after issuing the corner reads of the block after next), and
//   the barrier at the next iteration's top frees the stage that wgmma read.
template <int MT>
struct FusedPairTile {
    static constexpr int kThreads = 256;
    static constexpr int kBM = 128 * MT;
    static constexpr int kBN = kFusedBN / MT;
    static constexpr int kStages = MT == 1 ? 3 : 2;
    static constexpr int kPixelsPerWarp = kBN / (kThreads / 32);
    static constexpr int kAPartBytes = kBM * kFusedBK * 2;  // a [kBM][64] bf16 tile: hi or lo of A
    static constexpr int kBPartBytes = kBN * kFusedBK * 2;  // a [kBN][64] bf16 tile: hi or lo of B
    static constexpr int kABytes = 2 * kAPartBytes;  // [A hi][A lo]
    static constexpr int kStageBytes = kABytes + 2 * kBPartBytes;  // [A hi][A lo][B hi][B lo]
    static constexpr int kTableEntries = kFusedTableTaps * kBN;
    static constexpr int kTableBytes = kTableEntries * (16 + 4);  // float4 weights, then int32 offsets
    static constexpr int kSmemBytes = kStages * kStageBytes + kTableBytes + 1024;  // + room to align to 1024
};

// put for the float32 table: the corner weights and the top-left offset with its validity bits (cornerBase).
struct PairCorners {
    float4* weights;
    int32_t* base;
    int32_t channels, row;
    __device__ __forceinline__ void operator()(int e, Corners<int32_t> const& c) const {
        weights[e] = make_float4(c.w[0], c.w[1], c.w[2], c.w[3]);
        base[e] = cornerBase(c, channels, row);
    }
};

// A thread's share of the sample tile in float32: vector v (4 channels) of a 64-channel block at kPix pixels
// first_pixel + 2 jj, where the 16 lanes of a pixel (lane / 16 the same) read its 256 bytes of a corner (2 lines a
// pixel, 4 a warp read; 8 lanes of 8 channels, two 16-byte reads each, touched 8). Loaded and stored in quarters of
// kPix / 4 pixels, kSets quarters in registers at a time: with 128-pixel tiles two (a whole block's corners, 128
// registers, and the two accumulator sets would not fit a thread's 255), with 64-pixel tiles all four (64 registers).
// store() interpolates in FP32 and writes hi and lo (4 bf16 each, half a 16-byte chunk); it reads the corner weights
// from the table again, which still holds the block's tap chunk (only the load of a block's first quarters refills it).
template <int MT>
struct FusedPairSampler {
    static constexpr int kBN = FusedPairTile<MT>::kBN;
    static constexpr int kPix = FusedPairTile<MT>::kPixelsPerWarp / 2;
    static constexpr int kQuarter = kPix / 4;  // pixels of a quarter
    static constexpr int kSets = MT == 1 ? 2 : 4;  // 2 quarters of 2 pixels, or all 4 of 1 pixel
    int v, first_pixel;
    int32_t row;
    int32_t image_at[kPix];
    float4 corner[kSets][kQuarter][4];  // [quarter % kSets][pixel of the quarter][corner]: 4 channels

    __device__ __forceinline__ FusedPairSampler(FusedParams const& f, int tile0, int first_pixel_, int lane)
        : v(lane & 15), first_pixel(first_pixel_), row(f.width * f.channels) {
#pragma unroll
        for (int jj = 0; jj < kPix; ++jj) {
            int const gp = tile0 + first_pixel + 2 * jj;
            image_at[jj] = (gp < f.total ? gp / f.pixels : 0) * f.height * row;
        }
    }
    __device__ __forceinline__ void load(float const* __restrict__ input, PairCorners const& table,
                                         FusedParams const& f, FusedCursor const& at, int group, int quarter) {
        int const c0 = group * f.per_group + at.cb * kFusedBK + v * 4;
        int const e0 = at.k_local * kBN + first_pixel;
        int32_t const step[4] = {0, f.channels, row, row + f.channels};
#pragma unroll
        for (int p = 0; p < kQuarter; ++p) {
            int const jj = quarter * kQuarter + p;
            int32_t const entry = table.base[e0 + 2 * jj];
            int32_t const flags = entry & 15;
            int32_t const top_left = image_at[jj] + (entry - flags) + c0;
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                float4& c = corner[quarter % kSets][p][q];
                c = make_float4(0.f, 0.f, 0.f, 0.f);  // outside: zeros (see FusedSampler)
                if ((flags >> q & 1) != 0) c = __ldg(reinterpret_cast<float4 const*>(input + (top_left + step[q])));
            }
        }
    }
    __device__ __forceinline__ void store(unsigned char* samples_hi, unsigned char* samples_lo,
                                          PairCorners const& table, FusedCursor const& at, int quarter) const {
        int const e0 = at.k_local * kBN + first_pixel;
#pragma unroll
        for (int p = 0; p < kQuarter; ++p) {
            int const jj = quarter * kQuarter + p;
            float4 const w = table.weights[e0 + 2 * jj];
            float4 const (&c)[4] = corner[quarter % kSets][p];
            float const sum[4] = {fmaf(w.w, c[3].x, fmaf(w.z, c[2].x, fmaf(w.y, c[1].x, w.x * c[0].x))),
                                  fmaf(w.w, c[3].y, fmaf(w.z, c[2].y, fmaf(w.y, c[1].y, w.x * c[0].y))),
                                  fmaf(w.w, c[3].z, fmaf(w.z, c[2].z, fmaf(w.y, c[1].z, w.x * c[0].z))),
                                  fmaf(w.w, c[3].w, fmaf(w.z, c[2].w, fmaf(w.y, c[1].w, w.x * c[0].w)))};
            Pack<__nv_bfloat16, 4> hi, lo;
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                float2 const parts = splitBf16(sum[e]);
                hi.v[e] = __float2bfloat16_rn(parts.x);
                lo.v[e] = __float2bfloat16_rn(parts.y);
            }
            int const at_byte = swizzled(first_pixel + 2 * jj, v >> 1) + (v & 1) * 8;
            *reinterpret_cast<Pack<__nv_bfloat16, 4>*>(samples_hi + at_byte) = hi;
            *reinterpret_cast<Pack<__nv_bfloat16, 4>*>(samples_lo + at_byte) = lo;
        }
    }
};

// A k16 step of the float32 products of one m64 tile against N pixels, into sums [Off, Off + N / 2) of each set:
// big += hi_w * hi_s, small += hi_w * lo_s + lo_w * hi_s (a, b: descriptor low words of the hi tiles, their lo tiles
// a_lo and b_lo further).
template <int N, int Off>
__device__ __forceinline__ void pairTileProducts(float (&big)[64], float (&small)[64], uint32_t a, uint32_t b,
                                                 uint32_t a_lo, uint32_t b_lo, int accumulate) {
    auto const product = [](float (&d)[64], uint32_t x, uint32_t y, int add) {
        if constexpr (N == 128) {
            wgmma64x128<__nv_bfloat16>(d, smemDescriptor(x), smemDescriptor(y), add);
        } else {
            static_assert(N == 64, "n128 or n64");
            wgmma64x64Bf16<Off>(d, smemDescriptor(x), smemDescriptor(y), add);
        }
    };
    product(big, a, b, accumulate);
    product(small, a, b + b_lo, accumulate);
    product(small, a + a_lo, b, 1);
}

// The same for a warpgroup's MT m64 tiles (a: its first one of the weight, the next one 64 rows further).
template <int MT>
__device__ __forceinline__ void pairProducts(float (&big)[64], float (&small)[64], uint32_t a, uint32_t b,
                                             int accumulate) {
    using Tile = FusedPairTile<MT>;
    constexpr uint32_t kALo = Tile::kAPartBytes >> 4, kBLo = Tile::kBPartBytes >> 4;  // from a hi tile to its lo tile
    static_assert(MT == 1 || MT == 2, "a thread's sums: one m64 x n128 tile, or two m64 x n64");
    pairTileProducts<Tile::kBN, 0>(big, small, a, b, kALo, kBLo, accumulate);
    if constexpr (MT == 2) {
        pairTileProducts<Tile::kBN, 32>(big, small, a + ((64 * 128) >> 4), b, kALo, kBLo, accumulate);
    }
}

// The float32 kernel: see above; the pipeline is fusedKernel's. With 128-pixel tiles the last two quarters of a
// block's corners are read and stored in the iteration that stores its first two (each read issued one quarter's
// stores ahead of its use): at 4x128x100x76 123.1 us on the plugin path against 125.7 with halves (session 20,
// bench/README.md). With 64-pixel tiles all four are read an iteration ahead: at 8x256x80x80 534.2 us against 568.0
// with two (H100, session 22).
template <int MT>
__global__ void __launch_bounds__(FusedPairTile<MT>::kThreads, 1)
    fusedPairKernel(float const* __restrict__ input, float const* __restrict__ offset, float const* __restrict__ mask,
                    __nv_bfloat16 const* __restrict__ prep, float const* __restrict__ bias, float* __restrict__ out,
                    float* __restrict__ partials, SampleParams const sp, FusedParams const f, FusedSplit const split) {
    using Tile = FusedPairTile<MT>;
    constexpr int S = Tile::kStages, BN = Tile::kBN;
    extern __shared__ __align__(16) unsigned char fused_smem[];
    unsigned char* const smem =
        fused_smem + ((1024 - (static_cast<uint32_t>(__cvta_generic_to_shared(fused_smem)) & 1023)) & 1023);
    DCN_TRACE(kTraceStartNs, traceNs());
    DCN_TRACE(kTraceStart, clock64());
    int const tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    FusedWork const work = fusedWorkOf<BN>(f, split, blockIdx.x);
    int const k_blocks = work.k_blocks;
    FusedPairSampler<MT> sampler(f, work.tile0, warp * Tile::kPixelsPerWarp + (lane >> 4), lane);
    unsigned char const* weight_next = reinterpret_cast<unsigned char const*>(prep) +
        ((static_cast<int64_t>(work.group) * f.m_tiles + work.mt) * f.k_blocks + work.kb_first) * Tile::kABytes;
    auto* const table_w = reinterpret_cast<float4*>(smem + S * Tile::kStageBytes);
    PairCorners const put{table_w, reinterpret_cast<int32_t*>(table_w + Tile::kTableEntries), f.channels,
                          f.width * f.channels};

    FusedCursor at = f.at(work.kb_first);  // the block the next load reads (advanced after its last quarter)
    int og = fusedOffsetGroup(f, work.group, at.cb);
    int table_of = at.chunk * f.offset_groups + og;
    int store_stage = 0;
    // The first two quarters of the next block's corners into registers (refilling the table first where that block
    // needs another one: every thread has read the last one's entries, the last quarters included).
    auto loadFirstQuarters = [&]() {
        if (at.chunk * f.offset_groups + og != table_of) {
            table_of = at.chunk * f.offset_groups + og;
            __syncthreads();
            fillCornerTable<BN>(put, offset, mask, sp, f, work.tile0, at.chunk, og, tid, Tile::kThreads);
            __syncthreads();
        }
#pragma unroll
        for (int quarter = 0; quarter < FusedPairSampler<MT>::kSets; ++quarter) {
            sampler.load(input, put, f, at, work.group, quarter);
        }
    };
    // That block into its stage: its weight tiles by cp.async, the samples of its quarters, the last two read here.
    auto storeBlock = [&]() {
        unsigned char* stage = smem + store_stage * Tile::kStageBytes;
        store_stage = store_stage + 1 == S ? 0 : store_stage + 1;
        fusedCopyWeight<Tile::kABytes, Tile::kThreads>(stage, weight_next, tid);
        unsigned char* const hi = stage + Tile::kABytes;
        constexpr int kSets = FusedPairSampler<MT>::kSets;
#pragma unroll
        for (int quarter = 0; quarter < 4; ++quarter) {
            sampler.store(hi, hi + Tile::kBPartBytes, put, at, quarter);
            if (quarter + kSets < 4) sampler.load(input, put, f, at, work.group, quarter + kSets);
        }
        fusedAdvance(f, at, og, work.group);
    };

    float big[64], small[64];  // hi * hi; hi * lo + lo * hi: MT tiles of 64 / MT (the first wgmma of each overwrites)
    fillCornerTable<BN>(put, offset, mask, sp, f, work.tile0, at.chunk, og, tid, Tile::kThreads);
    DCN_TRACE(kTraceTableFilled, clock64());
    waitPrevious();
    __syncthreads();
    DCN_TRACE(kTraceWaited, clock64());
    loadFirstQuarters();
    storeBlock();
    if (k_blocks > 1) loadFirstQuarters();
    int const wg = warp >> 2;
    // the warpgroup's first m64 tile of the weight (rows 64 * MT * wg ...), the samples
    uint32_t const a0 = smemDescriptorLow(smem + wg * MT * 64 * 128), b0 = smemDescriptorLow(smem + Tile::kABytes);
    int multiply_stage = 0;
    DCN_TRACE(kTraceLoopStart, clock64());
    for (int kb = 0; kb < k_blocks; ++kb) {
        if (kb == k_blocks / 2) DCN_TRACE(kTraceMiddle, clock64());
        cpAsyncWait<0>();
        TORCHTRT_EXT_SM90A_ONLY(asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"));
        __syncthreads();
        uint32_t const stage_at = static_cast<uint32_t>(multiply_stage * (Tile::kStageBytes >> 4));
        multiply_stage = multiply_stage + 1 == S ? 0 : multiply_stage + 1;
        pinRegisters(big);
        pinRegisters(small);
        wgmmaFence();
#pragma unroll
        for (int s = 0; s < kFusedBK / 16; ++s) {
            pairProducts<MT>(big, small, a0 + stage_at + s * (32 >> 4), b0 + stage_at + s * (32 >> 4), kb > 0 || s > 0);
        }
        wgmmaCommit();
        if (kb == 0) DCN_TRACE(kTraceFirstIssued, clock64());
        if (kb + 1 < k_blocks) storeBlock();
        // The wgmma that read the stage the next iteration stores into: with 3 stages that of kb - 1, then the reads
        // of block kb + 2; with 2 stages this one, the reads issued before the wait (registers only).
        if constexpr (S == 2) {
            if (kb + 2 < k_blocks) loadFirstQuarters();
        }
        wgmmaWait<S - 2>();
        pinRegisters(big);
        pinRegisters(small);
        if constexpr (S == 3) {
            if (kb + 2 < k_blocks) loadFirstQuarters();
        }
    }
    wgmmaWait<0>();
    pinRegisters(big);
    pinRegisters(small);
    DCN_TRACE(kTraceLoopEnd, clock64());
#pragma unroll
    for (int i = 0; i < 64; ++i) big[i] += small[i];
    static_assert(Tile::kBM * kFusedOutPitch<float, BN> <= S * Tile::kStageBytes, "the output tile must fit");
    fusedStoreTile<float, Tile::kBM, Tile::kThreads, BN, MT>(big, work, f, bias, out, partials, smem, tid,
                                                             [] { __syncthreads(); });
    DCN_TRACE_END(k_blocks);
}

// ------------------------------------------------------------------------------ the warp-specialized kernel
// mbarrier and bulk-copy wrappers (sm_90): a barrier is a 64-bit word of shared memory, named by its shared address.
__device__ __forceinline__ uint32_t sharedAddress(void const* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbarrierInit(uint32_t bar, uint32_t count) {
    TORCHTRT_EXT_SM90A_ONLY(asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory"));
}
__device__ __forceinline__ void mbarrierArrive(uint32_t bar) {
    TORCHTRT_EXT_SM90A_ONLY(asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory"));
}
// One arrival, and `bytes` more to come from bulk copies before the phase completes.
__device__ __forceinline__ void mbarrierArriveExpect(uint32_t bar, uint32_t bytes) {
    TORCHTRT_EXT_SM90A_ONLY(
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory"));
}
// Returns once the phase of parity `parity` has completed (a new barrier counts the phase before its first, parity 1,
// as completed).
__device__ __forceinline__ void mbarrierWait(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    uint32_t done = 0;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (done == 0);
#else
    (void)bar, (void)parity;
    __trap();
#endif
}
// `bytes` (a multiple of 16) from global src to shared dst by the copy engine, completing on barrier bar.
__device__ __forceinline__ void bulkCopy(uint32_t dst, void const* src, uint32_t bytes, uint32_t bar) {
    TORCHTRT_EXT_SM90A_ONLY(asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst), "l"(src),
        "r"(bytes), "r"(bar)
        : "memory"));
}
// A barrier of `threads` threads (a multiple of 32) of the block, named `id` (1-15; 0 is __syncthreads').
__device__ __forceinline__ void namedBarrier(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// The 128-channel kernel's block: 2 consumer warpgroups (one m64 tile of output channels each) that only wait and
// issue wgmma, 2 producer warpgroups that sample (4 pixels a thread) and start each weight tile's bulk copy, and
// kStages stages of shared memory between them, each with a `full` barrier (the producers' samples and the copy have
// landed) and an `empty` one (every consumer warp's wgmma has read the stage). Shared memory and L1 share a
// multiprocessor's 256 KB: 2 stages (83 KB of shared memory) leave the most L1 to the corner reads. At 4x128x100x76
// fp16 (bench/README.md, session 15): 2 stages 48.4 us, 3 stages 48.5, 4 stages 50.3, 6 stages 51.1.
struct FusedWsTile {
    static constexpr int kConsumerThreads = 256;
    static constexpr int kProducerThreads = 256;
    static constexpr int kThreads = kConsumerThreads + kProducerThreads;
    static constexpr int kBM = 128;
    static constexpr int kPixelsPerWarp = kFusedBN / (kProducerThreads / 32);
    static constexpr int kStages = 2;
    static constexpr int kABytes = kBM * kFusedBK * 2;
    static constexpr int kBBytes = kFusedBN * kFusedBK * 2;
    static constexpr int kStageBytes = kABytes + kBBytes;
    static constexpr int kTableBytes = kFusedTableTaps * kFusedBN * 16;
    static constexpr int kBarriersAt = kStages * kStageBytes + kTableBytes;
    static constexpr int kSmemBytes = kBarriersAt + 2 * kStages * 8 + 1024;  // + room to align to 1024
};

// The 128-channel kernel, warp-specialized: see the top of this file.
template <typename T>
__global__ void __launch_bounds__(FusedWsTile::kThreads, 1)
    fusedWsKernel(T const* __restrict__ input, T const* __restrict__ offset, T const* __restrict__ mask,
                  T const* __restrict__ prep, T const* __restrict__ bias, T* __restrict__ out,
                  float* __restrict__ partials, SampleParams const sp, FusedParams const f, FusedSplit const split) {
    using Tile = FusedWsTile;
    constexpr int S = Tile::kStages;
    extern __shared__ __align__(16) unsigned char fused_smem[];
    unsigned char* const smem =
        fused_smem + ((1024 - (static_cast<uint32_t>(__cvta_generic_to_shared(fused_smem)) & 1023)) & 1023);
    DCN_TRACE(kTraceStartNs, traceNs());
    DCN_TRACE(kTraceStart, clock64());
    int const tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    FusedWork const work = fusedWorkOf(f, split, blockIdx.x);
    uint32_t const full0 = sharedAddress(smem + Tile::kBarriersAt);  // full[s] = full0 + 8 s
    uint32_t const empty0 = full0 + 8 * S;                          // empty[s] = empty0 + 8 s
    if (tid == 0) {
        for (int s = 0; s < S; ++s) {
            mbarrierInit(full0 + 8 * s, Tile::kProducerThreads + 1);  // + the arrival that expects the weight copy
            mbarrierInit(empty0 + 8 * s, Tile::kConsumerThreads / 32);
        }
        TORCHTRT_EXT_SM90A_ONLY(asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"));
    }
    auto* table = reinterpret_cast<FusedCorner<T>*>(smem + S * Tile::kStageBytes);
    PackedCorners<T> const put{table, f.channels, f.width * f.channels};
    FusedCursor at = f.at(work.kb_first);
    int og = fusedOffsetGroup(f, work.group, at.cb);
    int table_of = at.chunk * f.offset_groups + og;
    // the first table by every thread, from offsets and mask only: before the wait (launchFused)
    fillCornerTable(put, offset, mask, sp, f, work.tile0, at.chunk, og, tid, Tile::kThreads);
    DCN_TRACE(kTraceTableFilled, clock64());
    waitPrevious();
    __syncthreads();
    DCN_TRACE(kTraceWaited, clock64());

    if (warp >= Tile::kConsumerThreads / 32) {
        // Producers: per reduction block the corners into registers, then (once the consumers are done with the
        // stage's last block) the weight tile's bulk copy and the samples into the stage, and an arrival.
        int const ptid = tid - Tile::kConsumerThreads;
        FusedSampler<T, Tile::kPixelsPerWarp / 4> sampler(f, work.tile0, (ptid >> 5) * Tile::kPixelsPerWarp + (lane >> 3),
                                                          lane);
        unsigned char const* weight_next = reinterpret_cast<unsigned char const*>(
            prep + ((static_cast<int64_t>(work.group) * f.m_tiles + work.mt) * f.k_blocks + work.kb_first) *
                       (Tile::kBM * kFusedBK));
        int s = 0;
        uint32_t parity = 0;  // of the stage's current use
        for (int kb = 0; kb < work.k_blocks; ++kb) {
            if (at.chunk * f.offset_groups + og != table_of) {  // the same for every producer
                table_of = at.chunk * f.offset_groups + og;
                namedBarrier(1, Tile::kProducerThreads);  // every producer has read its entries of the last block
                fillCornerTable(put, offset, mask, sp, f, work.tile0, at.chunk, og, ptid, Tile::kProducerThreads);
                namedBarrier(1, Tile::kProducerThreads);
            }
            sampler.load(input, table, f, at, work.group);
            fusedAdvance(f, at, og, work.group);
            unsigned char* const stage = smem + s * Tile::kStageBytes;
            mbarrierWait(empty0 + 8 * s, parity ^ 1);
            if (ptid == 0) {
                mbarrierArriveExpect(full0 + 8 * s, Tile::kABytes);
                bulkCopy(sharedAddress(stage), weight_next, Tile::kABytes, full0 + 8 * s);
            }
            weight_next += Tile::kABytes;
            sampler.store(stage + Tile::kABytes);
            TORCHTRT_EXT_SM90A_ONLY(asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"));  // for wgmma
            mbarrierArrive(full0 + 8 * s);
            if (++s == S) s = 0, parity ^= 1;
        }
    } else {
        // Consumers: per reduction block wait for its stage, issue its wgmma, and once the block before's wgmma has
        // read its stage hand that stage back.
        int const wg = warp >> 2;
        float acc[64];  // the first wgmma overwrites it (see fusedKernel)
        uint32_t const a0 = smemDescriptorLow(smem + wg * 64 * 128), b0 = smemDescriptorLow(smem + Tile::kABytes);
        int s = 0, last = 0;
        uint32_t parity = 0;
        DCN_TRACE(kTraceLoopStart, clock64());  // (the stamps of this kernel are a consumer's: thread 0)
        for (int kb = 0; kb < work.k_blocks; ++kb) {
            if (kb == work.k_blocks / 2) DCN_TRACE(kTraceMiddle, clock64());
            mbarrierWait(full0 + 8 * s, parity);
            uint32_t const stage_at = static_cast<uint32_t>(s * (Tile::kStageBytes >> 4));
            pinRegisters(acc);
            wgmmaFence();
#pragma unroll
            for (int k = 0; k < kFusedBK / 16; ++k) {
                wgmma64x128<T>(acc, smemDescriptor(a0 + stage_at + k * (32 >> 4)),
                               smemDescriptor(b0 + stage_at + k * (32 >> 4)), kb > 0 || k > 0);
            }
            wgmmaCommit();
            if (kb == 0) DCN_TRACE(kTraceFirstIssued, clock64());
            wgmmaWait<1>();
            pinRegisters(acc);
            if (kb > 0 && lane == 0) mbarrierArrive(empty0 + 8 * last);
            last = s;
            if (++s == S) s = 0, parity ^= 1;
        }
        wgmmaWait<0>();
        pinRegisters(acc);
        DCN_TRACE(kTraceLoopEnd, clock64());
        static_assert(Tile::kBM * kFusedOutPitch<T> <= S * Tile::kStageBytes, "the output tile must fit");
        fusedStoreTile<T, Tile::kBM, Tile::kConsumerThreads>(acc, work, f, bias, out, partials, smem, tid,
                                                             [] { namedBarrier(2, Tile::kConsumerThreads); });
        DCN_TRACE_END(work.k_blocks);
    }
}

// The tail tiles' output: per element the pieces' partial sums in piece order (the same sum on every call), plus the
// bias, rounded to T. Thread i: tail tile i / (BM * BN), then row, then pixel (consecutive threads, consecutive
// pixels of a row: coalesced reads).
template <typename T, int BM, int BN>
__global__ void fusedFixupKernel(float const* __restrict__ partials, T const* __restrict__ bias, T* __restrict__ out,
                                 FusedParams const f, FusedSplit const split, int64_t elements) {
    constexpr int kTile = BM * BN;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < elements;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        int64_t const t = i / kTile;
        int const within = static_cast<int>(i - t * kTile), row = within / BN, px = within % BN;
        int tile0, mt, group;
        fusedTileOf<BN>(f, split.whole + t, tile0, mt, group);
        int const oc = mt * BM + row;
        if (oc >= f.per_group_out || tile0 + px >= f.total) continue;
        float sum = 0.f;
        float const* part = partials + t * split.pieces * kTile + within;
        for (int p = 0; p < split.pieces; ++p) sum += part[p * kTile];
        int64_t const channel = group * f.per_group_out + oc;
        if (bias != nullptr) sum += toF32(bias[channel]);
        out[fusedOutAt(f, channel, tile0 + px)] = fromF32<T>(sum);
    }
}

// TORCHTRT_EXT_DCN_FUSED: "0" never runs the fused kernel, "1" runs it wherever it applies (the tests reach its edge
// cases through it), anything else or unset lets fusedFits choose by the shape. Read once per process.
inline RouteMode fusedMode() {
    static RouteMode const mode = routeModeOf("TORCHTRT_EXT_DCN_FUSED");
    return mode;
}

// Multiplying warpgroups per block (an m64 tile of output channels each): 4 (256 output channels: fusedKernel, 16 warps
// to hide the corner reads) unless the conv group has at most 128 output channels (fusedWsKernel); float32 always 2
// (fusedPairKernel).
inline int fusedWarpgroups(OpSizes const& s) { return s.elem == 2 && s.out_channels / s.groups > 128 ? 4 : 2; }

// m64 tiles of output channels a float32 warpgroup multiplies (fusedPairKernel<MT>): 2 (256 channels x 64 pixels a
// tile) where a conv group has more than 128 output channels, else 1 (128 x 128).
inline int fusedPairMT(OpSizes const& s) { return s.out_channels / s.groups > 128 ? 2 : 1; }

// Output channels and pixels of a tile, and those tiles per conv group.
inline int64_t fusedBM(OpSizes const& s) {
    if (s.elem == 4) return fusedPairMT(s) == 2 ? FusedPairTile<2>::kBM : FusedPairTile<1>::kBM;
    return fusedWarpgroups(s) == 4 ? FusedTile<4>::kBM : FusedTile<2>::kBM;
}
inline int64_t fusedBN(OpSizes const& s) {
    if (s.elem == 4) return fusedPairMT(s) == 2 ? FusedPairTile<2>::kBN : FusedPairTile<1>::kBN;
    return kFusedBN;
}
inline int64_t fusedMTiles(OpSizes const& s) { return (s.out_channels / s.groups + fusedBM(s) - 1) / fusedBM(s); }

// Reduction blocks (64 channels of one tap) of a conv group.
inline int64_t fusedKBlocks(OpSizes const& s) { return s.taps() * (s.channels / s.groups / kFusedBK); }

// Pixel tiles (fusedBN pixels of all images) and tiles (pixel tile, output-channel tile, conv group).
inline int64_t fusedPixelTiles(OpSizes const& s) { return (s.n * s.pixels() + fusedBN(s) - 1) / fusedBN(s); }
inline int64_t fusedTiles(OpSizes const& s) { return fusedPixelTiles(s) * fusedMTiles(s) * s.groups; }

inline int64_t fusedWeightBytes(OpSizes const& s) {
    return alignUp(s.groups * fusedMTiles(s) * fusedBM(s) * s.rows() * s.elem);
}

// True when the fused kernel runs the op: it applies (any dtype, the caller's T; an sm_90a build on a compute
// capability 9.0 device; 64-channel blocks within one conv group and one offset group; 32-bit indices over all
// images; room in the workspace for the reordered weight after the channels-last copy) and, unless
// TORCHTRT_EXT_DCN_FUSED says otherwise, its blocks (one per multiprocessor at a time) fill at least 70% of the waves
// they take. A block costs the same whether its wave is full or not, and with the GPU mostly idle the column path,
// whose kernels cut the work finer, is faster. H200, plugin path p50 us, fused (session 12) against columns:
// 8x256x64x64 (256 blocks, 97% of 2 waves of 132) 129.8 against 180.6; 4x128x100x76 (238, 90%) 65.9 against 88.6;
// 8x256x80x80 (400, 76% of 4 waves) 234.8 against 292.5 (202.3 since its 4-tile tail is cut, session 13); 1x64x40x40
// (13 blocks, 10%) 27.3 against 22.5 (bench/README.md). float32 also needs conv groups of one tile, at most 256
// output channels (every further tile samples the pixels again): 4x128x100x76 126.6 against 169.7 us (session 20);
// with 256-channel tiles (fusedPairMT) 8x256x64x64 352.0 against 366.0 and 8x256x80x80 554.6 against 586.0 (H200),
// 347.9 against 428.0 and 536.9 against 701.5 (H100, all four quarters ahead; session 22), where two 128-channel
// tiles took 432.2 against 364.6 (H200, session 20).
inline bool fusedFits(OpSizes const& s, Device const& dev, int64_t workspace_bytes) {
#ifdef TORCHTRT_EXT_SM90A
    constexpr int64_t kNarrow = 0x7fffffff;
    int64_t const cg = s.channels / s.groups;
    RouteMode const mode = fusedMode();
    bool const applies = mode != RouteMode::kOff && dev.major == 9 && dev.minor == 0 &&
                         cg % kFusedBK == 0 && (s.channels / s.offset_groups) % kFusedBK == 0 &&
                         s.n * s.height * s.width * s.channels <= kNarrow && s.n * s.pixels() <= kNarrow - kFusedBN &&
                         2 * s.offset_groups * s.taps() * s.pixels() <= kNarrow &&
                         fusedTiles(s) <= kMaxGridX - dev.sms && s.nhwcBytes() + fusedWeightBytes(s) <= workspace_bytes;
    if (!applies || mode == RouteMode::kWherever) return applies;
    int64_t const tiles = fusedTiles(s), waves = (tiles + dev.sms - 1) / dev.sms;
    return tiles * 10 >= waves * dev.sms * 7 && (s.elem != 4 || fusedMTiles(s) == 1);
#else
    (void)s, (void)dev, (void)workspace_bytes;
    return false;
#endif
}

// The cut of the tiles (fusedSplit), none where the workspace after the reordered weight (`room` bytes) cannot hold
// the tail's partial sums.
inline FusedSplit fusedSplitFor(OpSizes const& s, Device const& dev, int64_t room) {
    int64_t const tiles = fusedTiles(s);
    FusedSplit const split = fusedSplit(tiles, dev.sms, static_cast<int>(fusedKBlocks(s)));
    int64_t const bytes = (split.blocks(tiles) - split.whole) * fusedBM(s) * fusedBN(s) * 4;
    return bytes <= room ? split : FusedSplit{tiles, 1};
}

// The kernels below for WG warpgroups of MT m64 tiles each (MT = 2 for float32 only: fusedPairMT).
template <typename T, int WG, int MT = 1>
cudaError_t launchFusedAs(OpSizes const& s, TorchtrtExtDeformConv2dTensors const& t, T* nhwc_copy,
                          FusedOperand<T>* prep, float* partials, FusedSplit const& split, Device const& dev,
                          cudaStream_t stream) {
    int64_t const mg = s.out_channels / s.groups, cg = s.channels / s.groups;
    FusedParams const f{static_cast<int32_t>(s.height), static_cast<int32_t>(s.width),
                        static_cast<int32_t>(s.channels), static_cast<int32_t>(s.pixels()),
                        static_cast<int32_t>(s.out_w), static_cast<int32_t>(s.taps()),
                        static_cast<int32_t>(s.offset_groups), static_cast<int32_t>(cg),
                        static_cast<int32_t>(s.channels / s.offset_groups), static_cast<int32_t>(mg),
                        static_cast<int32_t>(s.out_channels), static_cast<int32_t>(cg / kFusedBK),
                        static_cast<int32_t>(fusedKBlocks(s)),
                        static_cast<int32_t>(fusedMTiles(s)), static_cast<int32_t>(s.n * s.pixels()),
                        static_cast<int32_t>(fusedPixelTiles(s))};
    // 256-channel tiles: fusedKernel; 128-channel tiles: the warp-specialized fusedWsKernel; float32: fusedPairKernel
    constexpr bool pairs = std::is_same_v<T, float>;
    static_assert(pairs ? WG == 2 && (MT == 1 || MT == 2) : MT == 1 && (WG == 2 || WG == 4), "a kernel for each tile");
    static_assert(FusedWsTile::kBM == 128 && FusedTile<4>::kBM == 256, "fp16/bf16 tiles: 64 channels a warpgroup");
    constexpr int kBM = pairs ? FusedPairTile<MT>::kBM : FusedTile<WG>::kBM;
    constexpr int kBN = pairs ? FusedPairTile<MT>::kBN : kFusedBN;
    constexpr auto kernel = [] {
        if constexpr (pairs) return &fusedPairKernel<MT>;
        else if constexpr (WG == 4) return &fusedKernel<T, 4>;
        else return &fusedWsKernel<T>;
    }();
    constexpr int threads =
        pairs ? FusedPairTile<MT>::kThreads : WG == 4 ? FusedTile<4>::kThreads : FusedWsTile::kThreads;
    constexpr int smem_bytes =
        pairs ? FusedPairTile<MT>::kSmemBytes : WG == 4 ? FusedTile<4>::kSmemBytes : FusedWsTile::kSmemBytes;
    static std::atomic<uint64_t> smem_set_on{0};
    cudaError_t status = allowDynamicSmem(kernel, smem_bytes, dev, smem_set_on);
    if (status != cudaSuccess) return status;
    // The weight reorder (after everything before it on the stream), the transpose beside it (launched with overlap:
    // it reads only the input, and finishes after the reorder), the fused kernel beside the transpose (it fills its
    // first corner table, then waits for both).
    int64_t const prep_chunks = s.groups * int64_t{f.m_tiles} * f.k_blocks * kBM * kFusedBK / 8;
    prepareFusedWeightKernel<T, kBM>
        <<<static_cast<unsigned>(std::min<int64_t>((prep_chunks + 255) / 256, int64_t{dev.sms} * 8)), 256, 0, stream>>>(
            static_cast<T const*>(t.weight), prep, f, prep_chunks);
    status = cudaGetLastError();
    if (status != cudaSuccess) return status;
    T const* nhwc = static_cast<T const*>(t.input);
    if (!s.channels_last) {
        status = launchTranspose<T>(nhwc, nhwc_copy, s.n, s.channels, s.height * s.width, stream, true);
        if (status != cudaSuccess) return status;
        nhwc = nhwc_copy;
    }
    SampleParams const sp = sampleParamsOf(s, s.ld());
    int64_t const tiles = fusedTiles(s), blocks = split.blocks(tiles);
    status = launchKernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(threads), smem_bytes, stream, true, nhwc,
                          static_cast<T const*>(t.offset), static_cast<T const*>(t.mask),
                          static_cast<FusedOperand<T> const*>(prep), static_cast<T const*>(t.bias),
                          static_cast<T*>(t.output), partials, sp, f, split);
    if (status != cudaSuccess || split.whole == tiles) return status;
    int64_t const elements = (tiles - split.whole) * kBM * kBN;
    fusedFixupKernel<T, kBM, kBN>
        <<<static_cast<unsigned>(std::min<int64_t>((elements + 255) / 256, int64_t{dev.sms} * 8)), 256, 0, stream>>>(
            partials, static_cast<T const*>(t.bias), static_cast<T*>(t.output), f, split, elements);
    return cudaGetLastError();
}

// The whole op by the fused kernel (fusedFits holds) in `workspace_bytes` at `base`: the channels-last copy of an NCHW
// input (s.nhwcBytes()), the reordered weight (fusedWeightBytes), the tail's partial sums after it.
template <typename T>
cudaError_t launchFused(OpSizes const& s, TorchtrtExtDeformConv2dTensors const& t, unsigned char* base,
                        int64_t workspace_bytes, Device const& dev, cudaStream_t stream) {
    unsigned char* const scratch = base + s.nhwcBytes();
    int64_t const weight_bytes = fusedWeightBytes(s);
    FusedSplit const split = fusedSplitFor(s, dev, workspace_bytes - s.nhwcBytes() - weight_bytes);
    T* const nhwc_copy = reinterpret_cast<T*>(base);
    auto* const prep = reinterpret_cast<FusedOperand<T>*>(scratch);
    auto* const partials = reinterpret_cast<float*>(scratch + weight_bytes);
    if constexpr (std::is_same_v<T, float>) {
        return fusedPairMT(s) == 2 ? launchFusedAs<T, 2, 2>(s, t, nhwc_copy, prep, partials, split, dev, stream)
                                   : launchFusedAs<T, 2, 1>(s, t, nhwc_copy, prep, partials, split, dev, stream);
    } else {
        return fusedWarpgroups(s) == 4 ? launchFusedAs<T, 4>(s, t, nhwc_copy, prep, partials, split, dev, stream)
                                       : launchFusedAs<T, 2>(s, t, nhwc_copy, prep, partials, split, dev, stream);
    }
}

}  // namespace deform_conv2d_detail
}  // namespace torchtrt_ext
