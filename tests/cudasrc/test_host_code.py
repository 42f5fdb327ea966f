"""Host functions found as text and blanked, lines kept: a whole program reduces to its device code. Members of
classes stay (one without __device__ may still be called from device code through libcu++'s templates)."""
from __future__ import annotations

from cudasrc.host_code import HostFunction, without_host_functions

PROGRAM = r"""#include <cstdio>
#define HD __host__ __device__
#define CHECK(x) do { if ((x) != 0) return 1; } while (0)
static constexpr int N = 128;
__shared__ int smem[N];
struct Params { int n; float scale; };
typedef struct __align__(16) { float x, y, z, w; } Quad;
HD inline float twice(float x) { return 2.0f * x; }
constexpr int half(int n) { return n / 2; }
template <class T> __device__ T clampv(T v) { return v < 0 ? 0 : v; }
int host_helper(int n) { return n * 2; }                          // host only
namespace detail {
__device__ float third(float x) { return x / 3.0f; }
void fill(float* p, int n) { for (int i = 0; i < n; ++i) p[i] = 0; }
}
class Buffer {
 public:
  Buffer(int n) : n_(n) { cudaMalloc(&p_, n); }
  ~Buffer() { cudaFree(p_); }
  __device__ float at(int i) const { return p_[i]; }
 private:
  float* p_;
  int n_;
};
extern "C" __global__ void k(float* y, Params p) {
  int t = threadIdx.x;
  smem[t] = t;
  y[t] = twice(p.scale) + detail::third(half(N)) + clampv(smem[t]);
}
int main() {
  float* y;
  CHECK(cudaMalloc(&y, N * sizeof(float)));
  k<<<1, N>>>(y, Params{N, 1.0f});
  return 0;
}
"""


def test_host_functions_are_blanked_and_named_and_device_code_stays():
    out, dropped = without_host_functions(PROGRAM)
    assert out.count("\n") == PROGRAM.count("\n")
    assert [(d.name, d.line) for d in dropped] == [("host_helper", 11), ("fill", 14), ("main", 30)]
    assert all(isinstance(d, HostFunction) for d in dropped)
    for gone in ("host_helper", "CHECK(cudaMalloc", "<<<", "int main", "void fill"):
        assert gone not in out, gone
    kept = ["HD inline float twice", "constexpr int half", "template <class T> __device__ T clampv",
            "__device__ float third", "__device__ float at(int i) const", "extern \"C\" __global__ void k",
            "Buffer(int n) : n_(n) { cudaMalloc(&p_, n); }", "struct Params { int n; float scale; };",
            "#define CHECK(x)", "typedef struct __align__(16) { float x, y, z, w; } Quad;"]
    for text in kept:
        assert text in out, text
    lines = out.split("\n")
    assert lines[27].strip() == "y[t] = twice(p.scale) + detail::third(half(N)) + clampv(smem[t]);"


def test_a_source_without_host_code_is_only_stripped_of_comments():
    src = "// a kernel\n__global__ void k(int* y) { y[0] = 1; /* one */ }\n"
    out, dropped = without_host_functions(src)
    assert dropped == () and out == "\n__global__ void k(int* y) { y[0] = 1;  }\n"
