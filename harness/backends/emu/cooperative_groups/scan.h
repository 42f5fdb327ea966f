// Resolves `#include <cooperative_groups/scan.h>` in kernel source: emu's cooperative_groups.h has the tile
// reductions and scans.
#include "../cooperative_groups.h"
