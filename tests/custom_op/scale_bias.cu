// The TestScaleBias kernel (see scale_bias.h): one grid-stride loop over the elements.
#include "scale_bias.h"

namespace
{
__global__ void scaleBias(float const* x, float* y, int64_t count, float scale, float bias)
{
    int64_t const stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    {
        y[i] = x[i] * scale + bias;
    }
}
} // namespace

extern "C" int32_t test_scale_bias_f32(
    float const* x, float* y, int64_t count, float scale, float bias, cudaStream_t stream)
{
    if (count < 0 || (count > 0 && (x == nullptr || y == nullptr)))
    {
        return static_cast<int32_t>(cudaErrorInvalidValue);
    }
    if (count == 0)
    {
        return 0;
    }
    int64_t const blocks = (count + 255) / 256;
    scaleBias<<<static_cast<unsigned int>(blocks < 4096 ? blocks : 4096), 256, 0, stream>>>(x, y, count, scale, bias);
    return static_cast<int32_t>(cudaGetLastError());
}
