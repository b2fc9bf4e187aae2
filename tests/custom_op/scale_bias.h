// TestScaleBias, the op the tests add to walk through docs/custom-op.md: y = x * scale + bias, float32.
// Its kernel's extern "C" launcher: raw device pointers, a size, a stream, a status (cudaError_t as int32_t).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

extern "C" __attribute__((visibility("default"))) int32_t test_scale_bias_f32(
    float const* x, float* y, int64_t count, float scale, float bias, cudaStream_t stream);
