// Resolves `#include <cub/warp/warp_reduce.cuh>`: emu's CUB subset is one header (cub.cuh, beside this folder).
#pragma once
#include "../cub.cuh"
