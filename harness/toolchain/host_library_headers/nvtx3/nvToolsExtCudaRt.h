// qconform's stand-in for NVTX's CUDA runtime names (naming devices, streams and events in a profile), found only
// where the toolkit has no NVTX. Declarations only, as in nvToolsExt.h beside it.
#pragma once
#include <cuda_runtime.h>
#include "nvToolsExt.h"

#ifdef __cplusplus
extern "C" {
#endif
void nvtxNameCudaDeviceA(int device, const char* name);
void nvtxNameCudaStreamA(cudaStream_t stream, const char* name);
void nvtxNameCudaEventA(cudaEvent_t event, const char* name);
#ifdef __cplusplus
}
#endif

#define nvtxNameCudaDevice nvtxNameCudaDeviceA
#define nvtxNameCudaStream nvtxNameCudaStreamA
#define nvtxNameCudaEvent nvtxNameCudaEventA
