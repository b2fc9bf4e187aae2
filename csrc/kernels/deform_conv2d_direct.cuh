// DeformConv2d for small problems: the whole op in one kernel (directKernel), included by deform_conv2d.cu after its
// sampling helpers (cornersOf). No transpose, no columns, no separate GEMM, no workspace: on a 1x64x40x40 problem
// the column path's four kernels spent more time in the gaps between their launches than in their work
// (bench/README.md, session 16). Every data type and every compute capability; sums in FP32 with float32's accuracy:
// from sm_80 on the products run on the tensor cores as 3xTF32 (mma.sync m16n8k8, DirectProducts), on Turing as true
// FP32 multiply-adds.
//
// A block computes kDirectPixels output pixels of one image for kDirectOut output channels of one conv group. It walks
// the group's reduction rows in the weight's own order (row r = c' * K + k: channel c' of the group, tap k, so the
// weight is read as it is) in stages of kDirectRows rows: the stage's samples, bilinear in FP32 from the input in its
// own layout (NCHW or channels-last), go to shared memory as [row][pixel], its weight rows as [output channel][row],
// then the block's warps multiply it (DirectProducts: each warp a share of the tile over a share of the stage's rows,
// the shares' sums added in shared memory at the end). Two stages in
// shared memory: the next stage's reads are issued into registers before the current one is multiplied and go to
// shared memory after it, one block barrier a stage. The bilinear corners of every (tap, pixel) of the tile are
// computed once per offset group into a table (cornersOf); stages never cross an offset group, so a conv group
// spanning several offset groups refills the table between them. The bias is added at the end.
//
// What bounds it (ncu at 1x64->64x40x40 float32 with FFMA products, bench/README.md, sessions 18 and 19): the
// L1/shared-memory pipe of the 100 multiprocessors that hold a block (the other 32 idle), the scattered 4-byte corner
// reads of NCHW input (about 14 sectors a warp's read, 63% of them in excess), and the instructions a stage takes. Not
// the latency of a stage's reads (two stages of reads in flight left it as it was) and not the pixels a block takes
// (13-pixel tiles on 124 blocks instead of 16 on 100: the same). Session 21 cut the instructions of a stage by about a
// quarter (tensor-core products, no division and no loop in the sampler's row walk) and prefetches the operands into
// L2: 20.1 to 17.1 us there (bench/README.md).
#pragma once

