// Plugin messages go to TensorRT's logger, found through the ILoggerFinder that TensorRT hands to the library's
// setLoggerFinder entry point (plugin_lib.cpp). Until a finder is set (a plain dlopen, a test), errors and
// warnings go to stderr so that they are never lost.
#pragma once

#include "NvInferRuntime.h"

#include <string>

namespace torchtrt_ext
{
namespace plugins
{

//! Use `finder` for every later message (nullptr: back to stderr). Thread-safe.
void setLoggerFinder(nvinfer1::ILoggerFinder* finder) noexcept;

//! Log `message` at `severity`, prefixed with "[torchtrt_ext] ".
void log(nvinfer1::ILogger::Severity severity, std::string const& message) noexcept;

//! Log the exception being handled as an error of `where` (e.g. "L2Norm::enqueue"). Call only inside a catch block.
void logCaught(char const* where) noexcept;

} // namespace plugins
} // namespace torchtrt_ext
