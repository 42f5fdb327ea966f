// Resolves `#include <mma.h>` in kernel source. emu runs the inline-PTX tensor-core instructions (mma.sync, ldmatrix,
// stmatrix); the WMMA API this header declares (nvcuda::wmma) is not provided: its namespaces exist, empty, so that
// `using namespace nvcuda;` compiles, and a source that uses a WMMA name is UnsupportedConstruct saying so.
#pragma once
#include "emu_device.hpp"
namespace nvcuda { namespace wmma {} }
