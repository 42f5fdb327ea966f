// Resolves `#include <cuda_bf16.h>` in kernel source to the qconform emu runtime (__nv_bfloat16 lives in
// emu_float16.hpp, which the device header includes).
#include "emu_device.hpp"
