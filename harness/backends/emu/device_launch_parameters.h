// Resolves `#include <device_launch_parameters.h>` in kernel source to the qconform emu runtime.
#include "emu_device.hpp"
