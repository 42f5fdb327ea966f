// Resolves `#include <cub/block/block_exchange.cuh>`: emu's CUB subset is one header (cub.cuh, beside this folder).
#pragma once
#include "../cub.cuh"