namespace torchtrt_ext {
namespace deform_conv2d_detail {

constexpr int kDirectPixels = 16;  // output pixels of a block (one image)
constexpr int kDirectOut = 64;     // output channels of a block (one conv group)
constexpr int kDirectRows = 64;    // reduction rows of a stage
constexpr int kDirectThreadPixels = 4;  // a thread's sums on the FFMA path (before sm_80): pixels (side by side) x
constexpr int kDirectThreadOut = 4;     // this many output channels (kDirectOut / kDirectThreadOut apart)
static_assert(kDirectThreadPixels == 4, "a thread's pixels of a row in one vector load");
constexpr int kDirectTileThreads = kDirectPixels / kDirectThreadPixels * (kDirectOut / kDirectThreadOut);
// The rows of a stage are split over this many sets of kDirectTileThreads threads, whose sums are added at the end:
// a small problem's tiles are too few to give the multiprocessors enough warps without it. 4x4 sums a thread: a
// quarter of the shared loads of 2x2 for the same multiply-adds (1x64->64x40x40 float32: 23.0 against 24.1 us).
constexpr int kDirectSplit = 8;
constexpr int kDirectThreads = kDirectTileThreads * kDirectSplit;
static_assert(kDirectThreads == 512, "512 threads a block (__launch_bounds__ and the read patterns assume it)");
constexpr int kDirectThreadSamples = kDirectRows * kDirectPixels / kDirectThreads;  // of a stage, per thread
constexpr int kDirectThreadWeights = kDirectRows * kDirectOut / kDirectThreads;
static_assert(kDirectThreadSamples * kDirectThreads == kDirectRows * kDirectPixels &&
                  kDirectThreadWeights * kDirectThreads == kDirectRows * kDirectOut,
              "a stage's samples and weights spread evenly over the threads");
// A stage's weight is [output channel][row] in shared memory (as in global memory, so 16-byte copies need no
// registers), kDirectWeightPad floats more than a row: the 8 output channels a warp's 32 vector loads of the
// multiplication read then fall in 8 different groups of 4 banks.
constexpr int kDirectWeightPad = 4;
constexpr int kDirectWeightLd = kDirectRows + kDirectWeightPad;
static_assert(kDirectWeightLd % 32 == 4, "consecutive output channels 4 banks apart");
// The corner table holds every tap of the tile: 12 taps at most (3x3, 3x4, 1x7, ...), so that table and stages fit
// the 48 KB a block may take without opting in (which Turing caps at 64 KB); larger kernels take the other routes.
constexpr int kDirectMaxTaps = 12;
constexpr int kDirectTableEntryBytes = sizeof(float4) + sizeof(int4);  // a (tap, pixel): corner weights, offsets
constexpr int kDirectStageFloats = kDirectRows * kDirectPixels + kDirectOut * kDirectWeightLd;  // samples + weight
static_assert(kDirectMaxTaps * kDirectPixels * kDirectTableEntryBytes + 2 * kDirectStageFloats * 4 <= 48 * 1024,
              "the largest table and the stages fit 48 KB");

struct DirectParams {
    int32_t pixel_stride, channel_stride;  // input elements between pixels and between channels of an image
    int32_t image_elements;                // input elements of an image
    int32_t per_group_out, out_channels, m_tiles;  // m_tiles: blocks of kDirectOut output channels per conv group
    int32_t weight_copies;  // 1: float32 weight, 16-byte aligned, every stage's rows in whole 4-row chunks
};

// v itself, but opaque to the compiler, so that it is kept in a register: without it, ptxas rebuilt the per-thread
// pointers from the kernel's parameters at every load (8 instructions a load instead of 2).
template <typename V>
__device__ __forceinline__ V inRegister(V v) {
    static_assert(sizeof(V) == 8 || sizeof(V) == 4, "a 32- or 64-bit value");
    if constexpr (sizeof(V) == 8) {
        uint64_t bits;
        __builtin_memcpy(&bits, &v, 8);
        asm volatile("" : "+l"(bits));
        __builtin_memcpy(&v, &bits, 8);
    } else {
        uint32_t bits;
        __builtin_memcpy(&bits, &v, 4);
        asm volatile("" : "+r"(bits));
        __builtin_memcpy(&v, &bits, 4);
    }
    return v;
}

// 4 consecutive floats of shared memory (16-byte aligned) in one load.
__device__ __forceinline__ void loadFloats(float const* src, float (&dst)[4]) {
    float4 const v = *reinterpret_cast<float4 const*>(src);
    dst[0] = v.x, dst[1] = v.y, dst[2] = v.z, dst[3] = v.w;
}

// Where pixel `pixel` of stage row `row` sits in a stage's samples ([row][pixel], kDirectPixels floats a row): the two
// halves of 8 pixels swap places on rows 2 and 3 of every 4, so that a warp's tensor-core fragment reads (rows t and
// pixels g of a k8 step: 4 rows x 8 pixels) fall in 32 different banks, where rows 0 and 2 would share theirs; groups
// of 4 pixels stay whole for the FFMA path's vector reads.
__host__ __device__ constexpr int samplePixel(int row, int pixel) { return pixel ^ (row & 2) * 4; }
static_assert(kDirectPixels == 16, "samplePixel swaps halves of 8 pixels");

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
// A stage's products before sm_80 (no TF32 tensor cores): every thread multiplies kDirectThreadPixels pixels
// 4 * tp + i by kDirectThreadOut output channels tm + kThreadOutStep * j of the tile (a warp's 8 values of tm: 8 groups
// of banks) over the split's rows [split * kSplitRows, (split + 1) * kSplitRows) of the stage, 4 rows at a time, in
// true FP32 multiply-adds (4x4 sums a thread: a quarter of the shared loads of 2x2 for the same multiply-adds).
struct DirectProducts {
    static constexpr int kSplits = kDirectSplit;
    static constexpr int kSplitRows = kDirectRows / kDirectSplit;
    static_assert(kSplitRows * kDirectSplit == kDirectRows && kSplitRows % 4 == 0, "whole 4-row chunks a split");
    static constexpr int kThreadOutStep = kDirectOut / kDirectThreadOut;
    static constexpr int kThreadSums = kDirectThreadPixels * kDirectThreadOut;
    static_assert(kThreadSums * kDirectTileThreads == kDirectPixels * kDirectOut, "the threads' sums are the tile");
    int split, ct, tp, tm;
    float acc[kDirectThreadPixels][kDirectThreadOut] = {};

