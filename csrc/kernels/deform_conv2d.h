// DeformConv2d (modulated deformable convolution, DCNv2): the whole op in one launcher, used by the TensorRT plugins
// (enqueue) and by the eager op (ctypes, with a torch-allocated workspace), so both run the same code.
//
// output = deform_conv2d(input, offset, weight, bias, mask) with torchvision.ops.deform_conv2d semantics:
//   input   [n, channels, height, width]: contiguous NCHW, or channels-last memory [n][height][width][channels]
//   offset  [n, 2 * offset_groups * K, out_h, out_w]  contiguous   (K = kernel_h * kernel_w; (dy, dx) per tap)
//   weight  [out_channels, channels / groups, kernel_h, kernel_w]  contiguous (copied per call, reordered, into the
//           workspace)
//   bias    [out_channels], or NULL for none
//   mask    [n, offset_groups * K, out_h, out_w] contiguous, or NULL for none (all ones)
//   output  [n, out_channels, out_h, out_w] contiguous NCHW, written entirely; must not overlap the inputs
// with out_h = (height + 2 * pad_h - dil_h * (kernel_h - 1) - 1) / stride_h + 1 (out_w alike), computed here.
// All tensors of one data type: float, __half or __nv_bfloat16.
//
// Small problems (up to directMaxMacs multiply-adds, kernels of at most 12 taps) run as one kernel, every data type and
// compute capability: it samples into shared memory and multiplies in true FP32, reading the input in its own layout
// and the weight as it is (deform_conv2d_direct.cuh); TORCHTRT_EXT_DCN_DIRECT=0 never takes it, =1 wherever it
// applies. The others:
// two steps per slice of images: the sampling kernel writes the deformable columns (pixel-major, each conv group's
// rows tap by tap (tap, channel), then a row of ones), then a GEMM multiplies the weight by them and writes NCHW.
// The weight is copied per call into the same (tap, channel) order with the bias in the place that meets the ones
// row, so the GEMM adds it. The GEMM is cuBLASLt's where the library loads (kernels/cublaslt.h: dlopen at run time,
// one handle per device, one plan per shape); where cuBLASLt cannot be loaded or has no algorithm, our own
// tensor-core GEMM runs (sm_80+). Sums are FP32 for every data type: fp16/bf16 on tensor cores with FP32
// accumulators; float32 error-compensated on tensor cores (relative error ~5e-6 against float64): on cuBLASLt as bf16
// pairs (hi + lo, three products), in our own GEMM as TF32 pairs ("3xTF32"); in true FP32 where cuBLASLt has no bf16
// algorithm. The compute type is set per call: no global state. No TensorRT, no torch headers.
//
// On an H100/H200 (compute capability 9.0, a library built with 90 among its architectures, whose device code for it
// is sm_90a) where every conv group and offset group holds whole blocks of 64 channels: one fused kernel instead, an
// implicit GEMM (wgmma) whose threads sample straight into shared memory, no columns; taken where its blocks fill the
// GPU's waves well, and for float32 where a conv group has at most 256 output channels (deform_conv2d_sm90.cuh).
// TORCHTRT_EXT_DCN_FUSED=0 never takes it, =1 wherever it applies. Its bilinear sums are in the data type for fp16/bf16
// (HFMA2), not FP32; float32 samples in FP32 and multiplies as bf16 pairs (three products), as the column path does.
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "kernels/api.h"

#ifdef __cplusplus
extern "C" {
#endif

// Data types of TorchtrtExtDeformConv2dDesc::dtype.
#define TORCHTRT_EXT_DCN_FLOAT32 0
#define TORCHTRT_EXT_DCN_FLOAT16 1
#define TORCHTRT_EXT_DCN_BFLOAT16 2
// Input layouts of TorchtrtExtDeformConv2dDesc::input_layout.
#define TORCHTRT_EXT_DCN_NCHW 0           // contiguous [n][channels][height][width]: transposed in the workspace
#define TORCHTRT_EXT_DCN_CHANNELS_LAST 1  // memory [n][height][width][channels]: read as it is

// Everything a call needs besides pointers (mirrored once, as a ctypes.Structure, in ops/_deform_conv2d_launcher.py).
// Sizes: n, channels, out_channels >= 0; height, width, kernel sizes, strides, dilations, groups, offset_groups >= 1;
// pads >= 0; channels and out_channels divisible by groups, channels by offset_groups; a kernel that fits the padded
// input (an output of at least 1x1); a prepared weight of out_channels * rows_pad < 2^31 elements (rows_pad:
// channels / groups * kernel_h * kernel_w + 1 rounded up to a multiple of 8).
typedef struct TorchtrtExtDeformConv2dDesc {
    int64_t n, channels, height, width;
    int64_t out_channels, kernel_h, kernel_w;
    int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
    int64_t groups, offset_groups;
    int32_t dtype;         // TORCHTRT_EXT_DCN_FLOAT32 / _FLOAT16 / _BFLOAT16
    int32_t input_layout;  // TORCHTRT_EXT_DCN_NCHW / _CHANNELS_LAST
} TorchtrtExtDeformConv2dDesc;

// The device buffers of one call (bias and mask may be NULL).
typedef struct TorchtrtExtDeformConv2dTensors {
    void const* input;
    void const* offset;
    void const* weight;
    void const* bias;
    void const* mask;
    void* output;
} TorchtrtExtDeformConv2dTensors;

// Enqueues the op on `stream`; nothing is synchronized. workspace: device memory of workspace_bytes >=
// torchtrt_ext_deform_conv2d_workspace_size(desc) (a smaller one that still holds one image's columns works too, in
// more passes), 256-byte aligned (cudaMalloc's alignment); nothing in it survives the call.
// Returns a cudaError_t as int32_t: 0 once every launch was accepted (an empty output launches nothing);
// cudaErrorInvalidValue (1) for a bad descriptor, a null pointer or a workspace too small for one image;
// cudaErrorNotSupported when neither cuBLASLt nor our own GEMM (sm_80+) can run on the device; otherwise the error
// of the failed launch or cuBLASLt call. Never exits or aborts.
TORCHTRT_EXT_API int32_t torchtrt_ext_deform_conv2d(TorchtrtExtDeformConv2dDesc const* desc,
                                                    TorchtrtExtDeformConv2dTensors const* tensors, void* workspace,
                                                    int64_t workspace_bytes, cudaStream_t stream);

// Bytes of workspace the launcher wants for `desc`: the channels-last input (NCHW input only), the prepared weight,
// cuBLASLt's 4 MiB and the columns of min(n, images fitting in 256 MiB, at least 1) images. Never decreases when n,
// channels, height, width or out_channels grow (so a size from a profile's largest shapes serves every smaller one). Returns -1 for a
// descriptor the launcher would reject or a byte count that overflows. Host only.
TORCHTRT_EXT_API int64_t torchtrt_ext_deform_conv2d_workspace_size(TorchtrtExtDeformConv2dDesc const* desc);

#ifdef TORCHTRT_EXT_DCN_TRACE
// Only in a diagnostic build (setup.py: TORCHTRT_EXT_DCN_TRACE=1; kernels/deform_conv2d_trace.cuh): copies the first
// `bytes` of the fused kernel's trace rows (4096 rows of 16 uint64 slots, one per block of the launches since the last
// call) to `host`, then zeroes them all; bytes = 0 only zeroes. Synchronous. Returns a cudaError_t as int32_t.
TORCHTRT_EXT_API int32_t torchtrt_ext_deform_conv2d_trace(void* host, int64_t bytes);
#endif

#ifdef __cplusplus
}
#endif
