// EfficientNMS kernels behind the extern "C" launchers of efficient_nms.h.
//
// Three steps, all on the caller's stream, no host synchronization:
//   1. filter    every (image, anchor, class) score above the threshold (after the sigmoid) and not of the background
//                class becomes a 64-bit key: the score's bits (positive, so they order as integers) over
//                0xFFFFFFFF - (anchor * C + class), so that one descending sort orders by score, then lower pair index;
//                keys are appended to the image's segment with an atomic counter.
//   2. sort      cub's segmented radix sort (DoubleBuffer), one segment per image (its counter gives its end).
//   3. suppress  one block per image walks its sorted keys 256 at a time: each thread takes one candidate, drops it
//                if a box already kept overlaps it (IoU > threshold, same class unless class-agnostic), builds its row
//                of the chunk's overlap bitmask, then one thread resolves the chunk greedily on the bitmask (the
//                torchvision scheme) and the kept ones are written out; the walk stops at K kept.
// IoU uses round-to-nearest intrinsics (no contraction into FMAs), so it is bit-identical to the eager op's float32
// PyTorch math and to onnxruntime's NonMaxSuppression.
#include "kernels/efficient_nms.h"
#include "kernels/numeric.cuh"

#include <cub/cub.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace torchtrt_ext {
namespace efficient_nms_detail {

using Params = TorchtrtExtEfficientNmsParams;

constexpr int kThreads = 256;           // filter and offsets kernels
constexpr int kChunk = 256;             // candidates one suppress block examines together (its thread count)
constexpr int kWords = kChunk / 32;     // 32-bit words of one bitmask row
constexpr int64_t kMaxFilterBlocks = 65536;
constexpr size_t kAlign = 256;
constexpr int64_t kMaxItems = INT32_MAX;  // cub's segment offsets are int32
constexpr size_t kSortReserve = 4096;      // cub's temporary for a DoubleBuffer segmented sort (a few hundred bytes)

//! Where each buffer sits in the workspace, and its total size.
struct Layout {
    size_t counts = 0;
    size_t begins = 0;
    size_t ends = 0;
    size_t keysA = 0;
    size_t keysB = 0;
    size_t keptBoxes = 0;
    size_t keptClasses = 0;
    size_t sortTemp = 0;
    size_t total = 0;
};

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

bool validParams(Params const& p) {
    bool const sizes = p.batch >= 0 && p.anchors >= 0 && p.classes >= 0 && p.max_output_boxes >= 1;
    bool const fields = (p.score_activation == 0 || p.score_activation == 1) &&
                        (p.class_agnostic == 0 || p.class_agnostic == 1) && (p.box_coding == 0 || p.box_coding == 1) &&
                        p.score_threshold >= 0.0F && p.score_threshold <= 1.0F && p.iou_threshold >= 0.0F &&
                        p.iou_threshold <= 1.0F;
    if (!sizes || !fields) return false;
    if (p.anchors != 0 && p.classes > kMaxItems / p.anchors) return false;
    int64_t const pairs = p.anchors * p.classes;
    return pairs == 0 || p.batch <= kMaxItems / pairs;
}

//! The buffers of `p` (valid). Host arithmetic only: the plugin asks for it while building, where there may be no
//! GPU, so cub is not asked here; sorting a DoubleBuffer needs only a small temporary (checked at launch).
Layout makeLayout(Params const& p) {
    int64_t const items = p.batch * p.anchors * p.classes;
    int64_t const keptSlots = p.batch * p.max_output_boxes;
    Layout l;
    size_t offset = 0;
    auto take = [&offset](size_t bytes) {
        size_t const at = offset;
        offset += aligned(bytes);
        return at;
    };
    l.counts = take(sizeof(int32_t) * p.batch);
    l.begins = take(sizeof(int32_t) * p.batch);
    l.ends = take(sizeof(int32_t) * p.batch);
    l.keysA = take(sizeof(uint64_t) * items);
    l.keysB = take(sizeof(uint64_t) * items);
    l.keptBoxes = take(sizeof(float4) * keptSlots);
    l.keptClasses = take(sizeof(int32_t) * keptSlots);
    l.sortTemp = take(kSortReserve);
    l.total = offset;
    return l;
}

__device__ __forceinline__ float sigmoid(float x) { return 1.0F / (1.0F + expf(-x)); }

//! IoU of two corner boxes (corners put in order first); 0 when the intersection, an area or the union is not > 0.
__device__ __forceinline__ float iou(float4 a, float4 b) {
    float const ax1 = fminf(a.x, a.z), ax2 = fmaxf(a.x, a.z), ay1 = fminf(a.y, a.w), ay2 = fmaxf(a.y, a.w);
    float const bx1 = fminf(b.x, b.z), bx2 = fmaxf(b.x, b.z), by1 = fminf(b.y, b.w), by2 = fmaxf(b.y, b.w);
    float const width = fmaxf(__fsub_rn(fminf(ax2, bx2), fmaxf(ax1, bx1)), 0.0F);
    float const height = fmaxf(__fsub_rn(fminf(ay2, by2), fmaxf(ay1, by1)), 0.0F);
    float const inter = __fmul_rn(width, height);
    float const areaA = __fmul_rn(__fsub_rn(ax2, ax1), __fsub_rn(ay2, ay1));
    float const areaB = __fmul_rn(__fsub_rn(bx2, bx1), __fsub_rn(by2, by1));
    float const uni = __fsub_rn(__fadd_rn(areaA, areaB), inter);
    if (!(inter > 0.0F) || !(areaA > 0.0F) || !(areaB > 0.0F) || !(uni > 0.0F)) return 0.0F;
    return __fdiv_rn(inter, uni);
}

//! Box `row` of boxes [rows, 4] as float32 corners.
template <typename T>
__device__ __forceinline__ float4 loadCorners(T const* boxes, int64_t row, int32_t coding) {
    T const* b = boxes + row * 4;
    float const v0 = toF32(b[0]), v1 = toF32(b[1]), v2 = toF32(b[2]), v3 = toF32(b[3]);
    if (coding == 0) return make_float4(v0, v1, v2, v3);
    float const hw = __fmul_rn(v2, 0.5F), hh = __fmul_rn(v3, 0.5F);
    return make_float4(__fsub_rn(v0, hw), __fsub_rn(v1, hh), __fadd_rn(v0, hw), __fadd_rn(v1, hh));
}

template <typename T>
__global__ void filterKernel(Params p, T const* __restrict__ scores, int32_t* __restrict__ counts,
                             uint64_t* __restrict__ keys) {
    int64_t const pairs = p.anchors * p.classes;
    int64_t const items = p.batch * pairs;
    for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < items;
         idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        float score = toF32(scores[idx]);
        if (p.score_activation) score = sigmoid(score);
        int64_t const image = idx / pairs;
        int64_t const pair = idx - image * pairs;
        int64_t const cls = pair % p.classes;
        if (score > p.score_threshold && cls != p.background_class) {
            int32_t const slot = atomicAdd(counts + image, 1);
            uint64_t const rank = 0xFFFFFFFFull - static_cast<uint64_t>(pair);
            keys[image * pairs + slot] = (static_cast<uint64_t>(__float_as_uint(score)) << 32) | rank;
        }
    }
}

