// qconform emu device header: what CUDA C device code sees when compiled for the emu backend (force-included
// ahead of the kernel source; `#include <cuda_runtime.h>` / `<cuda_fp16.h>` resolve here too).
//
// Every CUDA thread of a block is a cooperative fiber; blocks run one after another. __syncthreads is a
// block barrier; warp shuffles, votes, __syncwarp and the int8 mma are warp rendezvous. The scheduler and the
// checks live in emu_runtime.cpp, compiled once and linked into every module with hidden visibility, so each
// loaded module has its own copy of the runtime state (modules also use -fno-gnu-unique for that reason).
#pragma once
#ifndef QCONFORM_EMU_DEVICE_HPP
#define QCONFORM_EMU_DEVICE_HPP

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <cstdarg>
#include <cmath>
#include <climits>
#include <cfloat>
#include <cassert>
#include <type_traits>
#include <utility>
#include <memory>      // before __noinline__ is a macro: libstdc++'s shared_ptr spells the attribute so
// CUDA's math API declares the classification functions in the global namespace too (device code calls `isinf(x)`
// unqualified: ggml's flash attention); <cmath> puts them in std:: only.
using std::isfinite;
using std::isinf;
using std::isnan;
using std::signbit;

#define EMU_EXPORT extern "C" __attribute__((visibility("default")))

// ---------------------------------------------------------------------------------------------------
// CUDA built-in vector types (alignment as CUDA defines it).
struct uint3 { unsigned int x, y, z; };
// The runtime's handle and status types, for the host declarations a program's files keep where host functions are
// dropped (a launcher's function-pointer typedef, a prototype): nothing here creates a stream or returns a status.
typedef struct CUstream_st* cudaStream_t;
enum cudaSharedMemConfig { cudaSharedMemBankSizeDefault = 0, cudaSharedMemBankSizeFourByte = 1,
                          cudaSharedMemBankSizeEightByte = 2 };
typedef struct CUevent_st* cudaEvent_t;
typedef enum cudaError {
  cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorInitializationError = 3,
  cudaErrorCudartUnloading = 4, cudaErrorInvalidConfiguration = 9, cudaErrorInvalidPitchValue = 12,
  cudaErrorInvalidSymbol = 13, cudaErrorInvalidMemcpyDirection = 21, cudaErrorInsufficientDriver = 35,
  cudaErrorInvalidDeviceFunction = 98, cudaErrorNoDevice = 100, cudaErrorInvalidDevice = 101,
  cudaErrorNotReady = 600, cudaErrorIllegalAddress = 700, cudaErrorLaunchOutOfResources = 701,
  cudaErrorLaunchTimeout = 702, cudaErrorPeerAccessAlreadyEnabled = 704, cudaErrorPeerAccessNotEnabled = 705,
  cudaErrorAssert = 710, cudaErrorIllegalInstruction = 715, cudaErrorMisalignedAddress = 716,
  cudaErrorLaunchFailure = 719, cudaErrorNotSupported = 801, cudaErrorUnknown = 999
} cudaError_t;

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};
#define EMU_VEC1(T, N, A) struct __attribute__((aligned(A))) N##1 { T x; }; \
  inline N##1 make_##N##1(T x) { return N##1{x}; }
#define EMU_VEC2(T, N, A) struct __attribute__((aligned(A))) N##2 { T x, y; }; \
  inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }
#define EMU_VEC3(T, N) struct N##3 { T x, y, z; }; \
  inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }
#define EMU_VEC4(T, N, A) struct __attribute__((aligned(A))) N##4 { T x, y, z, w; }; \
  inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
// The 8-byte element types' 4-vectors also come as the explicitly aligned _16a / _32a of CUDA 13.
#define EMU_VEC4_ALIGNED(T, N) \
  struct __attribute__((aligned(16))) N##4_16a { T x, y, z, w; }; \
  inline N##4_16a make_##N##4_16a(T x, T y, T z, T w) { return N##4_16a{x, y, z, w}; } \
  struct __attribute__((aligned(32))) N##4_32a { T x, y, z, w; }; \
  inline N##4_32a make_##N##4_32a(T x, T y, T z, T w) { return N##4_32a{x, y, z, w}; }
#define EMU_VECS(T, N, S) EMU_VEC1(T, N, S) EMU_VEC2(T, N, 2 * S) EMU_VEC3(T, N) EMU_VEC4(T, N, (4 * S > 16 ? 16 : 4 * S))
EMU_VECS(signed char, char, 1)
EMU_VECS(unsigned char, uchar, 1)
EMU_VECS(short, short, 2)
EMU_VECS(unsigned short, ushort, 2)
EMU_VECS(int, int, 4)
EMU_VEC1(unsigned int, uint, 4) EMU_VEC2(unsigned int, uint, 8) EMU_VEC4(unsigned int, uint, 16)
EMU_VECS(long, long, 8) EMU_VEC4_ALIGNED(long, long)
EMU_VECS(unsigned long, ulong, 8) EMU_VEC4_ALIGNED(unsigned long, ulong)
EMU_VECS(long long, longlong, 8) EMU_VEC4_ALIGNED(long long, longlong)
EMU_VECS(unsigned long long, ulonglong, 8) EMU_VEC4_ALIGNED(unsigned long long, ulonglong)
EMU_VECS(float, float, 4)
EMU_VECS(double, double, 8) EMU_VEC4_ALIGNED(double, double)
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }
#undef EMU_VECS
#undef EMU_VEC4_ALIGNED
#undef EMU_VEC1
#undef EMU_VEC2
#undef EMU_VEC3
#undef EMU_VEC4

// The texture descriptors' enumerations of CUDA's runtime header (texture_types.h), which every .cu file sees:
// device code may name them in templates and constants although emu runs no texture fetch.
enum cudaTextureReadMode { cudaReadModeElementType = 0, cudaReadModeNormalizedFloat = 1 };
enum cudaTextureAddressMode { cudaAddressModeWrap = 0, cudaAddressModeClamp = 1, cudaAddressModeMirror = 2,
                              cudaAddressModeBorder = 3 };
