#include "plugins/common/plugin_base.h"

namespace torchtrt_ext
{
namespace plugins
{

// Only the enumerators present since TensorRT 10.0 are named, so the library also builds against older headers.

char const* fieldTypeName(nvinfer1::PluginFieldType type) noexcept
{
    using T = nvinfer1::PluginFieldType;
    switch (type)
    {
    case T::kFLOAT16: return "kFLOAT16";
    case T::kFLOAT32: return "kFLOAT32";
    case T::kFLOAT64: return "kFLOAT64";
    case T::kINT8: return "kINT8";
    case T::kINT16: return "kINT16";
    case T::kINT32: return "kINT32";
    case T::kCHAR: return "kCHAR";
    case T::kDIMS: return "kDIMS";
    case T::kUNKNOWN: return "kUNKNOWN";
    case T::kBF16: return "kBF16";
    case T::kINT64: return "kINT64";
    default: return "another PluginFieldType";
    }
}

char const* dataTypeName(nvinfer1::DataType type) noexcept
{
    using T = nvinfer1::DataType;
    switch (type)
    {
    case T::kFLOAT: return "kFLOAT";
    case T::kHALF: return "kHALF";
    case T::kBF16: return "kBF16";
    case T::kINT8: return "kINT8";
    case T::kINT32: return "kINT32";
    case T::kINT64: return "kINT64";
    case T::kBOOL: return "kBOOL";
    case T::kUINT8: return "kUINT8";
    case T::kFP8: return "kFP8";
    default: return "another DataType";
    }
}

} // namespace plugins
} // namespace torchtrt_ext
