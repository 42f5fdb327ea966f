// Resolves `#include <cuda_runtime_api.h>` in kernel source to the qconform emu runtime (device code needs nothing of
// the runtime API; a source that calls it is UnsupportedConstruct).
#include "emu_device.hpp"
