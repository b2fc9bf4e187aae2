// EfficientNMS CUDA kernels: fixed-size batched non-maximum suppression with the inputs, outputs and fields of
// TensorRT's EfficientNMS_TRT plugin; the semantics are those of torchtrt_ext/ops/efficient_nms.py (its docstring):
// candidates are the (anchor, class) pairs scoring above the threshold (after an optional sigmoid), visited by score
// (ties: lower anchor * C + class first); a candidate is kept unless a kept one of the same class (any class when
// class-agnostic) overlaps it with IoU > iou_threshold; the first max_output_boxes kept are written, the rest is zero.
// Every candidate is considered (TensorRT's plugin keeps only the best 5000 per image).
//
// No TensorRT and no torch headers here: the same launchers serve the eager op (ctypes) and the C++ plugin.
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "kernels/api.h"

#ifdef __cplusplus
extern "C" {
#endif

//! The sizes and fields of one call; mirrored once in ctypes (torchtrt_ext/ops/_efficient_nms_cuda.py).
typedef struct TorchtrtExtEfficientNmsParams {
    int64_t batch;             //!< B >= 0
    int64_t anchors;           //!< A >= 0
    int64_t classes;           //!< C >= 0 (B * A * C < 2^31)
    int32_t max_output_boxes;  //!< K >= 1
    int32_t background_class;  //!< a class never detected; -1 (or any value outside [0, C)) for none
    int32_t score_activation;  //!< 1: sigmoid on the scores
    int32_t class_agnostic;    //!< 1: boxes of different classes suppress each other
    int32_t box_coding;        //!< 0: x1, y1, x2, y2; 1: cx, cy, w, h
    float score_threshold;     //!< in [0, 1]
    float iou_threshold;       //!< in [0, 1]
} TorchtrtExtEfficientNmsParams;

//! Bytes of device workspace the launchers need for `params` (host only, no GPU work); -1 for invalid params.
TORCHTRT_EXT_API int64_t torchtrt_ext_efficient_nms_workspace_size(TorchtrtExtEfficientNmsParams const* params);

// boxes [B, A, 4] and scores [B, A, C] (contiguous, of the launcher's type); outputs num_detections [B, 1] int32,
// detection_boxes [B, K, 4] (corners, the launcher's type), detection_scores [B, K] (the launcher's type),
// detection_classes [B, K] int32; a workspace of at least torchtrt_ext_efficient_nms_workspace_size bytes (256-byte
// aligned). The work is enqueued on `stream`; nothing is synchronized.
// Returns a cudaError_t as int32_t: 0 once the work was enqueued; cudaErrorInvalidValue (1) for bad params, a null
// pointer or a small workspace; otherwise the error of the failed CUDA call or launch. Never exits or aborts.
TORCHTRT_EXT_API int32_t torchtrt_ext_efficient_nms_f32(TorchtrtExtEfficientNmsParams const* params,
    void const* boxes, void const* scores, void* num_detections, void* detection_boxes, void* detection_scores,
    void* detection_classes, void* workspace, int64_t workspace_bytes, cudaStream_t stream);
// Same, __half boxes, scores and output boxes/scores.
TORCHTRT_EXT_API int32_t torchtrt_ext_efficient_nms_f16(TorchtrtExtEfficientNmsParams const* params,
    void const* boxes, void const* scores, void* num_detections, void* detection_boxes, void* detection_scores,
    void* detection_classes, void* workspace, int64_t workspace_bytes, cudaStream_t stream);
// Same, __nv_bfloat16.
TORCHTRT_EXT_API int32_t torchtrt_ext_efficient_nms_bf16(TorchtrtExtEfficientNmsParams const* params,
    void const* boxes, void const* scores, void* num_detections, void* detection_boxes, void* detection_scores,
    void* detection_classes, void* workspace, int64_t workspace_bytes, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
