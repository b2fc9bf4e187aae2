// What Python needs from the CUDA runtime linked into the native libraries.
//
// setup.py links cudart statically and hides its symbols (a process may hold another CUDA runtime: torch's, of
// another version), so cudaGetErrorName & co. are not reachable by name from outside; these wrappers are.
#pragma once

#include <stdint.h>

#include "kernels/api.h"

#ifdef __cplusplus
extern "C" {
#endif

// cudaRuntimeGetVersion of the runtime linked in (1000 * major + 10 * minor, e.g. 13000), -1 if that call fails;
// needs no GPU and no driver.
TORCHTRT_EXT_API int32_t torchtrt_ext_cuda_runtime_version(void);
// cudaGetErrorName / cudaGetErrorString of that runtime for a cudaError_t value (static strings, never null).
TORCHTRT_EXT_API char const* torchtrt_ext_cuda_error_name(int32_t status);
TORCHTRT_EXT_API char const* torchtrt_ext_cuda_error_string(int32_t status);

#ifdef __cplusplus
}
#endif
