// Resolves `#include <cub/util_type.cuh>` (KeyValuePair): emu's CUB subset is one header (cub.cuh).
#pragma once
#include "cub.cuh"