__global__ void segmentsKernel(int64_t batch, int64_t pairs, int32_t const* counts, int32_t* begins, int32_t* ends) {
    int64_t const image = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (image < batch) {
        begins[image] = static_cast<int32_t>(image * pairs);
        ends[image] = static_cast<int32_t>(image * pairs + counts[image]);
    }
}

template <typename T>
__global__ void __launch_bounds__(kChunk) suppressKernel(
    Params p, T const* __restrict__ boxes, int32_t const* __restrict__ counts, uint64_t const* __restrict__ sorted,
    float4* __restrict__ keptBoxes, int32_t* __restrict__ keptClasses, int32_t* __restrict__ numDetections,
    T* __restrict__ outBoxes, T* __restrict__ outScores, int32_t* __restrict__ outClasses) {
    __shared__ float4 sBox[kChunk];
    __shared__ float sScore[kChunk];
    __shared__ int32_t sClass[kChunk];
    __shared__ uint32_t sAlive[kWords];
    __shared__ uint32_t sMask[kChunk][kWords];
    __shared__ int32_t sKeep[kChunk];
    __shared__ int32_t sAdded;

    int64_t const image = blockIdx.x;
    int const tid = threadIdx.x;
    int32_t const k = p.max_output_boxes;
    int64_t const pairs = p.anchors * p.classes;
    int32_t const n = counts[image];
    uint64_t const* keys = sorted + image * pairs;
    float4* kept = keptBoxes + image * k;
    int32_t* keptClass = keptClasses + image * k;
    int32_t nKept = 0;  // the same in every thread

    for (int32_t base = 0; base < n && nKept < k; base += kChunk) {
        int32_t const i = base + tid;
        bool alive = i < n;
        float4 box = make_float4(0.0F, 0.0F, 0.0F, 0.0F);
        float score = 0.0F;
        int32_t cls = -1;
        if (alive) {
            uint64_t const key = keys[i];
            score = __uint_as_float(static_cast<uint32_t>(key >> 32));
            int64_t const pair = static_cast<int64_t>(0xFFFFFFFFull - (key & 0xFFFFFFFFull));
            cls = static_cast<int32_t>(pair % p.classes);
            box = loadCorners(boxes, image * p.anchors + pair / p.classes, p.box_coding);
        }
        for (int32_t j = 0; j < nKept && alive; ++j) {
            if ((p.class_agnostic || keptClass[j] == cls) && iou(box, kept[j]) > p.iou_threshold) alive = false;
        }
        sBox[tid] = box;
        sScore[tid] = score;
        sClass[tid] = cls;
        uint32_t const ballot = __ballot_sync(0xFFFFFFFFu, alive);
        if ((tid & 31) == 0) sAlive[tid >> 5] = ballot;
        __syncthreads();

        // Row `tid` of the overlap bitmask: the later alive candidates this one would suppress.
        for (int w = 0; w < kWords; ++w) {
            uint32_t bits = 0;
            if (alive) {
                uint32_t const candidates = sAlive[w];
                for (int t = 0; t < 32; ++t) {
                    int const j = w * 32 + t;
                    if (j > tid && ((candidates >> t) & 1u) && (p.class_agnostic || sClass[j] == cls) &&
                        iou(box, sBox[j]) > p.iou_threshold) {
                        bits |= 1u << t;
                    }
                }
            }
            sMask[tid][w] = bits;
        }
        __syncthreads();

        if (tid == 0) {
            uint32_t removed[kWords];
            for (int w = 0; w < kWords; ++w) removed[w] = ~sAlive[w];
            int32_t added = 0;
            for (int j = 0; j < kChunk && nKept + added < k; ++j) {
                if ((removed[j >> 5] >> (j & 31)) & 1u) continue;
                sKeep[added++] = j;
                for (int w = j >> 5; w < kWords; ++w) removed[w] |= sMask[j][w];
            }
            sAdded = added;
        }
        __syncthreads();

        int32_t const added = sAdded;
        if (tid < added) {
            int const j = sKeep[tid];
            int64_t const slot = nKept + tid;
            int64_t const out = image * k + slot;
            float4 const b = sBox[j];
            kept[slot] = b;
            keptClass[slot] = sClass[j];
            outBoxes[out * 4 + 0] = fromF32<T>(b.x);
            outBoxes[out * 4 + 1] = fromF32<T>(b.y);
            outBoxes[out * 4 + 2] = fromF32<T>(b.z);
            outBoxes[out * 4 + 3] = fromF32<T>(b.w);
            outScores[out] = fromF32<T>(sScore[j]);
            outClasses[out] = sClass[j];
        }
        nKept += added;
        __syncthreads();  // the kept boxes are read by every thread in the next chunk; sAdded is rewritten
    }
    if (tid == 0) numDetections[image] = nKept;
}