enum cudaTextureFilterMode { cudaFilterModePoint = 0, cudaFilterModeLinear = 1 };
#define cudaTextureType1D 0x01
#define cudaTextureType2D 0x02
#define cudaTextureType3D 0x03
#define cudaTextureTypeCubemap 0x0C
#define cudaTextureType1DLayered 0xF1
#define cudaTextureType2DLayered 0xF2
#define cudaTextureTypeCubemapLayered 0xFC
#define cudaSurfaceType1D 0x01
#define cudaSurfaceType2D 0x02
#define cudaSurfaceType3D 0x03
#define cudaSurfaceTypeCubemap 0x0C
#define cudaSurfaceType1DLayered 0xF1
#define cudaSurfaceType2DLayered 0xF2
#define cudaSurfaceTypeCubemapLayered 0xFC
enum cudaSurfaceBoundaryMode { cudaBoundaryModeZero = 0, cudaBoundaryModeClamp = 1, cudaBoundaryModeTrap = 2 };
// Texture and surface objects are handles the host creates; a kernel may take, store and pass them (emu runs no
// fetch from one: emu refuses texture fetches and surface loads and stores with their reason).
typedef unsigned long long cudaTextureObject_t;
typedef unsigned long long cudaSurfaceObject_t;
// The runtime's extent, position and pitched-pointer structs (driver_types.h), which kernels take by value (their
// make_ functions are host code in CUDA, so device code has none).
struct cudaExtent { size_t width, height, depth; };
struct cudaPos { size_t x, y, z; };
struct cudaPitchedPtr { void* ptr; size_t pitch, xsize, ysize; };

#include "emu_float16.hpp"   // __half, __nv_bfloat16 and their pairs
#include "emu_float8.hpp"    // __nv_fp8_e4m3, __nv_fp8_e5m2, __nv_fp8_e8m0 and the __nv_cvt_* conversions
#include "emu_float_mx.hpp"  // __nv_fp6_e2m3, __nv_fp6_e3m2, __nv_fp4_e2m1 and their conversions

namespace emu {

enum WaitKind : int { W_NONE = 0, W_BAR, W_SHFL_IDX, W_SHFL_UP, W_SHFL_DOWN, W_SHFL_XOR, W_BALLOT, W_ANY, W_ALL,
                      W_SYNCWARP, W_MMA, W_REDUCE_ADD, W_REDUCE_MIN, W_REDUCE_MAX, W_REDUCE_AND, W_REDUCE_OR,
                      W_REDUCE_XOR, W_MATCH_ANY, W_MATCH_ALL, W_LDMATRIX, W_STMATRIX, W_NAMED, W_GRID,
                      W_CONVERGE };

// threadIdx expands to __tid: a reserved name, so a kernel's own `#define tid ...` cannot reach into it
struct FiberHead { uint3 __tid; int linear, warp, lane; };

// ---- runtime state and entry points (defined in emu_runtime.cpp) --------------------------------------
extern FiberHead* g_cur;
extern uint3 g_block_idx;
extern dim3 g_block_dim, g_grid_dim;
void syncthreads(int line);
int syncthreads_count(int pred, int line);   // a block barrier that also counts the threads' predicates
uint64_t warp_collective(int kind, unsigned mask, int line, uint64_t v, int b, int c);
[[noreturn]] void bad_width(int kind, int width, int line);
// The warp-wide matrix instructions of inline PTX (mma.sync, ldmatrix, stmatrix; ptx.py): every lane of the
// warp hands in `nin` 32-bit registers and, once all 32 have arrived, gets `nout` back. `code` says which form
// (matrix_code below, or the matrix count and .trans of ldmatrix/stmatrix).
void matrix_collective(int kind, int code, const uint32_t* in, int nin, uint32_t* out, int nout, int line);
// kWarpScratch bytes of the calling warp's own, outside every range the race detector tracks: where WMMA's mma_sync
// (emu_wmma.hpp) gathers the lanes' fragments between two meetings of the warp.
constexpr size_t kWarpScratch = 3 * 512 * sizeof(double);
void* warp_scratch();
// mma.sync's element types, and its form packed into one code: A, B, C and D types, K (8, 16 or 32), .satfinite.
enum MatrixType : int { MT_S8 = 1, MT_U8, MT_F16, MT_BF16, MT_E4M3, MT_E5M2, MT_S32, MT_F32 };
constexpr int matrix_code(int a, int b, int c, int d, int k, bool satfinite) {
  return a | b << 4 | c << 8 | d << 12 | k << 16 | int(satfinite) << 24;
}
unsigned char* shared_slot(int id, size_t bytes, size_t align, const char* name, int line, int elem,
                           const char* file = nullptr,    // file: a header's name (the source's own: null)
                           const void* instance = nullptr);  // which instantiation of a function declares it
unsigned char* dyn_shared(const char* name = nullptr, int elem = 1);
int device_printf(const char* fmt, ...);
[[noreturn]] void trap(int line);
[[noreturn]] void assumption_false(const char* condition, const char* file, int line);
unsigned activemask();           // the warp's lanes that have not exited (the rendezvous set of sub-warp tiles)
unsigned converged(int line);    // __activemask: the lanes that converge with the caller at `line`
long long clock_tick();
// What the memory model needs to know of an atomic operation: its scope (the threads it is atomic with and can
// synchronize with: those of its block, or of the device) and whether it acquires or releases by itself
// (cuda::atomic with a memory order) or only through fences (CUDA's atomicXxx functions are relaxed).
enum AtomicScope : int { kScopeBlock = 1, kScopeDevice = 2 };
enum AtomicOrder : int { kRelaxed = 0, kAcquire = 1, kRelease = 2, kAcqRel = 3 };
// With the order, for the race detector: the atomic write reads the value before it (a read-modify-write, not a store).
constexpr int kReadModifyWrite = 4;
// Called before every atomic access (see the atomics section below): the race detector marks the access at
// `p` as atomic (emu_race.hpp).
void atomic_access(const volatile void* p, size_t bytes, bool is_write, int line, int scope, int order);
// Called after every atomic access: `changed`, whether it changed the bytes at `p`; `seen`, the value it read.
// A thread that keeps reading the same value at the same address is spinning: it yields to the other threads of
// its block (emu_runtime.cpp), so that a lock or a flag another warp holds can be released.
void atomic_done(const volatile void* p, bool changed, uint64_t seen, unsigned bytes);
void fence(int scope);      // __threadfence_block (kScopeBlock), __threadfence and __threadfence_system
// Barrier objects (emu_barrier.hpp, named barriers): an arrival releases the thread's accesses before it; the last
// arrival of a phase marks its end; a wait that saw the phase complete acquires every arrival up to that end
// (emu_race.hpp).
void phase_arrive(const volatile void* object, int scope);
void phase_complete(const volatile void* object, uint64_t phase);
void phase_acquire(const volatile void* object, uint64_t phase, int scope);
// A misuse of an arrive-wait barrier (emu_barrier.hpp) at `line`: traps, naming the operation and the rule broken.
[[noreturn]] void barrier_fault(const volatile void* bar, const char* op, const char* why, int line);
// A library collective (emu's CUB) used against its rule at `line`: traps, naming it and the rule broken.
[[noreturn]] void library_fault(const char* what, const char* why, int line);
// The barriers initialised in the running block: init notes one, inval forgets it, and every arrival or wait first
// checks that its barrier was initialised (in shared memory) and that the init happens before it (the detector).
void barrier_init_seen(const volatile void* bar, int line);
void barrier_invalidated(const volatile void* bar);
void barrier_use(const volatile void* bar, const char* op, int line);
// PTX's named barriers (bar.sync / bar.arrive / barrier.sync with an id, and a thread count or 0 for the whole block):
// `wait` false only arrives. Barrier 0 with the whole block is __syncthreads. Returns how many of the phase's threads
// passed a true `pred` (to the threads that wait).
unsigned named_barrier(unsigned id, unsigned count, bool wait, int line, bool pred = false);
enum BarrierReduction : int { kBarPopc = 0, kBarAnd, kBarOr };
unsigned barrier_reduce(unsigned id, unsigned count, int op, bool pred, int line);
// cooperative groups' grid.sync(): every thread of every block of the launch arrives before any goes on.
void grid_sync(int line);
// Asynchronous copies (__pipeline_memcpy_async): the runtime keeps each thread's pending copies in batches;
// async_enqueue checks one and queues it, async_commit closes the open batch, and async_ready hands back (and
// forgets) the copies of every committed batch but the newest `keep`, which the caller then performs.
struct AsyncCopy { void* dst; const void* src; unsigned bytes, zfill; };
constexpr int kMaxAsyncCopies = 128;      // pending copies of one thread
void async_enqueue(void* dst, const void* src, size_t bytes, size_t zfill, int line);
void async_commit();
int async_ready(size_t keep, AsyncCopy* out);
constexpr size_t kAllAsync = ~size_t(0);  // async_ready's `keep` for every pending copy, uncommitted ones too
// Shared-space addresses (__cvta_generic_to_shared, inline PTX's shared operands) and back; either traps on an
// address outside the block's shared memory.
uint32_t shared_window(const void* p, int line);
void* shared_generic(uint64_t a, int line);
bool is_shared(const void* p);

template <class T>
inline uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a type wider than 8 bytes");
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof(T));
  return u;
}
template <class T>
inline T from_bits(uint64_t u) {
  T v;
  std::memcpy(&v, &u, sizeof(T));
  return v;
}

