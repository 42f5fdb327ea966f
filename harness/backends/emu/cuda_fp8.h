// Resolves `#include <cuda_fp8.h>` in kernel source to the qconform emu runtime (emu_float8.hpp, through the
// device header).
#include "emu_device.hpp"