template <typename T>
int32_t launch(Params const* params, void const* boxes, void const* scores, void* numDetections, void* outBoxes,
               void* outScores, void* outClasses, void* workspace, int64_t workspaceBytes, cudaStream_t stream) {
    if (params == nullptr || !validParams(*params)) return static_cast<int32_t>(cudaErrorInvalidValue);
    Params const p = *params;
    Layout const l = makeLayout(p);
    cudaError_t status = cudaSuccess;
    if (p.batch == 0) return static_cast<int32_t>(cudaSuccess);
    if (numDetections == nullptr || outBoxes == nullptr || outScores == nullptr || outClasses == nullptr) {
        return static_cast<int32_t>(cudaErrorInvalidValue);
    }
    size_t const slots = static_cast<size_t>(p.batch) * static_cast<size_t>(p.max_output_boxes);
    // Entries past num_detections are zeros: clear every output first.
    void* const outputs[4] = {numDetections, outBoxes, outScores, outClasses};
    size_t const bytes[4] = {sizeof(int32_t) * p.batch, sizeof(T) * 4 * slots, sizeof(T) * slots,
                             sizeof(int32_t) * slots};
    for (int o = 0; o < 4; ++o) {
        status = cudaMemsetAsync(outputs[o], 0, bytes[o], stream);
        if (status != cudaSuccess) return static_cast<int32_t>(status);
    }
    int64_t const pairs = p.anchors * p.classes;
    int64_t const items = p.batch * pairs;
    if (items == 0) return static_cast<int32_t>(cudaSuccess);
    if (boxes == nullptr || scores == nullptr || workspace == nullptr || workspaceBytes < 0 ||
        static_cast<size_t>(workspaceBytes) < l.total) {
        return static_cast<int32_t>(cudaErrorInvalidValue);
    }
    char* const ws = static_cast<char*>(workspace);
    auto* const counts = reinterpret_cast<int32_t*>(ws + l.counts);
    auto* const begins = reinterpret_cast<int32_t*>(ws + l.begins);
    auto* const ends = reinterpret_cast<int32_t*>(ws + l.ends);
    auto* const keysIn = reinterpret_cast<uint64_t*>(ws + l.keysA);
    auto* const keysOut = reinterpret_cast<uint64_t*>(ws + l.keysB);
    status = cudaMemsetAsync(counts, 0, sizeof(int32_t) * p.batch, stream);
    if (status != cudaSuccess) return static_cast<int32_t>(status);

    int64_t const filterBlocks = std::min((items + kThreads - 1) / kThreads, kMaxFilterBlocks);
    filterKernel<T><<<static_cast<unsigned>(filterBlocks), kThreads, 0, stream>>>(p, static_cast<T const*>(scores),
                                                                                   counts, keysIn);
    status = cudaGetLastError();
    if (status != cudaSuccess) return static_cast<int32_t>(status);
    segmentsKernel<<<static_cast<unsigned>((p.batch + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        p.batch, pairs, counts, begins, ends);
    status = cudaGetLastError();
    if (status != cudaSuccess) return static_cast<int32_t>(status);
    // The sorted keys land in either buffer; the DoubleBuffer says which (decided on the host).
    cub::DoubleBuffer<uint64_t> keys(keysIn, keysOut);
    size_t sortBytes = 0;
    status = cub::DeviceSegmentedRadixSort::SortKeysDescending(nullptr, sortBytes, keys, static_cast<int>(items),
                                                               static_cast<int>(p.batch), begins, ends, 0, 64, stream);
    if (status != cudaSuccess) return static_cast<int32_t>(status);
    if (sortBytes > kSortReserve) return static_cast<int32_t>(cudaErrorInvalidValue);
    status = cub::DeviceSegmentedRadixSort::SortKeysDescending(ws + l.sortTemp, sortBytes, keys,
                                                               static_cast<int>(items), static_cast<int>(p.batch),
                                                               begins, ends, 0, 64, stream);
    if (status != cudaSuccess) return static_cast<int32_t>(status);
    suppressKernel<T><<<static_cast<unsigned>(p.batch), kChunk, 0, stream>>>(
        p, static_cast<T const*>(boxes), counts, keys.Current(), reinterpret_cast<float4*>(ws + l.keptBoxes),
        reinterpret_cast<int32_t*>(ws + l.keptClasses), static_cast<int32_t*>(numDetections),
        static_cast<T*>(outBoxes), static_cast<T*>(outScores), static_cast<int32_t*>(outClasses));
    return static_cast<int32_t>(cudaGetLastError());
}

}  // namespace efficient_nms_detail
}  // namespace torchtrt_ext

