// Per-block phase stamps of the fused kernels (fusedKernel, fusedPairKernel and fusedWsKernel of
// deform_conv2d_sm90.cuh), compiled in only where TORCHTRT_EXT_DCN_TRACE is defined (setup.py:
// TORCHTRT_EXT_DCN_TRACE=1): a diagnostic build for bench/deform_conv_trace.py, never a shipped one. Thread 0 of block
// b < kTraceBlocks writes row b of traceRows: the globaltimer (ns) at the block's start and end, its multiprocessor and
// reduction blocks, and its clock64 at each phase boundary (TraceSlot); the timeline of a launch's tiles on their
// multiprocessors, which the kernel's total time (torch.profiler, ncu) cannot show. fusedWsKernel's stamps are a
// consumer thread's (its thread 0): its "pipeline fill" is nothing, its first wgmma waits for the producers' first
// stage. Without the define, DCN_TRACE(slot, value) and DCN_TRACE_END(reduction_blocks) are nothing and their
// arguments are not evaluated: the kernels are the same code.
#pragma once

#ifdef TORCHTRT_EXT_DCN_TRACE

namespace torchtrt_ext {
namespace deform_conv2d_detail {

constexpr int kTraceBlocks = 4096;  // blocks of a launch that get a row (later ones write nothing)
constexpr int kTraceSlots = 16;     // 64-bit slots a row
// A row's slots (mirrored in bench/deform_conv_trace.py's SLOTS); the clock64 stamps are taken by thread 0 after it
// passed the named point.
enum TraceSlot : int {
    kTraceStartNs = 0,           // globaltimer at entry
    kTraceEndNs = 1,             // globaltimer at exit
    kTraceSm = 2,                // %smid
    kTraceReductionBlocks = 3,   // the tile's reduction blocks (k_blocks)
    kTraceStart = 4,             // clock64 at entry
    kTraceTableFilled = 5,       // the first corner table filled (offsets and mask only)
    kTraceWaited = 6,            // the kernels before it done (waitPrevious) and the block's threads met
    kTraceLoopStart = 7,         // blocks 0 and 1 read, block 0 stored: the pipeline full (fusedWsKernel: at once)
    kTraceFirstIssued = 8,       // block 0's wgmma issued (its stage's barrier passed)
    kTraceMiddle = 9,            // the top of reduction block k_blocks / 2
    kTraceLoopEnd = 10,          // the last wgmma done
    kTraceEnd = 11,              // the output (or partial sums) stored
};

__device__ unsigned long long traceRows[kTraceBlocks * kTraceSlots];

__device__ __forceinline__ void traceAt(int slot, unsigned long long value) {
    if (threadIdx.x == 0 && blockIdx.x < kTraceBlocks) traceRows[blockIdx.x * kTraceSlots + slot] = value;
}

__device__ __forceinline__ unsigned long long traceNs() {
    unsigned long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    return ns;
}

__device__ __forceinline__ unsigned long long traceSm() {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    return sm;
}

// The stamps of a block's end: its clock and globaltimer, its multiprocessor and reduction blocks.
__device__ __forceinline__ void traceBlockEnd(int reduction_blocks) {
    traceAt(kTraceEnd, clock64());
    traceAt(kTraceEndNs, traceNs());
    traceAt(kTraceSm, traceSm());
    traceAt(kTraceReductionBlocks, static_cast<unsigned long long>(reduction_blocks));
}

}  // namespace deform_conv2d_detail
}  // namespace torchtrt_ext

#define DCN_TRACE(slot, value) ::torchtrt_ext::deform_conv2d_detail::traceAt((slot), (value))
#define DCN_TRACE_END(reduction_blocks) ::torchtrt_ext::deform_conv2d_detail::traceBlockEnd(reduction_blocks)
#else
#define DCN_TRACE(slot, value) static_cast<void>(0)
#define DCN_TRACE_END(reduction_blocks) static_cast<void>(0)
#endif
