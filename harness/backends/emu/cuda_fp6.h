// Resolves `#include <cuda_fp6.h>` in kernel source to the qconform emu runtime (emu_float_mx.hpp, through the
// device header).
#include "emu_device.hpp"
