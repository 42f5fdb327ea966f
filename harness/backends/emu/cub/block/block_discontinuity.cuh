// Resolves `#include <cub/block/block_discontinuity.cuh>`: emu's CUB subset is one header (cub.cuh, beside this folder).
#pragma once
#include "../cub.cuh"
