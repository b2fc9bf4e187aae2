// Checks that throw inside the plugin library. Every noexcept entry point catches what they throw (see
// logging.h: logCaught), logs it through TensorRT's logger and returns an error value: exceptions never cross
// the library boundary.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace torchtrt_ext
{
namespace plugins
{

//! What a failed check throws: the message says what failed and what was expected.
class PluginError : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

//! Throw PluginError(message) unless condition holds.
inline void require(bool condition, std::string const& message)
{
    if (!condition)
    {
        throw PluginError(message);
    }
}

//! Throw PluginError naming `what` and the CUDA error unless status is cudaSuccess.
inline void checkCuda(cudaError_t status, char const* what)
{
    if (status != cudaSuccess)
    {
        throw PluginError(std::string(what) + " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status)
            + ")");
    }
}

} // namespace plugins
} // namespace torchtrt_ext