    __device__ explicit DirectProducts(int tid)
        : split(tid / kDirectTileThreads), ct(tid % kDirectTileThreads), tp(ct % (kDirectPixels / kDirectThreadPixels)),
          tm(ct / (kDirectPixels / kDirectThreadPixels)) {}

    // The products of the stage whose samples and weights start at `samples` and `weights`.
    __device__ __forceinline__ void multiply(float const* samples, float const* weights) {
        float const* s = samples + split * kSplitRows * kDirectPixels;
        float const* w = weights + tm * kDirectWeightLd + split * kSplitRows;
#pragma unroll
        for (int r4 = 0; r4 < kSplitRows; r4 += 4) {
            float a[4][kDirectThreadPixels], b[kDirectThreadOut][4];
#pragma unroll
            for (int q = 0; q < 4; ++q) loadFloats(s + (r4 + q) * kDirectPixels + samplePixel(q, 4 * tp), a[q]);
#pragma unroll
            for (int j = 0; j < kDirectThreadOut; ++j) loadFloats(w + j * kThreadOutStep * kDirectWeightLd + r4, b[j]);
#pragma unroll
            for (int q = 0; q < 4; ++q)
#pragma unroll
                for (int i = 0; i < kDirectThreadPixels; ++i)
#pragma unroll
                    for (int j = 0; j < kDirectThreadOut; ++j) acc[i][j] = fmaf(a[q][i], b[j][q], acc[i][j]);
        }
    }
    // The sums into partial[split * tile + e], e = sum * kDirectTileThreads + thread of the split (consecutive
    // threads: consecutive elements, so neither these stores nor the final loads share a bank).
    __device__ __forceinline__ void store(float* partial) const {
#pragma unroll
        for (int i = 0; i < kDirectThreadPixels; ++i)
#pragma unroll
            for (int j = 0; j < kDirectThreadOut; ++j)
                partial[(split * kThreadSums + i * kDirectThreadOut + j) * kDirectTileThreads + ct] = acc[i][j];
    }
    // The tile pixel pl and output channel ml of element e of a split's sums.
    __device__ static void place(int e, int& pl, int& ml) {
        int const owner = e % kDirectTileThreads, sum = e / kDirectTileThreads;
        pl = kDirectThreadPixels * (owner % (kDirectPixels / kDirectThreadPixels)) + sum / kDirectThreadOut;
        ml = owner / (kDirectPixels / kDirectThreadPixels) + kThreadOutStep * (sum % kDirectThreadOut);
    }
};
#else
// A stage's products from sm_80 on, on the tensor cores: warp (mw, ks) multiplies kWarpTilesM m16 tiles of output
// channels from m0 = 16 * kWarpTilesM * mw by both n8 tiles of pixels over the stage's rows [ks * kRows, (ks + 1) *
// kRows), mma.sync m16n8k8 TF32 three times a step (3xTF32: a_lo * b_hi + a_hi * b_lo + a_hi * b_hi, splits in
// registers, as the column path's GEMM) into a stage's partial sums that are then added to the FP32 accumulators:
// float32's accuracy (relative error against float64 6.2e-8 at 1x64->64x40x40, where the FFMA products gave 7.6e-8)
// at about 60% of the FFMA products' instructions.
struct DirectProducts {
    static constexpr int kWarpTilesM = 2;  // each sample fragment split once for two m16 tiles
    static constexpr int kWarpsM = kDirectOut / 16 / kWarpTilesM;
    static constexpr int kTilesN = kDirectPixels / 8;
    static constexpr int kSplits = kDirectThreads / 32 / kWarpsM;
    static constexpr int kRows = kDirectRows / kSplits;
    static_assert(kSplits * kWarpsM * 32 == kDirectThreads && kRows * kSplits == kDirectRows && kRows % 8 == 0,
                  "every warp whole m16 tiles and whole k8 steps of a stage's rows");
    int m0, ks, g, t;
    float acc[kWarpTilesM][kTilesN][4] = {};

    __device__ explicit DirectProducts(int tid)
        : m0(16 * kWarpTilesM * (tid / 32 % kWarpsM)), ks(tid / 32 / kWarpsM), g(tid % 32 >> 2), t(tid % 4) {}

