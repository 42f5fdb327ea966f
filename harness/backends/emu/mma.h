// Resolves `#include <mma.h>` in kernel source: CUDA's WMMA API (nvcuda::wmma) on the emu runtime, emu_wmma.hpp.
#pragma once
#include "emu_device.hpp"
#include "emu_wmma.hpp"
