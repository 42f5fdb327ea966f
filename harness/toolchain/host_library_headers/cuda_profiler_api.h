// qconform's stand-in for the CUDA profiler API's header (a toolkit component of its own), found only where the
// toolkit has none: a benchmark's host code starts and stops the profiler around its timed launches. Declarations
// only; qconform never runs host code.
#pragma once
#include <cuda_runtime.h>

cudaError_t cudaProfilerStart(void);
cudaError_t cudaProfilerStop(void);
