// qconform's stand-in for cuBLAS's host API header, found only where the toolkit has no cuBLAS (it is searched
// after the toolkit's folders). Kernel files include it for the host code around their kernels: handles in a
// context class, a status checked by a macro. qconform never runs host code (it drops host functions before a
// build), so this header declares the API's types, constants and common entry points and defines nothing: a
// kernel that calls one of them from device code is refused by nvcc, and by emu's object check.
#pragma once
#include <cuda_runtime.h>
#include <library_types.h>
#include <cuComplex.h>
#include <cuda_fp16.h>

typedef struct cublasContext* cublasHandle_t;

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1, CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_ARCH_MISMATCH = 8, CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13, CUBLAS_STATUS_INTERNAL_ERROR = 14, CUBLAS_STATUS_NOT_SUPPORTED = 15,
    CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2, CUBLAS_OP_HERMITAN = 2, CUBLAS_OP_CONJG = 3 }
    cublasOperation_t;
typedef enum { CUBLAS_FILL_MODE_LOWER = 0, CUBLAS_FILL_MODE_UPPER = 1, CUBLAS_FILL_MODE_FULL = 2 } cublasFillMode_t;
typedef enum { CUBLAS_DIAG_NON_UNIT = 0, CUBLAS_DIAG_UNIT = 1 } cublasDiagType_t;
typedef enum { CUBLAS_SIDE_LEFT = 0, CUBLAS_SIDE_RIGHT = 1 } cublasSideMode_t;
typedef enum { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 } cublasPointerMode_t;
typedef enum { CUBLAS_ATOMICS_NOT_ALLOWED = 0, CUBLAS_ATOMICS_ALLOWED = 1 } cublasAtomicsMode_t;
typedef enum {
    CUBLAS_DEFAULT_MATH = 0, CUBLAS_TENSOR_OP_MATH = 1, CUBLAS_PEDANTIC_MATH = 2, CUBLAS_TF32_TENSOR_OP_MATH = 3,
    CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16
} cublasMath_t;
typedef enum {
    CUBLAS_COMPUTE_16F = 64, CUBLAS_COMPUTE_16F_PEDANTIC = 65, CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_PEDANTIC = 69, CUBLAS_COMPUTE_32F_FAST_16F = 74, CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77, CUBLAS_COMPUTE_64F = 70, CUBLAS_COMPUTE_64F_PEDANTIC = 71,
    CUBLAS_COMPUTE_32I = 72, CUBLAS_COMPUTE_32I_PEDANTIC = 73
} cublasComputeType_t;
typedef enum {
    CUBLAS_GEMM_DFALT = -1, CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_ALGO0 = 0, CUBLAS_GEMM_ALGO1 = 1,
    CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99, CUBLAS_GEMM_DFALT_TENSOR_OP = 99
} cublasGemmAlgo_t;

#ifdef __cplusplus
extern "C" {
#endif
cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasGetVersion(cublasHandle_t handle, int* version);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode);
cublasStatus_t cublasSetPointerMode(cublasHandle_t handle, cublasPointerMode_t mode);
cublasStatus_t cublasGetPointerMode(cublasHandle_t handle, cublasPointerMode_t* mode);
cublasStatus_t cublasSetAtomicsMode(cublasHandle_t handle, cublasAtomicsMode_t mode);
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes);
const char* cublasGetStatusName(cublasStatus_t status);
const char* cublasGetStatusString(cublasStatus_t status);
cublasStatus_t cublasSetVector(int n, int elemSize, const void* x, int incx, void* devicePtr, int incy);
cublasStatus_t cublasGetVector(int n, int elemSize, const void* x, int incx, void* y, int incy);
cublasStatus_t cublasSetMatrix(int rows, int cols, int elemSize, const void* A, int lda, void* B, int ldb);
cublasStatus_t cublasGetMatrix(int rows, int cols, int elemSize, const void* A, int lda, void* B, int ldb);

// The classic BLAS entry points as cuBLAS v2 declares them, one set per precision (X: S, D, C, Z; x: its lower
// case for the index searches), with the types real cuBLAS has, so a call with the wrong ones is refused.
#define QCONFORM_CUBLAS_CLASSIC(X, x, T)                                                                              \
cublasStatus_t cublas##X##gemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,      \
    int n, int k, const T* alpha, const T* A, int lda, const T* B, int ldb, const T* beta, T* C, int ldc);            \
cublasStatus_t cublas##X##gemmBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,      \
    int m, int n, int k, const T* alpha, const T* const Aarray[], int lda, const T* const Barray[], int ldb,          \
    const T* beta, T* const Carray[], int ldc, int batchCount);                                                      \
cublasStatus_t cublas##X##gemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,                        \
    cublasOperation_t transb, int m, int n, int k, const T* alpha, const T* A, int lda, long long int strideA,      \
    const T* B, int ldb, long long int strideB, const T* beta, T* C, int ldc, long long int strideC, int batchCount);\
