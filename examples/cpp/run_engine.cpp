// Minimal deployment without Python: load the torchtrt_ext plugin library and a bare TensorRT plan, run one inference.
//
//   run_engine <model.plan> [libtorchtrt_ext_plugins.so] [dim0xdim1x...]
//
// The plan is the bare serialized engine (torchtrt_ext.deploy.export_plan), built on this GPU with this TensorRT
// version. The plugin library is loaded with IPluginRegistry::loadLibrary, which calls its getCreators entry point
// (a plain dlopen would register nothing). Dynamic input dims take the optional shape (default: 1 for every -1).
// Inputs are filled with 1.0 (float32 inputs) or zeros; the first values of every output are printed.
#include "NvInferRuntime.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace
{
class Logger : public nvinfer1::ILogger
{
public:
    void log(Severity severity, nvinfer1::AsciiChar const* msg) noexcept override
    {
        if (severity <= Severity::kWARNING)
        {
            std::cerr << "[TensorRT] " << msg << std::endl;
        }
    }
};

bool check(cudaError_t status, char const* what)
{
    if (status != cudaSuccess)
    {
        std::cerr << what << " failed: " << cudaGetErrorString(status) << std::endl;
        return false;
    }
    return true;
}

std::vector<char> readFile(std::string const& path)
{
    std::ifstream file(path, std::ios::binary);
    return std::vector<char>((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

size_t elementSize(nvinfer1::DataType type)
{
    switch (type)
    {
    case nvinfer1::DataType::kFLOAT: return 4;
    case nvinfer1::DataType::kHALF: return 2;
    case nvinfer1::DataType::kBF16: return 2;
    case nvinfer1::DataType::kINT32: return 4;
    case nvinfer1::DataType::kINT64: return 8;
    case nvinfer1::DataType::kBOOL: return 1;
    case nvinfer1::DataType::kINT8: return 1;
    case nvinfer1::DataType::kUINT8: return 1;
    default: return 4;
    }
}

int64_t volume(nvinfer1::Dims const& dims)
{
    int64_t n = 1;
    for (int32_t i = 0; i < dims.nbDims; ++i)
    {
        n *= dims.d[i];
    }
    return n;
}

std::string describe(nvinfer1::Dims const& dims)
{
    std::ostringstream out;
    for (int32_t i = 0; i < dims.nbDims; ++i)
    {
        out << (i ? "x" : "") << dims.d[i];
    }
    return out.str();
}
} // namespace

int main(int argc, char** argv)
{
    if (argc < 2)
    {
        std::cerr << "usage: " << argv[0] << " <model.plan> [libtorchtrt_ext_plugins.so] [input shape, e.g. 4x3x64x64]"
                  << std::endl;
        return 2;
    }
    Logger logger;
    std::unique_ptr<nvinfer1::IRuntime> runtime{nvinfer1::createInferRuntime(logger)};
    if (!runtime)
    {
        std::cerr << "createInferRuntime failed" << std::endl;
        return 1;
    }
    if (argc >= 3 && std::string(argv[2]).size() > 0)
    {
        // loadLibrary calls the library's getCreators and registers every creator (namespace "torchtrt_ext").
        if (runtime->getPluginRegistry().loadLibrary(argv[2]) == nullptr)
        {
            std::cerr << "could not load the plugin library " << argv[2]
                      << " (built against another TensorRT version? missing getCreators?)" << std::endl;
            return 1;
        }
    }
    std::vector<char> plan = readFile(argv[1]);
    std::unique_ptr<nvinfer1::ICudaEngine> engine{runtime->deserializeCudaEngine(plan.data(), plan.size())};
    if (!engine)
    {
        std::cerr << "deserializing " << argv[1] << " failed: built for another GPU or TensorRT version, or a plugin "
                  << "creator is missing (pass the plugin library)" << std::endl;
        return 1;
    }
    std::unique_ptr<nvinfer1::IExecutionContext> context{engine->createExecutionContext()};
    cudaStream_t stream{};
    if (!context || !check(cudaStreamCreate(&stream), "cudaStreamCreate"))
    {
        return 1;
    }

    std::vector<void*> buffers;
    std::vector<std::string> outputs;
    for (int32_t i = 0; i < engine->getNbIOTensors(); ++i)
    {
        char const* name = engine->getIOTensorName(i);
        if (engine->getTensorIOMode(name) != nvinfer1::TensorIOMode::kINPUT)
        {
            continue;
        }
        nvinfer1::Dims dims = engine->getTensorShape(name);
        for (int32_t d = 0; d < dims.nbDims; ++d)
        {
            if (dims.d[d] < 0)
            {
                dims.d[d] = 1;
            }
        }
        if (argc >= 4)
        {
            std::istringstream shape(argv[3]);
            std::string token;
            for (int32_t d = 0; std::getline(shape, token, 'x') && d < dims.nbDims; ++d)
            {
                dims.d[d] = std::stoll(token);
            }
        }
        if (!context->setInputShape(name, dims))
        {
            std::cerr << "input " << name << ": shape " << describe(dims) << " is outside the engine's profiles"
                      << std::endl;
            return 1;
        }
        size_t const bytes = static_cast<size_t>(volume(dims)) * elementSize(engine->getTensorDataType(name));
        std::vector<char> host(bytes, 0);
        if (engine->getTensorDataType(name) == nvinfer1::DataType::kFLOAT)
        {
            std::vector<float> ones(bytes / sizeof(float), 1.0F);
            std::memcpy(host.data(), ones.data(), bytes);
        }
        void* device = nullptr;
        if (!check(cudaMalloc(&device, bytes), "cudaMalloc")
            || !check(cudaMemcpyAsync(device, host.data(), bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync"))
        {
            return 1;
        }
        buffers.push_back(device);
        context->setTensorAddress(name, device);
        std::cout << "input  " << name << " " << describe(dims) << std::endl;
    }
    for (int32_t i = 0; i < engine->getNbIOTensors(); ++i)
    {
        char const* name = engine->getIOTensorName(i);
        if (engine->getTensorIOMode(name) != nvinfer1::TensorIOMode::kOUTPUT)
        {
            continue;
        }
        nvinfer1::Dims const dims = context->getTensorShape(name); // resolved from the input shapes
        size_t const bytes = static_cast<size_t>(volume(dims)) * elementSize(engine->getTensorDataType(name));
        void* device = nullptr;
        if (!check(cudaMalloc(&device, bytes), "cudaMalloc"))
        {
            return 1;
        }
        buffers.push_back(device);
        context->setTensorAddress(name, device);
        outputs.push_back(name);
    }
    if (!context->enqueueV3(stream))
    {
        std::cerr << "enqueueV3 failed (see the TensorRT messages above)" << std::endl;
        return 1;
    }
    for (std::string const& name : outputs)
    {
        nvinfer1::Dims const dims = context->getTensorShape(name.c_str());
        std::vector<float> first(static_cast<size_t>(std::min<int64_t>(volume(dims), 4)), 0.0F);
        void const* device = context->getTensorAddress(name.c_str());
        if (engine->getTensorDataType(name.c_str()) == nvinfer1::DataType::kFLOAT
            && !check(cudaMemcpyAsync(first.data(), device, first.size() * sizeof(float), cudaMemcpyDeviceToHost,
                          stream),
                "cudaMemcpyAsync"))
        {
            return 1;
        }
        if (!check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"))
        {
            return 1;
        }
        std::cout << "output " << name << " " << describe(dims) << ":";
        for (float v : first)
        {
            std::cout << " " << v;
        }
        std::cout << std::endl;
    }
    for (void* buffer : buffers)
    {
        cudaFree(buffer);
    }
    cudaStreamDestroy(stream);
    std::cout << "inference OK" << std::endl;
    return 0;
}
