// Resolves `#include <cuda_device_runtime_api.h>` to the qconform emu runtime: the device runtime's calls that emu
// has (the grid-dependency controls among them) are in emu_device.hpp; the others are refused by name.
#pragma once
#include "emu_device.hpp"
