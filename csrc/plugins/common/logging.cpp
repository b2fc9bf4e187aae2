#include "plugins/common/logging.h"

#include <atomic>
#include <cstdio>
#include <exception>

namespace torchtrt_ext
{
namespace plugins
{
namespace
{
// The one piece of library-wide state: TensorRT sets it once per loaded library through setLoggerFinder. Plugin
// objects keep no global state of their own.
std::atomic<nvinfer1::ILoggerFinder*> gLoggerFinder{nullptr};

char const* severityName(nvinfer1::ILogger::Severity severity) noexcept
{
    switch (severity)
    {
    case nvinfer1::ILogger::Severity::kINTERNAL_ERROR: return "internal error";
    case nvinfer1::ILogger::Severity::kERROR: return "error";
    case nvinfer1::ILogger::Severity::kWARNING: return "warning";
    case nvinfer1::ILogger::Severity::kINFO: return "info";
    case nvinfer1::ILogger::Severity::kVERBOSE: return "verbose";
    }
    return "unknown";
}
} // namespace

void setLoggerFinder(nvinfer1::ILoggerFinder* finder) noexcept
{
    gLoggerFinder.store(finder);
}

void log(nvinfer1::ILogger::Severity severity, std::string const& message) noexcept
{
    try
    {
        std::string const text = "[torchtrt_ext] " + message;
        nvinfer1::ILoggerFinder* finder = gLoggerFinder.load();
        nvinfer1::ILogger* logger = finder != nullptr ? finder->findLogger() : nullptr;
        if (logger != nullptr)
        {
            logger->log(severity, text.c_str());
        }
        else if (severity <= nvinfer1::ILogger::Severity::kWARNING)
        {
            std::fprintf(stderr, "%s: %s\n", severityName(severity), text.c_str());
        }
    }
    catch (...)
    {
        // Out of memory while formatting a message: nothing sensible is left to do, and nothing may escape.
    }
}

void logCaught(char const* where) noexcept
{
    try
    {
        try
        {
            throw;
        }
        catch (std::exception const& e)
        {
            log(nvinfer1::ILogger::Severity::kERROR, std::string(where) + ": " + e.what());
        }
        catch (...)
        {
            log(nvinfer1::ILogger::Severity::kERROR, std::string(where) + ": unknown exception");
        }
    }
    catch (...)
    {
        // Formatting the message itself failed (out of memory): nothing may escape a noexcept boundary.
    }
}

} // namespace plugins
} // namespace torchtrt_ext
