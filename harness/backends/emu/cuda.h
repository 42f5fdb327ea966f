// Resolves `#include <cuda.h>` in kernel source to the qconform emu runtime (device code only: the driver API
// is host code, which emu does not run).
#include "emu_device.hpp"
