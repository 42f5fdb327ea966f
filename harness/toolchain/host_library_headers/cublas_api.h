// qconform stand-in: cuBLAS host API declarations (see cublas_v2.h)
#pragma once
#include "cublas_v2.h"
