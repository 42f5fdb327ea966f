// Resolves `#include <cuda_runtime.h>` in kernel source to the qconform emu runtime.
#include "emu_device.hpp"