#define TORCHTRT_EXT_NMS_ARGS                                                                                      \
    TorchtrtExtEfficientNmsParams const *params, void const *boxes, void const *scores, void *num_detections,     \
        void *detection_boxes, void *detection_scores, void *detection_classes, void *workspace,                   \
        int64_t workspace_bytes, cudaStream_t stream
#define TORCHTRT_EXT_NMS_PASS                                                                                      \
    params, boxes, scores, num_detections, detection_boxes, detection_scores, detection_classes, workspace,        \
        workspace_bytes, stream

extern "C" {

TORCHTRT_EXT_API int64_t torchtrt_ext_efficient_nms_workspace_size(TorchtrtExtEfficientNmsParams const* params) {
    using namespace torchtrt_ext::efficient_nms_detail;
    if (params == nullptr || !validParams(*params)) return -1;
    return static_cast<int64_t>(makeLayout(*params).total);
}

TORCHTRT_EXT_API int32_t torchtrt_ext_efficient_nms_f32(TORCHTRT_EXT_NMS_ARGS) {
    return torchtrt_ext::efficient_nms_detail::launch<float>(TORCHTRT_EXT_NMS_PASS);
}

TORCHTRT_EXT_API int32_t torchtrt_ext_efficient_nms_f16(TORCHTRT_EXT_NMS_ARGS) {
    return torchtrt_ext::efficient_nms_detail::launch<__half>(TORCHTRT_EXT_NMS_PASS);
}

TORCHTRT_EXT_API int32_t torchtrt_ext_efficient_nms_bf16(TORCHTRT_EXT_NMS_ARGS) {
    return torchtrt_ext::efficient_nms_detail::launch<__nv_bfloat16>(TORCHTRT_EXT_NMS_PASS);
}

}  // extern "C"

#undef TORCHTRT_EXT_NMS_ARGS
#undef TORCHTRT_EXT_NMS_PASS
