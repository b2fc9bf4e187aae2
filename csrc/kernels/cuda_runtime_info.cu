// The linked CUDA runtime's version and error texts, exported by name (see cuda_runtime_info.h).
#include "kernels/cuda_runtime_info.h"

#include <cuda_runtime_api.h>

TORCHTRT_EXT_API int32_t torchtrt_ext_cuda_runtime_version(void) {
    int version = 0;
    return cudaRuntimeGetVersion(&version) == cudaSuccess ? version : -1;
}

TORCHTRT_EXT_API char const* torchtrt_ext_cuda_error_name(int32_t status) {
    return cudaGetErrorName(static_cast<cudaError_t>(status));
}

TORCHTRT_EXT_API char const* torchtrt_ext_cuda_error_string(int32_t status) {
    return cudaGetErrorString(static_cast<cudaError_t>(status));
}
