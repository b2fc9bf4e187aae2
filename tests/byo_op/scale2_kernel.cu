// The kernel of the "user's" Scale2 plugin (tests/byo_op): y = x * factor, float32.
#include <cuda_runtime.h>

#include <cstdint>

namespace
{
__global__ void scale2Kernel(float const* x, float* y, int64_t count, float factor)
{
    int64_t const i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < count)
    {
        y[i] = x[i] * factor;
    }
}
} // namespace

extern "C" int32_t mycorp_scale2_f32(float const* x, float* y, int64_t count, float factor, cudaStream_t stream)
{
    if (count == 0)
    {
        return 0;
    }
    int32_t const threads = 256;
    auto const blocks = static_cast<unsigned int>((count + threads - 1) / threads);
    scale2Kernel<<<blocks, threads, 0, stream>>>(x, y, count, factor);
    return static_cast<int32_t>(cudaGetLastError());
}
