// Resolves `#include <cuda_fp4.h>` in kernel source to the qconform emu runtime (emu_float_mx.hpp, through the
// device header).
#include "emu_device.hpp"
