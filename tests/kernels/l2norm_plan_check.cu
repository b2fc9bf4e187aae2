// Host-only check of the L2Norm launch plan (runs without a GPU; tests/kernels/test_l2norm_plan.py builds and runs it).
//
// For many [outer, reduced, inner] views, the three data types, aligned and misaligned pointers and three device
// profiles, the plan makePlan picks must pass planIsValid: a plan it rejects makes the launcher return
// cudaErrorInvalidValue for a valid input. Then one line per benchmark case names the kernel picked:
//     case <name> <dtype> <device> kind=<k> tx=<tx> ty=<ty> per_thread=<n> grid=<g>
// and the last line is "checked <n> plans, <f> rejected".
#include "kernels/l2norm.cu"

#include <cstdio>

namespace {

using torchtrt_ext::l2norm_detail::Device;
using torchtrt_ext::l2norm_detail::Plan;
using torchtrt_ext::l2norm_detail::Tuning;
using torchtrt_ext::l2norm_detail::makePlan;
using torchtrt_ext::l2norm_detail::planIsValid;

struct Profile {
    char const* name;
    Device dev;
};

// H200 (sm_90), A100 (sm_80) and T4 (sm_75): SM count and opt-in shared memory per block.
constexpr Profile kProfiles[] = {{"h200", {132, 227 * 1024}}, {"a100", {108, 163 * 1024}}, {"t4", {40, 64 * 1024}}};

// Fake device addresses: the plan only looks at their alignment.
void const* const kAligned = reinterpret_cast<void const*>(uintptr_t{1} << 20);

template <typename T>
Plan plan(void const* x, void const* y, int64_t outer, int64_t reduced, int64_t inner, Device const& dev) {
    return makePlan<T>(x, y, outer, reduced, inner, dev, Tuning{});
}

template <typename T>
bool valid(Plan const& p, void const* x, void const* y, int64_t outer, int64_t reduced, int64_t inner,
           Device const& dev) {
    return planIsValid(p, static_cast<int32_t>(16 / sizeof(T)), outer, reduced, inner, x, y, dev);
}

template <typename T>
void sweep(char const* dtype, int64_t& checked, int64_t& rejected) {
    static constexpr int64_t kOuter[] = {1, 2, 3, 7, 64, 1000, 300001};
    static constexpr int64_t kReduced[] = {1,   2,   3,   31,   32,   33,   63,   64,   65,    255,   256,    257,    511,
                                           512, 513, 600, 1000, 1023, 1024, 1025, 2048, 4096, 7000, 8192, 16385, 32768,
                                           65536, 100000, int64_t{1} << 20};
    static constexpr int64_t kInner[] = {1, 2, 3, 4, 7, 8, 16, 24, 56, 64, 100, 1024, 4096, 6400, 16384};
    void const* const misaligned = static_cast<char const*>(kAligned) + sizeof(T);
    for (Profile const& prof : kProfiles) {
        for (int64_t outer : kOuter) {
            for (int64_t reduced : kReduced) {
                for (int64_t inner : kInner) {
                    for (void const* x : {kAligned, misaligned}) {
                        Plan const p = plan<T>(x, kAligned, outer, reduced, inner, prof.dev);
                        ++checked;
                        if (!valid<T>(p, x, kAligned, outer, reduced, inner, prof.dev)) {
                            ++rejected;
                            std::printf("rejected %s %s outer=%lld reduced=%lld inner=%lld aligned=%d kind=%d\n",
                                        dtype, prof.name, static_cast<long long>(outer),
                                        static_cast<long long>(reduced), static_cast<long long>(inner),
                                        x == kAligned ? 1 : 0, static_cast<int>(p.kind));
                        }
                    }
                }
            }
        }
    }
}

template <typename T>
void describe(char const* dtype) {
    struct Case {
        char const* name;
        int64_t outer, reduced, inner;
    };
    static constexpr Case kCases[] = {{"det_head_nchw", 8, 256, 128 * 128},
                                      {"wide_nchw", 4, 1024, 64 * 64},
                                      {"small_nchw", 1, 64, 80 * 80},
                                      {"tokens_last", 8 * 4096, 1024, 1}};
    for (Profile const& prof : kProfiles) {
        for (Case const& c : kCases) {
            Plan const p = plan<T>(kAligned, kAligned, c.outer, c.reduced, c.inner, prof.dev);
            std::printf("case %s %s %s kind=%d tx=%d ty=%d per_thread=%d grid=%lld\n", c.name, dtype, prof.name,
                        static_cast<int>(p.kind), p.tx, p.ty, p.perThread, static_cast<long long>(p.grid));
        }
    }
}

}  // namespace

int main() {
    int64_t checked = 0;
    int64_t rejected = 0;
    sweep<float>("fp32", checked, rejected);
    sweep<__half>("fp16", checked, rejected);
    sweep<__nv_bfloat16>("bf16", checked, rejected);
    describe<float>("fp32");
    describe<__half>("fp16");
    std::printf("checked %lld plans, %lld rejected\n", static_cast<long long>(checked),
                static_cast<long long>(rejected));
    return rejected == 0 ? 0 : 1;
}