    // The products of the stage whose samples and weights start at `samples` and `weights`. Fragments (PTX's
    // m16n8k8 .tf32 layout): A (weights) rows g, g + 8 and columns t, t + 4; B (samples) rows t, t + 4 and column g. A
    // k8 step starts on a multiple of 4 rows, so rows t and t + 4 of it have row bits t for samplePixel.
    __device__ __forceinline__ void multiply(float const* samples, float const* weights) {
        float const* w = weights + (m0 + g) * kDirectWeightLd + ks * kRows + t;
        float const* s = samples + (ks * kRows + t) * kDirectPixels;
        float part[kWarpTilesM][kTilesN][4] = {};
#pragma unroll
        for (int k8 = 0; k8 < kRows; k8 += 8) {
            uint32_t bhi[kTilesN][2], blo[kTilesN][2];
#pragma unroll
            for (int nt = 0; nt < kTilesN; ++nt) {
                int const pixel = samplePixel(t, 8 * nt + g);
                splitTf32(s[k8 * kDirectPixels + pixel], bhi[nt][0], blo[nt][0]);
                splitTf32(s[(k8 + 4) * kDirectPixels + pixel], bhi[nt][1], blo[nt][1]);
            }
#pragma unroll
            for (int i = 0; i < kWarpTilesM; ++i) {
                float const* a = w + 16 * i * kDirectWeightLd + k8;
                uint32_t ahi[4], alo[4];
                splitTf32(a[0], ahi[0], alo[0]);
                splitTf32(a[8 * kDirectWeightLd], ahi[1], alo[1]);
                splitTf32(a[4], ahi[2], alo[2]);
                splitTf32(a[8 * kDirectWeightLd + 4], ahi[3], alo[3]);
#pragma unroll
                for (int nt = 0; nt < kTilesN; ++nt) {
                    mma1688(part[i][nt], alo, bhi[nt]);
                    mma1688(part[i][nt], ahi, blo[nt]);
                    mma1688(part[i][nt], ahi, bhi[nt]);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < kWarpTilesM; ++i)
#pragma unroll
            for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
                for (int r = 0; r < 4; ++r) acc[i][nt][r] += part[i][nt][r];
    }
    // The sums into partial[ks * tile + ml * kDirectPixels + pl] (C fragment: rows g, g + 8, columns 2t, 2t + 1).
    __device__ __forceinline__ void store(float* partial) const {
        float* const own = partial + ks * kDirectPixels * kDirectOut;
#pragma unroll
        for (int i = 0; i < kWarpTilesM; ++i)
#pragma unroll
            for (int nt = 0; nt < kTilesN; ++nt)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    *reinterpret_cast<float2*>(own + (m0 + 16 * i + g + 8 * h) * kDirectPixels + 8 * nt + 2 * t) =
                        make_float2(acc[i][nt][2 * h], acc[i][nt][2 * h + 1]);
                }
    }
    // The tile pixel pl and output channel ml of element e of a split's sums.
    __device__ static void place(int e, int& pl, int& ml) {
        pl = e % kDirectPixels;
        ml = e / kDirectPixels;
    }
};
#endif

// Block `block` of `blocks`' share of an L2 prefetch of the `bytes` bytes at p: its 128-byte lines block, block +
// blocks, ..., one a thread.
__device__ __forceinline__ void prefetchShareL2(void const* p, int64_t bytes, int64_t block, int64_t blocks) {
    char const* const c = static_cast<char const*>(p);
    for (int64_t line = block + int64_t{threadIdx.x} * blocks; line * 128 < bytes; line += int64_t{blockDim.x} * blocks)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(c + line * 128));
}

inline size_t directSmemBytes(int64_t taps) {
    return static_cast<size_t>(taps) * kDirectPixels * kDirectTableEntryBytes + 2 * kDirectStageFloats * sizeof(float);
}

// Block (x, y, z) = (pixel tile, conv group * m_tiles + output-channel tile, image).
template <typename T>
__global__ void __launch_bounds__(kDirectThreads)
    directKernel(T const* __restrict__ input, T const* __restrict__ offset, T const* __restrict__ mask,
                 T const* __restrict__ weight, T const* __restrict__ bias, T* __restrict__ out, SampleParams const p,
                 DirectParams const d) {
    extern __shared__ float4 direct_smem[];
    // The corner table, [tap][pixel], as two arrays (the corners' weights, their element offsets): a warp's 16-byte
    // reads of either are then consecutive (one 32-byte struct a pixel took twice the shared-memory wavefronts).
    int const taps = static_cast<int>(p.taps), pixels = static_cast<int>(p.pixels);
    float4* const table_w = direct_smem;
    auto* const table_at = reinterpret_cast<int4*>(table_w + taps * kDirectPixels);
    float* const samples = reinterpret_cast<float*>(table_at + taps * kDirectPixels);  // [stage][row][pixel]
    float* const weights = samples + 2 * kDirectRows * kDirectPixels;             // [stage][output channel][row]
    int const tid = threadIdx.x;
    int const img = blockIdx.z;
    int const group = static_cast<int>(blockIdx.y) / d.m_tiles;
    int const m0 = (static_cast<int>(blockIdx.y) - group * d.m_tiles) * kDirectOut;
    int const m_here = min(kDirectOut, d.per_group_out - m0);
    int const p0 = static_cast<int>(blockIdx.x) * kDirectPixels;
    int const per_group = static_cast<int>(p.per_group), per_og = static_cast<int>(p.per_offset_group);
    int const rows = per_group * taps;
    int const first_channel = group * per_group;  // of the conv group, among all input channels
    T const* const src = input + static_cast<int64_t>(img) * d.image_elements +
                         static_cast<int64_t>(first_channel) * d.channel_stride;
    T const* const wsrc = weight + static_cast<int64_t>(group * d.per_group_out + m0) * rows;

    // First the block's share of an L2 prefetch of the input, offsets, mask and weight (the grid's blocks together
    // fetch all of them once), so that the corner reads of every stage find their lines in L2 instead of waiting for
    // DRAM where a stage first touches a channel: after an L2 flush, 1x64->64x40x40 float32 went from 17.9 to 17.1 us,
    // and every size of bench/deform_conv_routes.py's ladder gained 0.4-1.5 us (bench/README.md, session 21).
    {
        int64_t const blocks = int64_t{gridDim.x} * gridDim.y * gridDim.z;
        int64_t const block = blockIdx.x + int64_t{gridDim.x} * (blockIdx.y + int64_t{gridDim.y} * blockIdx.z);
        int64_t const planes = int64_t{gridDim.z} * p.offset_groups * p.taps * p.pixels;  // of the mask
        prefetchShareL2(input, int64_t{gridDim.z} * d.image_elements * sizeof(T), block, blocks);
        prefetchShareL2(offset, 2 * planes * sizeof(T), block, blocks);
        if (mask != nullptr) prefetchShareL2(mask, planes * sizeof(T), block, blocks);
        prefetchShareL2(weight, int64_t{d.out_channels} * p.per_group * p.taps * sizeof(T), block, blocks);
    }
    auto const fill_table = [&](int og) {
        int const plane = img * static_cast<int>(p.offset_groups) + og;
        for (int e = tid; e < taps * kDirectPixels; e += kDirectThreads) {
            int const k = e / kDirectPixels, pix = p0 + e % kDirectPixels;
            Corners<int32_t> c{{0.f, 0.f, 0.f, 0.f}, {-1, -1, -1, -1}};  // past the image's pixels: zeros
            if (pix < pixels) {
                int const oy = pix / static_cast<int>(p.out_w);
                c = cornersOf<T, int32_t>(offset, mask, p, plane, pix, oy, pix - oy * static_cast<int>(p.out_w), k,
                                          d.pixel_stride);
            }
            table_w[e] = make_float4(c.w[0], c.w[1], c.w[2], c.w[3]);
            table_at[e] = make_int4(c.at[0], c.at[1], c.at[2], c.at[3]);
        }
    };
    // The end of the offset group holding row r (rows of one offset group are whole channels of it).
    auto const og_of = [&](int r) { return (first_channel + r / taps) / per_og; };
    auto const og_end = [&](int og) { return min(rows, ((og + 1) * per_og - first_channel) * taps); };
    // A stage's global reads go to registers first (load_stage: the rows [r0, r1); the rows after r1 and the output
    // channels past the group's read as zeros), issued before the multiplication of the stage before and stored to
    // shared memory after it (store_stage), so their latency hides behind it. A float32 weight whose stages are whole
    // 16-byte chunks goes straight to shared memory instead (cp.async, sm_80 on: no registers, no stores, a quarter of
    // the load instructions), waited for before the stage's barrier.
    // Thread tid samples pixel sp of rows srow, srow + kSampleRowStep, ... of a stage (consecutive threads: consecutive
    // pixels of a row) and reads the weights of row wr of output channels wm, wm + kWeightOutStep, ... (a warp: 32
    // consecutive rows of one output channel), or copies the 4-row chunks wq of output channels wc, wc + kCopyOutStep:
    // 32-bit offsets from per-thread bases.
    constexpr int kSampleRowStep = kDirectThreads / kDirectPixels;
    static_assert(kSampleRowStep % 4 == 0, "a thread's sample rows share their samplePixel row bits");
    constexpr int kWeightOutStep = kDirectThreads / kDirectRows;
    static_assert(kWeightOutStep * kDirectThreadWeights == kDirectOut, "the weight reads cover the tile's channels");
    constexpr int kChunks = kDirectRows / 4, kCopyOutStep = kDirectThreads / kChunks;
    constexpr int kThreadCopies = kDirectOut / kCopyOutStep;
    static_assert(kCopyOutStep * kThreadCopies == kDirectOut, "the weight copies cover the tile's channels");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    bool const copies = false;  // no cp.async before sm_80
#else
    bool const copies = std::is_same_v<T, float> && d.weight_copies != 0;
#endif
    int const sp = tid % kDirectPixels, srow = tid / kDirectPixels;
    int const wr = tid % kDirectRows, wm = tid / kDirectRows;
    int const wq = 4 * (tid % kChunks), wc = tid / kChunks;
    T const* const wthread = inRegister(wsrc + (copies ? wc * rows + wq : wm * rows + wr));
    int const wstep = inRegister((copies ? kCopyOutStep : kWeightOutStep) * rows);
    T const* const sthread = inRegister(src);
    int const channel_stride = inRegister(d.channel_stride);
    struct StageRegs {
        float corner_w[kDirectThreadSamples][4];
        T corner_v[kDirectThreadSamples][4];
        T weight_v[kDirectThreadWeights];
    };
    auto const stage_samples = [&](int stage) { return samples + stage * kDirectRows * kDirectPixels; };
    auto const stage_weights = [&](int stage) { return weights + stage * kDirectOut * kDirectWeightLd; };
    // The thread's first sample row of the stage starting at row `next` is c * taps + k: a full stage leaves them right
    // for the next one, so the division runs only after a shorter stage (the end of an offset group); the steps of
    // kSampleRowStep rows add precomputed quotient and remainder instead of a loop.
    int const step_c = kSampleRowStep / taps, step_k = kSampleRowStep - step_c * taps;
    int next = 0, c = srow / taps, k = srow - c * taps;
    auto const load_stage = [&](StageRegs& g, int r0, int r1, int stage) {
        int r = r0 + srow;
        if (r0 != next) c = r / taps, k = r - c * taps;  // the same for every thread
        next = r0 + kDirectThreadSamples * kSampleRowStep;
#pragma unroll
        for (int i = 0; i < kDirectThreadSamples; ++i) {
            float4 cw = make_float4(0.f, 0.f, 0.f, 0.f);
            int4 ca = make_int4(-1, -1, -1, -1);
            if (r < r1) cw = table_w[k * kDirectPixels + sp], ca = table_at[k * kDirectPixels + sp];
            float const w4[4] = {cw.x, cw.y, cw.z, cw.w};
            int const at4[4] = {ca.x, ca.y, ca.z, ca.w};
            int const base = c * channel_stride;
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                g.corner_w[i][q] = w4[q];
                g.corner_v[i][q] = at4[q] >= 0 ? __ldg(sthread + (base + at4[q])) : fromF32<T>(0.f);  // outside: not read
            }
            r += kSampleRowStep;
            c += step_c, k += step_k;
            if (k >= taps) k -= taps, ++c;
        }
        if (copies) {
            float* const w = stage_weights(stage) + wc * kDirectWeightLd + wq;
            bool const row_in = r0 + wq < r1;  // r1 - r0 is a multiple of 4 here
#pragma unroll
            for (int j = 0; j < kThreadCopies; ++j) {
                bool const ok = row_in && wc + j * kCopyOutStep < m_here;
                cpAsync16(w + j * kCopyOutStep * kDirectWeightLd, ok ? wthread + r0 + j * wstep : wthread, ok);
            }
            cpAsyncCommit();
            return;
        }
        bool const row_in = r0 + wr < r1;
#pragma unroll
        for (int j = 0; j < kDirectThreadWeights; ++j) {
            g.weight_v[j] = row_in && wm + j * kWeightOutStep < m_here ? wthread[r0 + j * wstep] : fromF32<T>(0.f);
        }
    };
    auto const store_stage = [&](StageRegs const& g, int stage) {
        float* s = stage_samples(stage) + srow * kDirectPixels + samplePixel(srow, sp);
#pragma unroll
        for (int i = 0; i < kDirectThreadSamples; ++i) {
            float v = 0.f;
#pragma unroll
            for (int q = 0; q < 4; ++q) v += g.corner_w[i][q] * toF32(g.corner_v[i][q]);
            s[i * kDirectThreads] = v;
        }
        if (copies) {
            cpAsyncWait<0>();
            return;
        }
        float* w = stage_weights(stage) + wm * kDirectWeightLd + wr;
#pragma unroll
        for (int j = 0; j < kDirectThreadWeights; ++j) w[j * kWeightOutStep * kDirectWeightLd] = toF32(g.weight_v[j]);
    };
    // The next stage to read into shared stage `stage`: its rows [issued, end), never across an offset group (whose
    // table is refilled first: nobody reads the table then, the stages before read it when their reads were issued).
    // False past the last row.
    int og = og_of(0), issued = 0;
    auto const issue = [&](StageRegs& g, int stage) {
        if (issued >= rows) return false;
        if (issued == og_end(og)) {  // the same for every thread: the barrier is reached by all
            og = og_of(issued);
            fill_table(og);
            __syncthreads();
        }
        int const end = min(issued + kDirectRows, og_end(og));
        load_stage(g, issued, end, stage);
        issued = end;
        return true;
    };