// PTX shfl.sync operand c: segment mask in bits 12:8, clamp lane in bits 4:0.
template <class T>
inline T shfl(int kind, unsigned mask, T var, int b, int width, int line) {
  if (width <= 0 || width > 32 || (width & (width - 1))) bad_width(kind, width, line);
  int c = ((32 - width) << 8) | (kind == W_SHFL_UP ? 0 : 0x1f);
  return from_bits<T>(warp_collective(kind, mask, line, to_bits(var), b, c));
}
inline unsigned vote(int kind, unsigned mask, int pred, int line) {
  return unsigned(warp_collective(kind, mask, line, pred != 0, 0, 0));
}
inline void syncwarp(unsigned mask, int line) { warp_collective(W_SYNCWARP, mask, line, 0, 0, 0); }
// sm_80's redux.sync (b: 1 where min/max compare as signed; and/or/xor ignore it) and sm_70's match.sync: collectives
// of the lanes in
// `mask`, as shuffles are, so they order those lanes for the race detector too.
inline unsigned reduce(int kind, unsigned mask, unsigned v, bool is_signed, int line) {
  return unsigned(warp_collective(kind, mask, line, v, is_signed, 0));
}
template <class T>
inline unsigned match(int kind, unsigned mask, T v, int line) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "__match_*_sync takes a 32- or 64-bit value");
  return unsigned(warp_collective(kind, mask, line, to_bits(v), 0, 0));
}

constexpr size_t larger(size_t a, size_t b) { return a > b ? a : b; }   // of two __align__/alignas of one declaration
// A __shared__ variable declared in a function: one per block for each instantiation of that function, as a static
// local is (llm.c's blockReduce<warpReduceMax> and blockReduce<warpReduceSum> each have their own buffer). `site`
// is a static local of the declaring function, so its address tells the instantiations apart.
template <class T>
inline T& shared_local(const char* site, int id, const char* name, int line,
                       size_t align = 16,                  // align: the source's __align__
                       const char* file = nullptr) {       // file: a header's, declared there
  size_t a = alignof(T) > align ? alignof(T) : align;
  return *reinterpret_cast<T*>(shared_slot(id, sizeof(T), a < 16 ? 16 : a, name, line,
                                           int(sizeof(std::remove_all_extents_t<T>)), file, site));
}
// One declared at file scope: one per block, whichever function names it.
template <class T>
inline T& shared_var(int id, const char* name, int line, size_t align = 16, const char* file = nullptr) {
  return shared_local<T>(nullptr, id, name, line, align, file);
}

// ---- launch trampolines ---------------------------------------------------------------------------------
template <class... A, size_t... I>
inline void invoke_impl(void (*f)(A...), void** a, std::index_sequence<I...>) {
  f(*static_cast<typename std::decay<A>::type*>(a[I])...);
}
template <class... A>
inline void invoke(void (*f)(A...), void** a) {
  invoke_impl(f, a, std::index_sequence_for<A...>{});
}
template <auto F>
void thunk(void** a) { invoke(F, a); }
// The kernel of a name: the one function of it that returns void. A kernel may share its name with a C library
// function (`div`, `round`) whose overloads return values; deduction picks the kernel among them.
template <class... A>
constexpr auto kernel_fn(void (*f)(A...)) { return f; }
template <class... A>
constexpr int arity(void (*)(A...)) { return int(sizeof...(A)); }
// Constant-initialized (no code runs when a module loads: the device-code gate refuses load-time code).
template <class... A>
struct ParamSizes { static constexpr int value[] = {int(sizeof(typename std::decay<A>::type))..., 0}; };
template <class... A>
constexpr const int* param_sizes(void (*)(A...)) { return ParamSizes<A...>::value; }

struct KernelEntry {
  const char* name;
  void (*call)(void**);
  int nparams;
  const int* sizes;
};

}  // namespace emu

