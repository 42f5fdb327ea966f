// Resolves `#include <cuda.h>` in kernel source to the qconform emu runtime (device code only: the driver API
// is host code, which emu does not run).
#pragma once
#include "emu_device.hpp"
// The driver API's version, which only cuda.h defines (a program that tests it without including cuda.h reads 0,
// as with nvcc): the same toolkit as CUDART_VERSION, so `#if CUDA_VERSION < 9000` fallbacks stay off (mshadow's
// empty __syncwarp for CUDA 8).
#ifndef CUDA_VERSION
#define CUDA_VERSION 12080
#endif
