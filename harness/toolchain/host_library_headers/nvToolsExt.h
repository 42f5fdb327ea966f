// qconform's stand-in for NVTX's header where a program includes it as NVTX 2 did (<nvToolsExt.h>): the same
// declarations as nvtx3/nvToolsExt.h, found only where the toolkit has no NVTX.
#pragma once
#include "nvtx3/nvToolsExt.h"