cublasStatus_t cublas##X##gemv(cublasHandle_t handle, cublasOperation_t trans, int m, int n, const T* alpha,         \
    const T* A, int lda, const T* x, int incx, const T* beta, T* y, int incy);                                       \
cublasStatus_t cublas##X##geam(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,      \
    int n, const T* alpha, const T* A, int lda, const T* beta, const T* B, int ldb, T* C, int ldc);                  \
cublasStatus_t cublas##X##dgmm(cublasHandle_t handle, cublasSideMode_t mode, int m, int n, const T* A, int lda,      \
    const T* x, int incx, T* C, int ldc);                                                                            \
cublasStatus_t cublas##X##trsm(cublasHandle_t handle, cublasSideMode_t side, cublasFillMode_t uplo,                  \
    cublasOperation_t trans, cublasDiagType_t diag, int m, int n, const T* alpha, const T* A, int lda, T* B,         \
    int ldb);                                                                                                        \
cublasStatus_t cublas##X##syrk(cublasHandle_t handle, cublasFillMode_t uplo, cublasOperation_t trans, int n, int k,  \
    const T* alpha, const T* A, int lda, const T* beta, T* C, int ldc);                                              \
cublasStatus_t cublas##X##axpy(cublasHandle_t handle, int n, const T* alpha, const T* x, int incx, T* y, int incy);  \
cublasStatus_t cublas##X##scal(cublasHandle_t handle, int n, const T* alpha, T* x, int incx);                        \
cublasStatus_t cublas##X##copy(cublasHandle_t handle, int n, const T* x, int incx, T* y, int incy);                  \
cublasStatus_t cublas##X##swap(cublasHandle_t handle, int n, T* x, int incx, T* y, int incy);                        \
cublasStatus_t cublasI##x##amax(cublasHandle_t handle, int n, const T* x, int incx, int* result);                    \
cublasStatus_t cublasI##x##amin(cublasHandle_t handle, int n, const T* x, int incx, int* result);
// the reductions and the rank-1 update: real precisions (R: the result's type, N: the norm's prefix)
#define QCONFORM_CUBLAS_REDUCTIONS(X, N, T, R)                                                                        \
cublasStatus_t cublas##N##nrm2(cublasHandle_t handle, int n, const T* x, int incx, R* result);                       \
cublasStatus_t cublas##N##asum(cublasHandle_t handle, int n, const T* x, int incx, R* result);
QCONFORM_CUBLAS_CLASSIC(S, s, float)
QCONFORM_CUBLAS_CLASSIC(D, d, double)
QCONFORM_CUBLAS_CLASSIC(C, c, cuComplex)
QCONFORM_CUBLAS_CLASSIC(Z, z, cuDoubleComplex)
QCONFORM_CUBLAS_REDUCTIONS(S, S, float, float)
QCONFORM_CUBLAS_REDUCTIONS(D, D, double, double)
QCONFORM_CUBLAS_REDUCTIONS(C, Sc, cuComplex, float)
QCONFORM_CUBLAS_REDUCTIONS(Z, Dz, cuDoubleComplex, double)
#undef QCONFORM_CUBLAS_CLASSIC
#undef QCONFORM_CUBLAS_REDUCTIONS
cublasStatus_t cublasSdot(cublasHandle_t handle, int n, const float* x, int incx, const float* y, int incy,
                          float* result);
cublasStatus_t cublasDdot(cublasHandle_t handle, int n, const double* x, int incx, const double* y, int incy,
                          double* result);
cublasStatus_t cublasCdotu(cublasHandle_t handle, int n, const cuComplex* x, int incx, const cuComplex* y, int incy,
                           cuComplex* result);
cublasStatus_t cublasCdotc(cublasHandle_t handle, int n, const cuComplex* x, int incx, const cuComplex* y, int incy,
                           cuComplex* result);
cublasStatus_t cublasZdotu(cublasHandle_t handle, int n, const cuDoubleComplex* x, int incx,
                           const cuDoubleComplex* y, int incy, cuDoubleComplex* result);
cublasStatus_t cublasZdotc(cublasHandle_t handle, int n, const cuDoubleComplex* x, int incx,
                           const cuDoubleComplex* y, int incy, cuDoubleComplex* result);
cublasStatus_t cublasSger(cublasHandle_t handle, int m, int n, const float* alpha, const float* x, int incx,
                          const float* y, int incy, float* A, int lda);
cublasStatus_t cublasDger(cublasHandle_t handle, int m, int n, const double* alpha, const double* x, int incx,
                          const double* y, int incy, double* A, int lda);
// half precision's GEMMs, and the single-precision GEMM of other storage types
cublasStatus_t cublasHgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const __half* alpha, const __half* A, int lda, const __half* B, int ldb,
                           const __half* beta, __half* C, int ldc);
