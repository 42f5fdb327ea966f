// Resolves `#include <cub/thread/thread_operators.cuh>`: emu's CUB subset is one header (cub.cuh, beside this folder).
#pragma once
#include "../cub.cuh"
