// DeformConv2d (modulated deformable convolution, DCNv2) CUDA kernels: the deformable sampling ("im2col") step, and
// the whole op (sampling + GEMM + bias) for callers without cuBLAS.
//
// The convolution is computed as: columns = sample(input, offset, mask), then output = weight' x columns^T (one GEMM
// per image and convolution group), plus bias. The eager op calls the im2col launchers and does the GEMM with
// torch.matmul (cuBLAS); the TensorRT plugins call the full-op launchers (torchtrt_ext_deform_conv2d_f32/_f16/_bf16),
// whose GEMM is a tiled shared-memory kernel of this library (FP32 accumulation, no cuBLAS).
// The im2col launchers do the sampling for the whole batch in one launch. The input is channels-last and the columns
// are pixel-major, so that both the corner reads and the column writes are contiguous runs of channels:
//
//     columns[n][oy * out_w + ox][row(c, k)]        (K = kernel_h * kernel_w, k = i * kernel_w + j)
//       = mask[n][g * K + k][oy][ox] * bilinear(input[n][.][.][c], y, x)
//     row(c, k) = gc * (K * Cg) + k * Cg + (c - gc * Cg)     (Cg = channels / groups, gc = c / Cg: conv group)
//     y = oy * stride_h - pad_h + i * dil_h + offset[n][g * 2K + 2k][oy][ox]
//     x = ox * stride_w - pad_w + j * dil_w + offset[n][g * 2K + 2k + 1][oy][ox]
//
// with g = c / (channels / offset_groups) the offset group. The matching weight is
// weight.view(groups, C_out/groups, Cg, K).transpose(-1, -2): [groups, C_out/groups, K * Cg].
// Bilinear sampling follows torchvision.ops.deform_conv2d: a point outside (-1, height) x (-1, width) gives 0; each
// of its four corners outside the image contributes 0 on its own. Positions, weights and sums are FP32 for every data
// type; columns are stored in the data type (rounded once).
//
// No TensorRT and no torch headers here: the same launchers serve the eager op (ctypes) and the plugins.
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "kernels/api.h"


