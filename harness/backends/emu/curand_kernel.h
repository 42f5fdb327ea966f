// qconform emu: cuRAND's device API is the CUDA toolkit's own curand_kernel.h (the toolchain extra installs it
// with the nvidia-curand wheel), compiled as emu device code with the kernel: NVIDIA's own generator code runs,
// and the race detector sees every access to a generator's state. The toolkit header expects
// a few names of the CUDA runtime's headers that emu's do not declare; they come first.
#pragma once
#include "emu_device.hpp"
#ifndef __NV_SILENCE_DEPRECATION_BEGIN
#define __NV_SILENCE_DEPRECATION_BEGIN
#define __NV_SILENCE_DEPRECATION_END
#endif
typedef enum libraryPropertyType_t { MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL } libraryPropertyType;
#if __has_include_next(<curand_kernel.h>)
#include_next <curand_kernel.h>
#else
#error "qconform-emu: curand_kernel.h (cuRAND's device API) comes from the CUDA toolkit, and the toolkit found here has none: install the toolchain extra (its nvidia-curand wheel) or a CUDA toolkit with cuRAND"
#endif
