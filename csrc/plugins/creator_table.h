// The one creator table of libtorchtrt_ext_plugins.so (the pattern of TensorRT OSS plugin/api/inferPlugin.cpp): one
// line per op in `CreatorTable` below. getCreators lists it, torchtrt_ext_register_plugins registers it, and the
// tests count from kNB_CREATORS. Adding an op: its folder under plugins/, its include and one line here.
#pragma once

#include "NvInferRuntime.h"
#include "plugins/deform_conv2d/deform_conv2d_plugin.h"
#include "plugins/efficient_nms/efficient_nms_plugin.h"
#include "plugins/l2norm/l2norm_plugin.h"

#include <array>
#include <cstdint>
#include <tuple>

namespace torchtrt_ext
{
namespace plugins
{

//! One creator of each type in `Creators`, all for one namespace, and the lists TensorRT's entry points hand out.
//! Creators are neither copied nor moved: a registry keeps pointers to them.
template <typename... Creators>
class CreatorSet
{
public:
    static constexpr int32_t kSIZE = static_cast<int32_t>(sizeof...(Creators));

    explicit CreatorSet(char const* pluginNamespace)
        : mCreators(sameFor<Creators>(pluginNamespace)...)
        , mV3(std::apply([](auto&... c) { return std::array<nvinfer1::IPluginCreatorV3One*, kSIZE>{&c...}; }, mCreators))
        , mInterfaces(std::apply(
              [](auto&... c) { return std::array<nvinfer1::IPluginCreatorInterface*, kSIZE>{&c...}; }, mCreators))
    {
    }
    CreatorSet(CreatorSet const&) = delete;
    CreatorSet& operator=(CreatorSet const&) = delete;

    //! The creators as IPluginCreatorV3One, for registration.
    std::array<nvinfer1::IPluginCreatorV3One*, kSIZE> const& creators() const noexcept
    {
        return mV3;
    }

    //! The creators as getCreators returns them.
    nvinfer1::IPluginCreatorInterface* const* interfaces() const noexcept
    {
        return mInterfaces.data();
    }

private:
    template <typename>
    static char const* sameFor(char const* value) noexcept
    {
        return value;
    }

    std::tuple<Creators...> mCreators;
    std::array<nvinfer1::IPluginCreatorV3One*, kSIZE> const mV3;
    std::array<nvinfer1::IPluginCreatorInterface*, kSIZE> const mInterfaces;
};

//! Every op of the library, one line each (leading commas, so adding an op adds a line and changes none), in the order
//! getCreators lists them.
using CreatorTable = CreatorSet<L2NormPluginCreator
    , DeformConv2dPluginCreator
    , EfficientNmsPluginCreator
    >;

//! How many creators the library lists (what the tests count against).
constexpr int32_t kNB_CREATORS = CreatorTable::kSIZE;

} // namespace plugins
} // namespace torchtrt_ext
