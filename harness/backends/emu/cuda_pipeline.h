// Resolves `#include <cuda_pipeline.h>` in kernel source: the __pipeline_* primitives live in emu_device.hpp.
#include "emu_device.hpp"
