// Resolves `#include <cub/block/block_load.cuh>`: emu's CUB subset is one header (cub.cuh, beside this folder).
#pragma once
#include "../cub.cuh"