#ifdef __cplusplus
extern "C" {
#endif

// input:   contiguous channels-last [n, height, width, channels]
// offset:  contiguous [n, 2 * offset_groups * K, out_h, out_w]
// mask:    contiguous [n, offset_groups * K, out_h, out_w], or NULL for no modulation (all ones)
// columns: contiguous [n, out_h * out_w, channels * K], written entirely (must not overlap the inputs)
// All four in the same data type. Sizes: n, channels, out_h, out_w >= 0 (0 launches nothing); height, width,
// kernel_h, kernel_w, strides, dilations, groups, offset_groups >= 1; pads >= 0; channels divisible by groups and by
// offset_groups; 64-bit sizes. Channel runs are moved 16 bytes at a time when channels / groups and
// channels / offset_groups are multiples of 16 bytes' worth of elements and the pointers are 16-byte aligned.
// The work is enqueued on `stream`; nothing is synchronized.
// Returns a cudaError_t as int32_t: 0 (cudaSuccess) once the launch was accepted; cudaErrorInvalidValue (1) for bad
// sizes or a null pointer; otherwise the error of the failed launch. Never exits or aborts.
TORCHTRT_EXT_API int32_t torchtrt_ext_deform_conv2d_im2col_f32(
    void const* input, void const* offset, void const* mask, void* columns, int64_t n, int64_t channels,
    int64_t height, int64_t width, int64_t kernel_h, int64_t kernel_w, int64_t out_h, int64_t out_w,
    int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w,
    int64_t groups, int64_t offset_groups, cudaStream_t stream);
// Same, __half data.
TORCHTRT_EXT_API int32_t torchtrt_ext_deform_conv2d_im2col_f16(
    void const* input, void const* offset, void const* mask, void* columns, int64_t n, int64_t channels,
    int64_t height, int64_t width, int64_t kernel_h, int64_t kernel_w, int64_t out_h, int64_t out_w,
    int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w,
    int64_t groups, int64_t offset_groups, cudaStream_t stream);
// Same, __nv_bfloat16 data.
TORCHTRT_EXT_API int32_t torchtrt_ext_deform_conv2d_im2col_bf16(
    void const* input, void const* offset, void const* mask, void* columns, int64_t n, int64_t channels,
    int64_t height, int64_t width, int64_t kernel_h, int64_t kernel_w, int64_t out_h, int64_t out_w,
    int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w,
    int64_t groups, int64_t offset_groups, cudaStream_t stream);
// Same as the f32 launcher, but columns is [n, out_h * out_w, 2 * channels * K]: columns [0, C*K) of each pixel's
// row hold each value's TF32 part (the low 13 mantissa bits cleared) and [C*K, 2*C*K) the exact FP32 remainder, so
// that TF32 tensor-core GEMMs W_hi x hi + (W_lo x hi + W_hi x lo) give FP32-level accuracy ("3xTF32").
TORCHTRT_EXT_API int32_t torchtrt_ext_deform_conv2d_im2col_split_tf32(
    void const* input, void const* offset, void const* mask, void* columns, int64_t n, int64_t channels,
    int64_t height, int64_t width, int64_t kernel_h, int64_t kernel_w, int64_t out_h, int64_t out_w,
    int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w,
    int64_t groups, int64_t offset_groups, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------------- the whole op
// output = deform_conv2d(input, offset, weight, bias, mask) with torchvision.ops.deform_conv2d semantics, every tensor
// contiguous NCHW in one data type:
//   input   [n, channels, height, width]
//   offset  [n, 2 * offset_groups * K, out_h, out_w]            (K = kernel_h * kernel_w; (dy, dx) per tap)
//   weight  [out_channels, channels / groups, kernel_h, kernel_w]
//   bias    [out_channels], or NULL for none
//   mask    [n, offset_groups * K, out_h, out_w], or NULL for none (all ones)
//   output  [n, out_channels, out_h, out_w], written entirely; must not overlap the inputs
// with out_h = (height + 2 * pad_h - dil_h * (kernel_h - 1) - 1) / stride_h + 1 (out_w alike), computed here.
// workspace: device memory of workspace_bytes >= torchtrt_ext_deform_conv2d_workspace_size(...) for these sizes
// (any larger size works; a smaller one that still holds one image's columns works too, in more GEMM passes), and
// 256-byte aligned (cudaMalloc's alignment). It holds the weight in column order (FP32), the input channels-last and
// the column buffer of as many images as fit; nothing in it survives the call.
// Sizes: n, out_channels >= 0 (0 launches nothing), channels >= 0; height, width, kernel sizes, strides, dilations,
// groups, offset_groups >= 1; pads >= 0; channels and out_channels divisible by groups, channels by offset_groups.
// Sums are FP32 for every data type (columns are stored in the data type, rounded once, as in the eager op).
// The work is enqueued on `stream`; nothing is synchronized.
// Returns a cudaError_t as int32_t: 0 once every launch was accepted; cudaErrorInvalidValue (1) for bad sizes, a null
// pointer, or a workspace too small for one image; otherwise the error of the failed launch. Never exits or aborts.
TORCHTRT_EXT_API int32_t torchtrt_ext_deform_conv2d_f32(
    void const* input, void const* offset, void const* weight, void const* bias, void const* mask, void* output,
    void* workspace, int64_t workspace_bytes, int64_t n, int64_t channels, int64_t height, int64_t width,
    int64_t out_channels, int64_t kernel_h, int64_t kernel_w, int64_t stride_h, int64_t stride_w, int64_t pad_h,
    int64_t pad_w, int64_t dil_h, int64_t dil_w, int64_t groups, int64_t offset_groups, cudaStream_t stream);
// Same, __half data.
TORCHTRT_EXT_API int32_t torchtrt_ext_deform_conv2d_f16(
    void const* input, void const* offset, void const* weight, void const* bias, void const* mask, void* output,
    void* workspace, int64_t workspace_bytes, int64_t n, int64_t channels, int64_t height, int64_t width,
    int64_t out_channels, int64_t kernel_h, int64_t kernel_w, int64_t stride_h, int64_t stride_w, int64_t pad_h,
    int64_t pad_w, int64_t dil_h, int64_t dil_w, int64_t groups, int64_t offset_groups, cudaStream_t stream);
// Same, __nv_bfloat16 data.
TORCHTRT_EXT_API int32_t torchtrt_ext_deform_conv2d_bf16(
    void const* input, void const* offset, void const* weight, void const* bias, void const* mask, void* output,
    void* workspace, int64_t workspace_bytes, int64_t n, int64_t channels, int64_t height, int64_t width,
    int64_t out_channels, int64_t kernel_h, int64_t kernel_w, int64_t stride_h, int64_t stride_w, int64_t pad_h,
    int64_t pad_w, int64_t dil_h, int64_t dil_w, int64_t groups, int64_t offset_groups, cudaStream_t stream);
// Bytes of workspace the full-op launchers want for these sizes with elements of element_size bytes (4 or 2): the
// weight in column order, the channels-last input, and the columns of min(n, images fitting in 256 MiB, at least 1)
// images. Never decreases when any size grows (so a size from a profile's largest shapes serves every smaller one).
// Returns -1 for sizes the launchers would reject (see above) or a byte count that overflows. Host only.
TORCHTRT_EXT_API int64_t torchtrt_ext_deform_conv2d_workspace_size(
    int64_t n, int64_t channels, int64_t height, int64_t width, int64_t out_channels, int64_t kernel_h,
    int64_t kernel_w, int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w, int64_t dil_h, int64_t dil_w,
    int64_t groups, int64_t offset_groups, int64_t element_size);

#ifdef __cplusplus
}
#endif
