// Resolves `#include <cuda_fp16.h>` in kernel source to the qconform emu runtime (__half lives there).
#include "emu_device.hpp"