    StageRegs g;
    fill_table(og);
    __syncthreads();
    issue(g, 0);  // rows >= 1: launchDirect runs only where the group has input channels
    store_stage(g, 0);
    __syncthreads();
    DirectProducts products(tid);
    for (int stage = 0;; stage ^= 1) {  // shared stage `stage` holds the rows to multiply now
        bool const more = issue(g, stage ^ 1);
        products.multiply(stage_samples(stage), stage_weights(stage));
        if (more) store_stage(g, stage ^ 1);
        __syncthreads();  // this stage is read; the next one is written
        if (!more) break;
    }
    // Every split's sums go to shared memory (the stages are free now), each thread adds up the splits' sums of the
    // tile elements e it owns (DirectProducts::place) and stores the output value.
    constexpr int kTile = kDirectPixels * kDirectOut;
    static_assert(DirectProducts::kSplits * kTile <= 2 * kDirectStageFloats, "the partial sums fit the stages");
    float* const partial = samples;
    products.store(partial);
    __syncthreads();
    for (int e = tid; e < kTile; e += kDirectThreads) {
        int pl, ml;
        DirectProducts::place(e, pl, ml);
        int const pix = p0 + pl;
        if (ml >= m_here || pix >= pixels) continue;
        float v = 0.f;
#pragma unroll
        for (int set = 0; set < DirectProducts::kSplits; ++set) v += partial[set * kTile + e];
        int const channel = group * d.per_group_out + m0 + ml;
        if (bias != nullptr) v += toF32(bias[channel]);
        out[(static_cast<int64_t>(img) * d.out_channels + channel) * pixels + pix] = fromF32<T>(v);
    }
}

// TORCHTRT_EXT_DCN_DIRECT: "0" never runs the direct kernel, "1" wherever it applies (the tests reach every case
// through it), anything else or unset lets directFits choose by the size. Read once per process.
inline RouteMode directMode() {
    static RouteMode const mode = routeModeOf("TORCHTRT_EXT_DCN_DIRECT");
    return mode;
}

// Blocks of kDirectOut output channels a conv group takes.
inline int64_t directOutTiles(OpSizes const& s) { return (s.out_channels / s.groups + kDirectOut - 1) / kDirectOut; }

// True when the direct kernel applies: a kernel of at most kDirectMaxTaps taps, 32-bit indices over the input, the
// offsets and the output, and a grid within CUDA's limits.
inline bool directApplies(OpSizes const& s) {
    constexpr int64_t kNarrow = 0x7fffffff;
    int64_t const m_tiles = directOutTiles(s);
    return directMode() != RouteMode::kOff && s.taps() <= kDirectMaxTaps &&
           s.n * s.channels * s.height * s.width <= kNarrow && s.n * 2 * s.offset_groups * s.taps() * s.pixels() <= kNarrow &&
           s.n * s.out_channels * s.pixels() <= kNarrow && s.out_channels * s.channels / s.groups * s.taps() <= kNarrow &&
           s.n <= kMaxGridYZ && s.groups * m_tiles <= kMaxGridYZ;
}

// Multiply-adds (output values times reduction rows) up to which the direct kernel is the default: where it measured
// faster than the other routes on the H200 (bench/deform_conv_routes.py, bench/README.md; session 21's kernel, before
// its L2 prefetch, which took 0.4-1.5 us more off, against the other routes in the same run). NCHW float32: 59 M
// (1x64->64x40x40) 18.2 against 26.0 us, 118 M 31.9 against 29.8; NCHW fp16/bf16: 2 M 9.6 against 14.6, 15 M 12.5
// against 15.2, 59 M 18.1 against 16.4 (the column path's fp16 GEMM is fast); channels-last float32: 2 M 11.9 against
// 16.9, 15 M 20.2 against 17.2 (its reads of one channel at 16 pixels are 16 sectors); channels-last fp16/bf16: 2 M
// 10.6 against 11.4, 15 M 16.8 against 11.5: left to the other routes.
inline int64_t directMaxMacs(OpSizes const& s) {
    if (s.channels_last) return s.elem == 4 ? int64_t{1} << 22 : 0;
    return s.elem == 4 ? int64_t{1} << 26 : int64_t{1} << 24;
}

// True when the direct kernel runs the op: it applies and, unless TORCHTRT_EXT_DCN_DIRECT says otherwise, the
// problem is small (directMaxMacs).
inline bool directFits(OpSizes const& s) {
    if (!directApplies(s)) return false;
    return directMode() == RouteMode::kWherever ||
           s.n * s.pixels() * s.out_channels * (s.channels / s.groups) * s.taps() <= directMaxMacs(s);
}

// True when the weight's stages go to shared memory in 16-byte copies: float32, 16-byte aligned, and every stage
// starts and ends on a 4-row chunk (conv groups and offset groups of whole chunks: a multiple of 4 rows each).
inline bool directWeightCopies(OpSizes const& s, void const* weight) {
    return s.elem == 4 && reinterpret_cast<uintptr_t>(weight) % 16 == 0 && s.channels / s.groups * s.taps() % 4 == 0 &&
           s.channels / s.offset_groups * s.taps() % 4 == 0;
}

template <typename T>
cudaError_t launchDirect(OpSizes const& s, TorchtrtExtDeformConv2dTensors const& t, cudaStream_t stream) {
    int64_t const pixels = s.pixels();
    SampleParams const sp = sampleParamsOf(s, s.ld());
    int64_t const plane = s.height * s.width;
    int64_t const per_group_out = s.out_channels / s.groups;
    DirectParams const d{static_cast<int32_t>(s.channels_last ? s.channels : 1),
                         static_cast<int32_t>(s.channels_last ? 1 : plane),
                         static_cast<int32_t>(s.channels * plane), static_cast<int32_t>(per_group_out),
                         static_cast<int32_t>(s.out_channels),
                         static_cast<int32_t>(directOutTiles(s)),
                         directWeightCopies(s, t.weight) ? 1 : 0};
    dim3 const grid(static_cast<unsigned>((pixels + kDirectPixels - 1) / kDirectPixels),
                    static_cast<unsigned>(s.groups * d.m_tiles), static_cast<unsigned>(s.n));
    directKernel<T><<<grid, kDirectThreads, directSmemBytes(s.taps()), stream>>>(
        static_cast<T const*>(t.input), static_cast<T const*>(t.offset), static_cast<T const*>(t.mask),
        static_cast<T const*>(t.weight), static_cast<T const*>(t.bias), static_cast<T*>(t.output), sp, d);
    return cudaGetLastError();
}

}  // namespace deform_conv2d_detail
}  // namespace torchtrt_ext