cublasStatus_t cublasHgemmBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                  int n, int k, const __half* alpha, const __half* const Aarray[], int lda,
                                  const __half* const Barray[], int ldb, const __half* beta,
                                  __half* const Carray[], int ldc, int batchCount);
cublasStatus_t cublasHgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const __half* alpha, const __half* A, int lda,
                                         long long int strideA, const __half* B, int ldb, long long int strideB,
                                         const __half* beta, __half* C, int ldc, long long int strideC,
                                         int batchCount);
cublasStatus_t cublasSgemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                             int k, const float* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                             cudaDataType Btype, int ldb, const float* beta, void* C, cudaDataType Ctype, int ldc);
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo);
cublasStatus_t cublasGemmBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                   int n, int k, const void* alpha, const void* const Aarray[], cudaDataType Atype,
                                   int lda, const void* const Barray[], cudaDataType Btype, int ldb,
                                   const void* beta, void* const Carray[], cudaDataType Ctype, int ldc,
                                   int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                                          int lda, long long int strideA, const void* B, cudaDataType Btype, int ldb,
                                          long long int strideB, const void* beta, void* C, cudaDataType Ctype,
                                          int ldc, long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo);
#ifdef __cplusplus
}
#endif
// cuBLAS v2's entry points are named `..._v2` (cublas_api.h), the plain names macros for them (cublas_v2.h);
// the stand-in declares the plain names, and these take a program that calls a `_v2` name there
#define cublasCreate_v2 cublasCreate
#define cublasDestroy_v2 cublasDestroy
#define cublasGetVersion_v2 cublasGetVersion
#define cublasSetStream_v2 cublasSetStream
#define cublasGetStream_v2 cublasGetStream
#define cublasSetPointerMode_v2 cublasSetPointerMode
#define cublasGetPointerMode_v2 cublasGetPointerMode
#define cublasSgemm_v2 cublasSgemm
#define cublasSgemv_v2 cublasSgemv
#define cublasSaxpy_v2 cublasSaxpy
#define cublasSscal_v2 cublasSscal
#define cublasScopy_v2 cublasScopy
#define cublasSswap_v2 cublasSswap
#define cublasStrsm_v2 cublasStrsm
#define cublasSsyrk_v2 cublasSsyrk
#define cublasDgemm_v2 cublasDgemm
#define cublasDgemv_v2 cublasDgemv
#define cublasDaxpy_v2 cublasDaxpy
#define cublasDscal_v2 cublasDscal
#define cublasDcopy_v2 cublasDcopy
#define cublasDswap_v2 cublasDswap
#define cublasDtrsm_v2 cublasDtrsm
#define cublasDsyrk_v2 cublasDsyrk
#define cublasCgemm_v2 cublasCgemm
#define cublasCgemv_v2 cublasCgemv
#define cublasCaxpy_v2 cublasCaxpy
#define cublasCscal_v2 cublasCscal
#define cublasCcopy_v2 cublasCcopy
#define cublasCswap_v2 cublasCswap
#define cublasCtrsm_v2 cublasCtrsm
#define cublasCsyrk_v2 cublasCsyrk
#define cublasZgemm_v2 cublasZgemm
#define cublasZgemv_v2 cublasZgemv
#define cublasZaxpy_v2 cublasZaxpy
#define cublasZscal_v2 cublasZscal
#define cublasZcopy_v2 cublasZcopy
#define cublasZswap_v2 cublasZswap
#define cublasZtrsm_v2 cublasZtrsm
#define cublasZsyrk_v2 cublasZsyrk
#define cublasSdot_v2 cublasSdot
#define cublasDdot_v2 cublasDdot
#define cublasCdotu_v2 cublasCdotu
#define cublasCdotc_v2 cublasCdotc
#define cublasZdotu_v2 cublasZdotu
#define cublasZdotc_v2 cublasZdotc
#define cublasSger_v2 cublasSger
#define cublasDger_v2 cublasDger
#define cublasSnrm2_v2 cublasSnrm2
#define cublasDnrm2_v2 cublasDnrm2
#define cublasScnrm2_v2 cublasScnrm2
#define cublasDznrm2_v2 cublasDznrm2
#define cublasSasum_v2 cublasSasum
#define cublasDasum_v2 cublasDasum
#define cublasScasum_v2 cublasScasum
#define cublasDzasum_v2 cublasDzasum
#define cublasIsamax_v2 cublasIsamax
#define cublasIdamax_v2 cublasIdamax
#define cublasIcamax_v2 cublasIcamax
#define cublasIzamax_v2 cublasIzamax
#define cublasIsamin_v2 cublasIsamin
#define cublasIdamin_v2 cublasIdamin
#define cublasIcamin_v2 cublasIcamin
#define cublasIzamin_v2 cublasIzamin