#ifndef EMU_RUNTIME_IMPL
// ---------------------------------------------------------------------------------------------------------
// CUDA device API, as macros and functions over the runtime above.
// Device code is compiled as for compute capability 9.0 (the sm_90 limits the launch checks use): code
// selecting device paths with `#ifdef __CUDA_ARCH__` or `__CUDA_ARCH__ >= 700` takes them.
#define __CUDA_ARCH__ 900
// The runtime version whose device API emu provides (fp8, fp6 and fp4 types came with 12.8): code that selects
// paths with `CUDART_VERSION >= ...` takes those a current toolkit compiles, not its oldest fallbacks.
#define CUDART_VERSION 12080
// A CUDA compile, as nvcc announces one to the source (arrayfire includes math_constants.h and defines its `__DH__`
// under `#ifdef __CUDACC__`), of the same version.
#define __CUDACC__ 1
#define __NVCC__ 1
#define __CUDACC_VER_MAJOR__ 12
#define __CUDACC_VER_MINOR__ 8
#define __CUDACC_VER_BUILD__ 0
#define __global__
#define __device__
#define __host__
#define __forceinline__
#define __noinline__ __attribute__((noinline))
#define __constant__
// a managed variable is a module variable that the host reads and writes without a copy (host code, never run here)
#define __managed__
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __block_size__(...)
#define __cluster_dims__(...)
#define __maxnreg__(...)
// The macros name the runtime by reserved names only (__emu, __-prefixed): a kernel's own macro, defined after
// this header (`#define syncthreads __syncthreads`, `#define tid ...`), cannot reach into their expansions.
namespace __emu = ::emu;
namespace emu {
inline FiberHead*& __cur = g_cur;
inline void __syncthreads_at(int line) { syncthreads(line); }
inline int __syncthreads_count_at(int pred, int line) { return syncthreads_count(pred, line); }
inline void __syncwarp_at(unsigned mask, int line) { syncwarp(mask, line); }
template <class T>
inline T __shfl_at(int kind, unsigned mask, T var, int b, int width, int line) {
  return shfl(kind, mask, var, b, width, line);
}
inline unsigned __vote_at(int kind, unsigned mask, int pred, int line) { return vote(kind, mask, pred, line); }
inline int __reduce_at(int kind, unsigned mask, int v, int line) { return int(reduce(kind, mask, unsigned(v), true, line)); }
inline unsigned __reduce_at(int kind, unsigned mask, unsigned v, int line) { return reduce(kind, mask, v, false, line); }
template <class T>
inline unsigned __match_any_at(unsigned mask, T v, int line) { return match(W_MATCH_ANY, mask, v, line); }
template <class T>
inline unsigned __match_all_at(unsigned mask, T v, int* pred, int line) {
  unsigned r = match(W_MATCH_ALL, mask, v, line);
  *pred = r != 0;
  return r;
}
[[noreturn]] inline void __trap_at(int line) { trap(line); }
[[noreturn]] inline void __assumption_false_at(const char* c, const char* file, int line) {
  assumption_false(c, file, line);
}
constexpr auto __printf_at = &device_printf;
constexpr int __W_SHFL_IDX = W_SHFL_IDX, __W_SHFL_UP = W_SHFL_UP, __W_SHFL_DOWN = W_SHFL_DOWN,
              __W_SHFL_XOR = W_SHFL_XOR, __W_BALLOT = W_BALLOT, __W_ANY = W_ANY, __W_ALL = W_ALL,
              __W_REDUCE_ADD = W_REDUCE_ADD, __W_REDUCE_MIN = W_REDUCE_MIN, __W_REDUCE_MAX = W_REDUCE_MAX,
              __W_REDUCE_AND = W_REDUCE_AND, __W_REDUCE_OR = W_REDUCE_OR, __W_REDUCE_XOR = W_REDUCE_XOR;
}  // namespace emu
// a constant, not a macro: the runtime's cudaDeviceProp has a member of that name (CUDA's warpSize is a built-in
// variable, so such a member compiles there)
constexpr int warpSize = 32;
#define threadIdx (::__emu::__cur->__tid)
// blockIdx, blockDim and gridDim name one reference each, by a reserved name: a struct of the code around a kernel
// may have a member of the same name (the runtime's cudaLaunchConfig_t has gridDim and blockDim), which the same
// macro renames in its declaration and in every use.
#define blockIdx __emu_blockIdx
#define blockDim __emu_blockDim
#define gridDim __emu_gridDim
inline uint3& __emu_blockIdx = ::emu::g_block_idx;
inline dim3& __emu_blockDim = ::emu::g_block_dim;
inline dim3& __emu_gridDim = ::emu::g_grid_dim;
#define __syncthreads() ::__emu::__syncthreads_at(__LINE__)
#define __syncthreads_count(p) ::__emu::__syncthreads_count_at((p), __LINE__)
#define __syncthreads_and(p) (::__emu::barrier_reduce(0u, 0u, ::__emu::kBarAnd, (p) != 0, __LINE__) != 0)
#define __syncthreads_or(p) (::__emu::barrier_reduce(0u, 0u, ::__emu::kBarOr, (p) != 0, __LINE__) != 0)
#define __syncwarp(...) ::__emu::__syncwarp_at(EMU_MASK_OR_ALL(__VA_ARGS__), __LINE__)
#define EMU_MASK_OR_ALL(...) (0xffffffffu __VA_OPT__(& 0u) __VA_OPT__(| (__VA_ARGS__)))
#define __shfl_sync(m, v, l, ...) ::__emu::__shfl_at(::__emu::__W_SHFL_IDX, (m), (v), (l), EMU_WIDTH(__VA_ARGS__), __LINE__)
#define __shfl_up_sync(m, v, d, ...) ::__emu::__shfl_at(::__emu::__W_SHFL_UP, (m), (v), (d), EMU_WIDTH(__VA_ARGS__), __LINE__)
#define __shfl_down_sync(m, v, d, ...) ::__emu::__shfl_at(::__emu::__W_SHFL_DOWN, (m), (v), (d), EMU_WIDTH(__VA_ARGS__), __LINE__)
#define __shfl_xor_sync(m, v, d, ...) ::__emu::__shfl_at(::__emu::__W_SHFL_XOR, (m), (v), (d), EMU_WIDTH(__VA_ARGS__), __LINE__)
#define EMU_WIDTH(...) (32 __VA_OPT__(* 0 + (__VA_ARGS__)))
#define __ballot_sync(m, p) ::__emu::__vote_at(::__emu::__W_BALLOT, (m), (p), __LINE__)
#define __any_sync(m, p) (::__emu::__vote_at(::__emu::__W_ANY, (m), (p), __LINE__) != 0)
#define __all_sync(m, p) (::__emu::__vote_at(::__emu::__W_ALL, (m), (p), __LINE__) != 0)
#define __reduce_add_sync(m, v) ::__emu::__reduce_at(::__emu::__W_REDUCE_ADD, (m), (v), __LINE__)
#define __reduce_min_sync(m, v) ::__emu::__reduce_at(::__emu::__W_REDUCE_MIN, (m), (v), __LINE__)
#define __reduce_max_sync(m, v) ::__emu::__reduce_at(::__emu::__W_REDUCE_MAX, (m), (v), __LINE__)
#define __reduce_and_sync(m, v) ::__emu::__reduce_at(::__emu::__W_REDUCE_AND, (m), (v), __LINE__)
#define __reduce_or_sync(m, v) ::__emu::__reduce_at(::__emu::__W_REDUCE_OR, (m), (v), __LINE__)
#define __reduce_xor_sync(m, v) ::__emu::__reduce_at(::__emu::__W_REDUCE_XOR, (m), (v), __LINE__)
#define __match_any_sync(m, v) ::__emu::__match_any_at((m), (v), __LINE__)
#define __match_all_sync(m, v, pred) ::__emu::__match_all_at((m), (v), (pred), __LINE__)
#define __trap() ::__emu::__trap_at(__LINE__)
// nvcc's (and clang's) `__builtin_assume(cond)`: the compiler may take cond as true, so a launch where it is false
// has undefined behaviour; emu checks it (a condition with side effects would have them here, unlike on a GPU).
#define __builtin_assume(...) \
  ((__VA_ARGS__) ? (void)0 : ::__emu::__assumption_false_at(#__VA_ARGS__, __FILE__, __LINE__))
#define printf(...) ::__emu::__printf_at(__VA_ARGS__)
// glibc declares __expf (and friends) itself, so the CUDA fast intrinsics must be macros.
#define __expf(x) ::expf(x)
#define __logf(x) ::logf(x)
#define __log2f(x) ::log2f(x)
#define __log10f(x) ::log10f(x)
#define __sinf(x) ::sinf(x)
#define __cosf(x) ::cosf(x)
#define __tanf(x) ::tanf(x)
#define __sincosf(x, s, c) ::sincosf((x), (s), (c))
#define __powf(x, y) ::powf((x), (y))
#define __exp10f(x) ::exp10f(x)

inline unsigned __activemask(int line = __builtin_LINE()) { return ::emu::converged(line); }
// A fence releases what the thread did before it through the thread's next atomic, and completes the acquire of
// the thread's earlier atomics (emu_race.hpp); a block-scope fence does either only among threads of its block.
inline void __threadfence() { ::emu::fence(::emu::kScopeDevice); }
inline void __threadfence_block() { ::emu::fence(::emu::kScopeBlock); }
inline void __threadfence_system() { ::emu::fence(::emu::kScopeDevice); }
inline void __nanosleep(unsigned) {}
// Programmatic dependent launch: emu runs one launch, with no grid before it to wait for and none after it to let
// start early, so both return at once (as they do in a launch without the programmatic-serialization attribute).
inline void cudaGridDependencySynchronize() {}
inline void cudaTriggerProgrammaticLaunchCompletion() {}
#include "emu_host_api.hpp"   // the runtime's host API, declared only: host code is dropped before a build
inline long long clock64() { return ::emu::clock_tick(); }
inline unsigned __lanemask_lt() { return (1u << emu::g_cur->lane) - 1u; }

// Integer dot products: 8-bit lanes, 32-bit modular accumulate (as PTX dp4a).
inline int __dp4a(int a, int b, int c) {
  uint32_t acc = uint32_t(c);
  for (int k = 0; k < 4; ++k) acc += uint32_t(int32_t(int8_t(uint32_t(a) >> (8 * k))) * int32_t(int8_t(uint32_t(b) >> (8 * k))));
  return int32_t(acc);
}
inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
  uint32_t acc = c;
  for (int k = 0; k < 4; ++k) acc += ((a >> (8 * k)) & 0xffu) * ((b >> (8 * k)) & 0xffu);
  return acc;
}
inline int __dp4a(char4 a, char4 b, int c) {
  int ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return __dp4a(ia, ib, c);
}

// Float intrinsics. Default rounding mode of the host is round-to-nearest-even, as CUDA's _rn variants.
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float rsqrt(float x) { return rsqrtf(x); }   // CUDA's C++ overload: beats a source's own template
inline float __fmul_rn(float a, float b) { return a * b; }   // built with -ffp-contract=off: never fused
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
#include "emu_rounding.hpp"   // the _rz/_rd/_ru arithmetic and the conversions in every rounding mode
#include "emu_cuda_math.hpp"  // CUDA's math that C's library lacks: erfinv, normcdfinv, sinpi, norm3d...
inline float __saturatef(float x) { return x != x ? 0.0f : x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
// cvt.rni/rzi.s32.f32 saturate and map NaN to 0 on a GPU; a plain C cast would be undefined there.
inline int emu_cvt_s32(float r) { return r != r ? 0 : r >= 2147483647.0f ? INT_MAX : r <= -2147483648.0f ? INT_MIN : (int)r; }
inline int __float2int_rn(float x) { return emu_cvt_s32(rintf(x)); }
inline int __float2int_rz(float x) { return emu_cvt_s32(truncf(x)); }
inline int __float2int_rd(float x) { return emu_cvt_s32(floorf(x)); }
inline int __float2int_ru(float x) { return emu_cvt_s32(ceilf(x)); }
inline unsigned __float2uint_rn(float x) { float r = rintf(x); return r != r || r <= 0.0f ? 0u : r >= 4294967295.0f ? UINT_MAX : (unsigned)r; }
inline float __int2float_rn(int i) { return (float)i; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned i; std::memcpy(&i, &f, 4); return i; }
inline float __uint_as_float(unsigned i) { float f; std::memcpy(&f, &i, 4); return f; }
inline long long __double_as_longlong(double d) { long long i; std::memcpy(&i, &d, 8); return i; }
inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz(unsigned(x)) : 32; }
inline int __ffs(int x) { return __builtin_ffs(x); }
// PTX fns.b32: the position of the |offset|-th set bit of `mask`, counting from bit `base` upward (offset > 0) or
// downward (offset < 0), base included; offset 0 asks whether bit `base` itself is set. 0xffffffff when none is.
inline unsigned __fns(unsigned mask, unsigned base, int offset) {
  if (offset == 0) return base < 32 && (mask >> base & 1u) ? base : 0xffffffffu;
  int step = offset > 0 ? 1 : -1, left = offset > 0 ? offset : -offset;
  for (int pos = int(base); pos >= 0 && pos < 32; pos += step)
    if ((mask >> pos & 1u) && --left == 0) return unsigned(pos);
  return 0xffffffffu;
}
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1); x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4); x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
  return (x >> 16) | (x << 16);
}
// 24-bit multiplies: the low 32 bits of the product of the sign- (mul24) or zero- (umul24) extended low 24 bits.
inline int __mul24(int a, int b) {
  return int(uint32_t(int64_t(int32_t(uint32_t(a) << 8) >> 8) * int64_t(int32_t(uint32_t(b) << 8) >> 8)));
}
inline unsigned __umul24(unsigned a, unsigned b) { return uint32_t(uint64_t(a & 0xffffffu) * (b & 0xffffffu)); }
inline unsigned __umulhi(unsigned a, unsigned b) { return unsigned((uint64_t(a) * b) >> 32); }
inline long long __mul64hi(long long a, long long b) { return (long long)((__int128(a) * b) >> 64); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)((unsigned __int128)(a) * b >> 64);
}
inline unsigned __sad(int a, int b, unsigned c) { return c + unsigned(a > b ? int64_t(a) - b : int64_t(b) - a); }
inline unsigned __usad(unsigned a, unsigned b, unsigned c) { return c + (a > b ? a - b : b - a); }
// Integer averages (halving adds, without overflow); the __half __hadd above is a different overload.
inline int __hadd(int a, int b) { return int((int64_t(a) + b) >> 1); }
inline int __rhadd(int a, int b) { return int((int64_t(a) + b + 1) >> 1); }
inline unsigned __uhadd(unsigned a, unsigned b) { return unsigned((uint64_t(a) + b) >> 1); }
inline unsigned __urhadd(unsigned a, unsigned b) { return unsigned((uint64_t(a) + b + 1) >> 1); }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned long long __brevll(unsigned long long x) {
  return (unsigned long long)(__brev(unsigned(x))) << 32 | __brev(unsigned(x >> 32));
}
// Funnel shifts: the 64-bit value hi:lo shifted; _l/_r wrap the amount mod 32, _lc/_rc clamp it to 32.
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s) {
  return unsigned(((uint64_t(hi) << 32 | lo) << (s & 31)) >> 32);
}
inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned s) {
  return unsigned(((uint64_t(hi) << 32 | lo) << (s > 32 ? 32 : s)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) { return unsigned((uint64_t(hi) << 32 | lo) >> (s & 31)); }
inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned s) {
  return unsigned((uint64_t(hi) << 32 | lo) >> (s > 32 ? 32 : s));
}
// PTX prmt (default mode): each selector nibble picks one of the 8 bytes of b:a.
inline unsigned __byte_perm(unsigned a, unsigned b, unsigned s) {
  uint64_t v = uint64_t(b) << 32 | a;
  unsigned r = 0;
  for (int k = 0; k < 4; ++k) r |= unsigned((v >> (8 * ((s >> (4 * k)) & 7))) & 0xffu) << (8 * k);
  return r;
}
inline int __mulhi(int a, int b) { return int((int64_t(a) * int64_t(b)) >> 32); }
#include "emu_simd.hpp"       // the SIMD-in-a-word intrinsics: __vadd4, __vsubss4, __vcmpeq2, __vsads4...
// Loads and stores with cache hints: the hint changes where a GPU caches the line, never the value.
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldca(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldlu(const T* p) { return *p; }
template <class T> inline T __ldcv(const T* p) { return *p; }
template <class T> inline void __stwb(T* p, T v) { *p = v; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stwt(T* p, T v) { *p = v; }

// CUDA's global min/max overloads for device code.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
// nvcc's mixed overloads: a signed/unsigned pair compares as unsigned, a float/double pair as double.
inline unsigned min(int a, unsigned b) { return min(unsigned(a), b); }
inline unsigned min(unsigned a, int b) { return min(a, unsigned(b)); }
inline unsigned max(int a, unsigned b) { return max(unsigned(a), b); }
inline unsigned max(unsigned a, int b) { return max(a, unsigned(b)); }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline unsigned long long min(long long a, unsigned long long b) { return min((unsigned long long)a, b); }
inline unsigned long long min(unsigned long long a, long long b) { return min(a, (unsigned long long)b); }
inline unsigned long long max(long long a, unsigned long long b) { return max((unsigned long long)a, b); }
inline unsigned long long max(unsigned long long a, long long b) { return max(a, (unsigned long long)b); }
inline double min(float a, double b) { return fmin(a, b); }
inline double min(double a, float b) { return fmin(a, b); }
inline double max(float a, double b) { return fmax(a, b); }
inline double max(double a, float b) { return fmax(a, b); }

// ---- atomics ----------------------------------------------------------------------------------------------
// ONE mechanism for every atomic operation: each atomicXxx (its _block and _system forms), atomicInc/Dec and
// cuda::atomic member goes through emu::atomic_rmw / atomic_load / atomic_store, which call
// emu::atomic_access(address, bytes, is_write, line, scope, order) first and emu::atomic_done after. The first is
// the single place the race detector marks an access as atomic (atomics of a common scope never race with each
// other; emu_race.hpp); the second lets a spinning thread yield. Fibers switch only at such calls, barriers and
// warp collectives, so the read-modify-write itself is atomic by construction. `line` is the caller's source
// line (__builtin_LINE() as a default argument). The value parameters are not deduced (nvcc's overloads convert
// them: atomicAdd(unsigned*, int) is legal).
namespace emu {
template <class T> struct same { using type = T; };
template <class T> using nd = typename same<T>::type;   // a non-deduced context
template <class T>
inline uint64_t seen_bits(const T& v) {
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof(T) < 8 ? sizeof(T) : 8);
  return u;
}
template <class T, class F>
inline T atomic_rmw(T* p, F&& update, int line, int scope = kScopeDevice, int order = kRelaxed) {
  atomic_access(p, sizeof(T), true, line, scope, order | kReadModifyWrite);
  typename std::remove_cv<T>::type old = *p, now = update(old);
  *p = now;
  atomic_done(p, std::memcmp(&old, &now, sizeof(T)) != 0, seen_bits(old), sizeof(T));
  return old;
}
template <class T>
inline T atomic_load(const T* p, int line, int scope = kScopeDevice, int order = kRelaxed) {
  atomic_access(p, sizeof(T), false, line, scope, order);
  typename std::remove_cv<T>::type v = *p;
  atomic_done(p, false, seen_bits(v), sizeof(T));
  return v;
}
template <class T>
inline void atomic_store(T* p, T v, int line, int scope = kScopeDevice, int order = kRelaxed) {
  atomic_access(p, sizeof(T), true, line, scope, order);
  typename std::remove_cv<T>::type old = *p;
  *p = v;
  atomic_done(p, std::memcmp(&old, &v, sizeof(T)) != 0, seen_bits(old), sizeof(T));
}
}  // namespace emu
#define EMU_ATOMIC_SCOPED(NAME, SCOPE, EXPR)                                                                  \
  template <class T> inline T NAME(T* p, ::emu::nd<T> v, int line = __builtin_LINE()) {                      \
    return ::emu::atomic_rmw(p, [&](T o) -> T { return EXPR; }, line, SCOPE);                                \
  }
#define EMU_ATOMIC_2(NAME, EXPR)                                                                              \
  EMU_ATOMIC_SCOPED(NAME, ::emu::kScopeDevice, EXPR)                                                          \
  EMU_ATOMIC_SCOPED(NAME##_block, ::emu::kScopeBlock, EXPR)                                                   \
  EMU_ATOMIC_SCOPED(NAME##_system, ::emu::kScopeDevice, EXPR)
EMU_ATOMIC_2(atomicAdd, T(o + v))
EMU_ATOMIC_2(atomicSub, T(o - v))
EMU_ATOMIC_2(atomicExch, v)
EMU_ATOMIC_2(atomicMax, o > v ? o : v)
EMU_ATOMIC_2(atomicMin, o < v ? o : v)
EMU_ATOMIC_2(atomicAnd, T(o & v))
EMU_ATOMIC_2(atomicOr, T(o | v))
EMU_ATOMIC_2(atomicXor, T(o ^ v))
// PTX atom.inc / atom.dec (unsigned 32-bit): inc wraps to 0 once the old value reaches `v`; dec wraps to `v`
// when the old value is 0 or above `v`.
EMU_ATOMIC_2(atomicInc, o >= v ? T(0) : T(o + 1))
EMU_ATOMIC_2(atomicDec, (o == 0 || o > v) ? v : T(o - 1))
#undef EMU_ATOMIC_2
#undef EMU_ATOMIC_SCOPED
#define EMU_ATOMIC_CAS(NAME, SCOPE)                                                                           \
  template <class T> inline T NAME(T* p, ::emu::nd<T> cmp, ::emu::nd<T> v, int line = __builtin_LINE()) {    \
    return ::emu::atomic_rmw(p, [&](T o) -> T { return o == cmp ? v : o; }, line, SCOPE);                    \
  }
EMU_ATOMIC_CAS(atomicCAS, ::emu::kScopeDevice)
EMU_ATOMIC_CAS(atomicCAS_block, ::emu::kScopeBlock)
EMU_ATOMIC_CAS(atomicCAS_system, ::emu::kScopeDevice)
#undef EMU_ATOMIC_CAS

#if defined(__SANITIZE_THREAD__)
// The race detector's build (-fsanitize=thread, no libtsan): g++ instruments loads and stores but leaves
// memcpy / memmove / memset, the __builtin_ ones included, to libtsan's interceptors, which are not linked, and
// expands small constant-size copies after its instrumentation. Device code's calls therefore announce their
// byte ranges here (inlined: the entry point's return address is the kernel's line). Plain names, so that
// `std::memcpy(...)` still resolves.
extern "C" void __tsan_read_range(void*, long);
extern "C" void __tsan_write_range(void*, long);
__attribute__((always_inline)) inline void* emu_race_memcpy(void* d, const void* s, size_t n) {
  __tsan_read_range(const_cast<void*>(s), long(n));
  __tsan_write_range(d, long(n));
  return __builtin_memcpy(d, s, n);
}
__attribute__((always_inline)) inline void* emu_race_memmove(void* d, const void* s, size_t n) {
  __tsan_read_range(const_cast<void*>(s), long(n));
  __tsan_write_range(d, long(n));
  return __builtin_memmove(d, s, n);
}
__attribute__((always_inline)) inline void* emu_race_memset(void* d, int c, size_t n) {
  __tsan_write_range(d, long(n));
  return __builtin_memset(d, c, n);
}
namespace std { using ::emu_race_memcpy; using ::emu_race_memmove; using ::emu_race_memset; }
// Only the three-argument calls are the C library's: a member function of another arity keeps its name (flashinfer's
// `vec_t<T, N>::memcpy(T* dst, const T* src)`). Inside its own expansion a macro's name is not expanded again.
#define EMU_THIRD_ARGUMENT_PICKS(a, b, c, name, ...) name
#define memcpy(...) EMU_THIRD_ARGUMENT_PICKS(__VA_ARGS__, emu_race_memcpy, memcpy, memcpy, memcpy)(__VA_ARGS__)
#define memmove(...) EMU_THIRD_ARGUMENT_PICKS(__VA_ARGS__, emu_race_memmove, memmove, memmove, memmove)(__VA_ARGS__)
#define memset(...) EMU_THIRD_ARGUMENT_PICKS(__VA_ARGS__, emu_race_memset, memset, memset, memset)(__VA_ARGS__)
#define __builtin_memcpy(d, s, n) emu_race_memcpy(d, s, n)
#define __builtin_memmove(d, s, n) emu_race_memmove(d, s, n)
#define __builtin_memset(d, c, n) emu_race_memset(d, c, n)
#endif  // __SANITIZE_THREAD__

// <cuda_pipeline.h>'s primitives (after the race build's memcpy above, so that the detector sees a copy's bytes).
// A copy lands when a wait completes its batch, the latest moment a GPU may complete it: a read of its destination
// before that sees what was there before (poison, in shared memory), and the race detector sees the copy's writes
// at the wait's line, unordered with other threads' accesses until a barrier. A copy its thread never waits for is
// never performed.
inline void __pipeline_memcpy_async(void* dst, const void* src, size_t size_and_align, size_t zfill = 0,
                                    int line = __builtin_LINE()) {
  ::emu::async_enqueue(dst, src, size_and_align, zfill, line);
}
inline void __pipeline_commit() { ::emu::async_commit(); }
inline size_t __cvta_generic_to_shared(const void* p, int line = __builtin_LINE()) {
  return ::emu::shared_window(p, line);
}
inline void* __cvta_shared_to_generic(size_t a, int line = __builtin_LINE()) { return ::emu::shared_generic(a, line); }
inline size_t __cvta_generic_to_global(const void* p) { return reinterpret_cast<size_t>(p); }
inline void* __cvta_global_to_generic(size_t a) { return reinterpret_cast<void*>(a); }
inline unsigned __isShared(const void* p) { return ::emu::is_shared(p); }
inline unsigned __isGlobal(const void* p) { return !::emu::is_shared(p); }
namespace emu {
// Inline PTX's cp.async (ptx.py): a shared-space destination, a global source, the copy size and the bytes
// read from the source (the rest zero-filled; -1: all).
inline void cp_async(uint64_t dst, uint64_t src, size_t size, long long src_size, int line) {
  size_t zfill = src_size < 0 ? 0 : size_t(src_size) > size ? size + 1 : size - size_t(src_size);
  async_enqueue(shared_generic(dst, line), reinterpret_cast<const void*>(src), size, zfill, line);
}
}  // namespace emu
namespace emu {
// Performs the copies async_ready hands back for `keep` (kAllAsync: every pending one), in the calling thread.
__attribute__((always_inline)) inline void async_land(size_t keep) {
  AsyncCopy ready[kMaxAsyncCopies];
  int n = async_ready(keep, ready);
  for (int i = 0; i < n; ++i) {
    unsigned char* d = static_cast<unsigned char*>(ready[i].dst);
    memcpy(d, ready[i].src, ready[i].bytes - ready[i].zfill);
    memset(d + ready[i].bytes - ready[i].zfill, 0, ready[i].zfill);
  }
}
}  // namespace emu
__attribute__((always_inline)) inline void __pipeline_wait_prior(size_t keep) { ::emu::async_land(keep); }

namespace emu {
// A register operand of inline PTX as its 32 bits, and back (a float, an int, a __half2 alike).
template <class T>
inline uint32_t reg_bits(const T& v) {
  static_assert(sizeof(T) == 4, "a 32-bit register operand");
  return __builtin_bit_cast(uint32_t, v);
}
template <class T>
inline void set_reg(T& r, uint32_t bits) {
  static_assert(sizeof(T) == 4, "a 32-bit register operand");
  r = __builtin_bit_cast(T, bits);
}
// Inline PTX's one-operand float math (ptx.py): ex2, lg2, sin, cos, tanh, rsqrt (.approx), rcp and sqrt (.approx
// or .rn), each on f32 bits. Every result is the double function rounded to float: .rn is then IEEE's rounding (53 >=
// 2*24+2 bits), and .approx a correctly rounded value where the GPU's approximation may differ in the last bits, within
// the errors the PTX ISA gives. .ftz flushes a subnormal operand and result to zero of the same sign.
enum PtxMath : int { PM_EX2, PM_LG2, PM_SIN, PM_COS, PM_TANH, PM_RSQRT, PM_RCP, PM_SQRT };
inline float flush_subnormal(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}
inline uint32_t ptx_math(int op, uint32_t bits, bool ftz) {
  float x = __builtin_bit_cast(float, bits);
  if (ftz) x = flush_subnormal(x);
  double d = x, r;
  switch (op) {
    case PM_EX2: r = std::exp2(d); break;
    case PM_LG2: r = std::log2(d); break;
    case PM_SIN: r = std::sin(d); break;
    case PM_COS: r = std::cos(d); break;
    case PM_TANH: r = std::tanh(d); break;
    case PM_RSQRT: r = 1.0 / std::sqrt(d); break;
    case PM_RCP: r = 1.0 / d; break;
    default: r = std::sqrt(d); break;
  }
  float f = float(r);
  return __builtin_bit_cast(uint32_t, ftz ? flush_subnormal(f) : f);
}
// cvt.rn{.relu}.f16x2.f32 / .bf16x2.f32 d, a, b: a to the upper half, b to the lower, each rounded to nearest even
// (.relu: a negative result is 0, NaN the canonical NaN).
template <class B>
inline uint32_t ptx_pack16(uint32_t a, uint32_t b, bool relu) {
  auto one = [relu](uint32_t bits) -> uint32_t {
    float v = __builtin_bit_cast(float, bits);
    if (relu && !(v != v) && v < 0) v = 0.0f;
    return round16<B>(v, kRoundNearest);
  };
  return one(a) << 16 | one(b);
}
// The 16-byte row one lane of ldmatrix/stmatrix names: a shared-space address (`.shared`) or a generic one, which
// must point into shared memory; either aligned to 16 bytes. Anything else traps.
unsigned char* matrix_row(uint64_t address, bool shared_space, int line);
// ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.b16: lane 8m+r names row r of matrix m, and reads its 16 bytes itself
// (so the race detector sees that lane read them, before the warp meets); the warp then hands each lane its words.
__attribute__((always_inline)) inline void ldmatrix(int num, bool trans, bool shared_space, uint64_t address,
                                                    uint32_t* out, int line) {
  uint32_t row[4] = {0, 0, 0, 0};
  if (g_cur->lane < 8 * num) memcpy(row, matrix_row(address, shared_space, line), 16);
  matrix_collective(W_LDMATRIX, num | int(trans) << 4, row, 4, out, num, line);
}
// stmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.b16 (sm_90): the inverse; the lane naming a row writes it, once the
// warp has met.
__attribute__((always_inline)) inline void stmatrix(int num, bool trans, bool shared_space, uint64_t address,
                                                    const uint32_t* in, int line) {
  unsigned char* dst = g_cur->lane < 8 * num ? matrix_row(address, shared_space, line) : nullptr;
  uint32_t row[4];
  matrix_collective(W_STMATRIX, num | int(trans) << 4, in, num, row, 4, line);
  if (dst) memcpy(dst, row, 16);
}
}  // namespace emu
#include "emu_ptx.hpp"        // scalar inline PTX (ptx.py)
#include "emu_barrier.hpp"    // arrive-wait barriers: PTX's mbarrier, cuda::barrier, block-scope cuda::pipeline

#endif  // EMU_RUNTIME_IMPL
#endif  // QCONFORM_EMU_DEVICE_HPP
