// Resolves `#include <device_functions.h>` in kernel source to emu's runtime, which declares what this legacy header of the
// CUDA toolkit declares (the runtime's device API brings it in; older code includes it by name).
#pragma once
#include <math.h>
#include "emu_device.hpp"
