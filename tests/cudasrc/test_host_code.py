"""Host functions found as text and blanked, lines kept: a whole program reduces to its device code. Members of
classes stay (one without __device__ may still be called from device code through libcu++'s templates), but for
those that launch kernels, whose bodies are emptied."""
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


ENGINE = r"""#include <initializer_list>
#define CHECK_BLAS(call) do { if ((call) != 0) blas_abort(#call); } while (0)
void blas_abort(const char* what) { throw what; }
static bool fast_path(const int cc) { return cc >= 800; }
static int unused_helper(torch::Tensor t) { return 0; }
int fuse(const int* uses, std::initializer_list<int> ops, std::initializer_list<int> outputs = {}) {
    return int(ops.size() + outputs.size()) + uses[0];
}
struct context {
    bool use_fast(int cc) const { return fast_path(cc); }
    void init() { CHECK_BLAS(blas_create(this)); }
};
template <int N> void launch(context& ctx, float* y) { ctx.init(); }
extern template void launch<4>(context& ctx, float* y);
template void launch<8>(context& ctx, float* y);
#define INSTANCE(n) template void launch<n>(context& ctx, float* y)
extern INSTANCE(16);
auto deduced() { return 1; }
__global__ void k(float* y) { y[0] = 1.0f; }
"""


def test_a_dropped_function_that_kept_code_names_stays_declared():
    """A class's host member and an error macro name host functions: their declarations stay (line numbers too);
    one no kept code names goes whole (its parameters may name a framework's types that are not here)."""
    out, dropped = without_host_functions(ENGINE)
    assert out.count("\n") == ENGINE.count("\n")
    assert [d.name for d in dropped] == ["blas_abort", "fast_path", "unused_helper", "fuse", "launch", "deduced"]
    lines = out.split("\n")
    assert lines[2] == "void blas_abort(const char* what);"              # named by the macro CHECK_BLAS
    assert lines[3] == "static bool fast_path(const int cc);"            # named by a class's member
    assert "unused_helper" not in out and "torch" not in out and "deduced" not in out
    assert "fuse" not in out     # its default argument's `{}` did not cut its head: the whole definition went
    assert lines[12] == "template <int N> void launch(context& ctx, float* y);"     # named by `extern template`
    assert lines[13] == "extern template void launch<4>(context& ctx, float* y);"
    assert lines[14] == ""          # an explicit instantiation cannot stand without the template's body
    assert lines[15].startswith("#define INSTANCE(n) template void launch<n>") and lines[16] == "extern INSTANCE(16);"
    assert "__global__ void k(float* y) { y[0] = 1.0f; }" in out


def test_names_from_the_programs_other_files_keep_a_declaration():
    from cudasrc.host_code import program_names
    header = "static bool tensor_cores(int cc) { return cc >= 700; }\n"
    user = "struct config { bool mma(int cc) const { return tensor_cores(cc); } };\n"
    assert without_host_functions(header)[0] == "\n"
    names = program_names([header, user])
    assert "tensor_cores" in names
    assert without_host_functions(header, names=names)[0] == "static bool tensor_cores(int cc);\n"


def test_a_macro_one_file_defines_and_another_expands_keeps_the_declaration():
    """cuFHE: error_gpu.cuh defines `CuSafeCall__` and the macro `CuSafeCall` that calls it; ntt.cuh's class calls
    the macro in a host member it keeps. The declaration went with the body, and nvcc refused the kept member
    ("identifier CuSafeCall__ is undefined"); a macro nothing kept expands still keeps none."""
    from cudasrc.host_code import program_names
    errors = ("inline void CuSafeCall__(int err, const char* file, int line) { if (err) exit(-1); }\n"
              "#define CuSafeCall(err) CuSafeCall__(err, __FILE__, __LINE__)\n"
              "inline void Unused__(int err) { exit(err); }\n#define Unused(e) Unused__(e)\n")
    handler = "struct Handler { void check(int status) { CuSafeCall(status); } };\n"
    names = program_names([handler, errors])
    assert "CuSafeCall__" in names and "Unused__" not in names
    out = without_host_functions(errors, names=names)[0]
    assert out.startswith("inline void CuSafeCall__(int err, const char* file, int line);\n") and "exit" not in out
    assert "Unused__(int" not in out


def test_a_brace_inside_a_parameter_list_opens_no_scope():
    src = "void f(int a, S s = {}) {\n  g();\n}\n__global__ void k(int* y) { y[0] = 1; }\n"
    out, dropped = without_host_functions(src)
    assert [d.name for d in dropped] == ["f"] and out.startswith("\n\n\n__global__ void k")


def test_a_macro_only_dropped_code_expands_keeps_no_declaration():
    """A binding's dispatch macro names a host function whose parameters are torch's: only the dropped binding
    expands it, so the declaration (which would need torch's headers) goes too; a kept class that expands it keeps it."""
    src = ("#define DISPATCH(t) dispatch_impl(t)\n"
           "void dispatch_impl(torch::Tensor& t) { t.zero_(); }\n"
           "void op(torch::Tensor& t) { DISPATCH(t); }\n"
           "__global__ void k(float* y) { y[0] = 1.0f; }\n")
    out, _ = without_host_functions(src)
    assert "torch" not in out
    kept = src.replace("void op(torch::Tensor& t) { DISPATCH(t); }", "struct op { void run(T& t) { DISPATCH(t); } };")
    assert "void dispatch_impl(torch::Tensor& t);" in without_host_functions(kept)[0]


TEMPLATE_HEADS = r"""template <class T> __global__ void k(const T* x, T* y) { y[threadIdx.x] = x[threadIdx.x]; }
template <class T>
static void launch_k(const T* x, T* y) { k<<<1, 32>>>(x, y); }
template <float (*op)(float), typename T>
static void launch_op(const T* x) { op_kernel<op, T><<<1, 32>>>(x); }
template <class E>
Outer<E>::Outer(const char* s) : E(s) {}
"""


def test_a_template_head_is_neither_a_class_nor_the_functions_parameters():
    # `template <class T>` declares no class (the launch helper was kept, with its `<<<`), and the parentheses of
    # `float (*op)(float)` are not the helper's parameter list (it was listed as `float`)
    out, dropped = without_host_functions(TEMPLATE_HEADS, names=["launch_op", "Outer"])
    assert [(d.name, d.line) for d in dropped] == [("launch_k", 2), ("launch_op", 4), ("Outer<E>::Outer", 6)]
    assert "<<<" not in out and "__global__ void k(const T* x, T* y)" in out
    lines = out.split("\n")
    assert lines[4] == "static void launch_op(const T* x);" and lines[3].startswith("template <float (*op)(float)")
    assert "Outer" not in out        # a qualified name declares nothing outside its class: no declaration stays


INSTANCE_HEADER = r"""#define DECL_CASE(T) template void launch<T>(const T* x, T* y)
#define DECL_CASE_ALL extern DECL_CASE(float)
template <typename T> __global__ void k(const T* x, T* y) { y[threadIdx.x] = x[threadIdx.x]; }
template <typename T> void launch(const T* x, T* y) { k<T><<<1, 32>>>(x, y); }
"""
INSTANCE_FILE = """#include "cases.cuh"
DECL_CASE(float);
DECL_CASE(int);
extern DECL_CASE(double);
template void launch<short>(const short* x, short* y);
"""


def test_an_instantiation_of_another_files_host_template_goes_with_it():
    # llama.cpp compiles each kernel family's cases in files of their own: `DECL_MMQ_CASE(GGML_TYPE_Q8_0);`
    # instantiates a host template of mmq.cuh, which cannot be instantiated once its body is dropped
    from cudasrc.host_code import program_instantiations, program_of
    program = program_of([INSTANCE_FILE, INSTANCE_HEADER])
    assert program_instantiations([INSTANCE_FILE, INSTANCE_HEADER]).macros == {"DECL_CASE"}
    assert program.device_code(INSTANCE_FILE).split("\n") == [
        '#include "cases.cuh"', "", "", "extern DECL_CASE(double);", "", ""]
    header = program.device_code(INSTANCE_HEADER)
    # its declaration stays: `extern DECL_CASE(double)` names it through the macro
    assert "template <typename T> void launch(const T* x, T* y);" in header and "<<<" not in header
    assert header.startswith("#define DECL_CASE(T) template void launch<T>")       # a macro's body is the macro's
    # alone, the file knows neither the macro nor the template: it is left as it is (the negative control)
    assert without_host_functions(INSTANCE_FILE)[0] == INSTANCE_FILE


LAUNCHING_CLASS = r"""__global__ void fill(unsigned* p, unsigned v) { p[threadIdx.x] = v; }
__device__ unsigned twice(unsigned v) { return 2 * v; }
class Dispatcher {
    unsigned* m_buf;
  public:
    Dispatcher(unsigned n) : m_buf(nullptr) { cudaMalloc(&m_buf, n * sizeof(unsigned)); }
    void Run(unsigned v) {
        fill<<<1, 32>>>(m_buf, v);
        cudaDeviceSynchronize();
    }
    unsigned Size() const { return 32; }
    struct Inner {
        int Go() { fill<<<1, 32>>>(nullptr, 0); return 0; }
    };
    __device__ unsigned Twice(unsigned v) const { return twice(v); }
};
"""


def test_a_class_member_that_launches_a_kernel_loses_its_body_and_keeps_its_head():
    """Only nvcc's host pass reads `<<<`: a class's member that launches (nested classes too) keeps its head and
    braces, its body blanked, lines kept; the constructor after `public:`, other host members and device members
    stay whole (a member without __device__ may still be device code through libcu++'s templates)."""
    out, dropped = without_host_functions(LAUNCHING_CLASS)
    assert [f.name for f in dropped] == ["Run", "Go"]
    assert "<<<" not in out and out.count("\n") == LAUNCHING_CLASS.count("\n")
    assert "    void Run(unsigned v) {\n\n\n}" in out
    assert "        int Go() {}" in out
    for whole in ("Dispatcher(unsigned n) : m_buf(nullptr) { cudaMalloc(&m_buf, n * sizeof(unsigned)); }",
                  "unsigned Size() const { return 32; }", "__device__ unsigned Twice(unsigned v) const { return twice(v); }"):
        assert whole in out


def test_negative_control_a_member_without_a_launch_stays_whole():
    src = LAUNCHING_CLASS.replace("fill<<<1, 32>>>(m_buf, v);", "m_buf[0] = v;")
    out, dropped = without_host_functions(src)
    assert [f.name for f in dropped] == ["Go"] and "m_buf[0] = v;" in out


def test_a_class_member_that_calls_the_hosts_runtime_api_loses_its_body():
    """cuFHE's NTT handler copies its twiddles with cudaMemcpyToSymbol in a host member, and its header instantiates
    the class whole (`template class CuNTTHandler<...>;`): the device build then called a runtime function that no
    device runtime has. Such a member is emptied as a launching one is; one whose runtime calls the device runtime
    has too (cudaMalloc, cudaGetLastError) stays whole, as any member may be device code."""
    from cudasrc.host_code import host_runtime_calls
    src = ("template <int N> struct Handler {\n  float* twd_;\n"
           "  inline void CreateConstant() {\n    Check(cudaMemcpyToSymbol(con, twd_, 8 * N));\n  }\n"
           "  void Alloc() { cudaMalloc(&twd_, N); Check(cudaGetLastError()); }\n"
           "  __device__ float At(int i) const { return twd_[i]; }\n};\ntemplate struct Handler<4>;\n")
    out, dropped = without_host_functions(src)
    assert [f.name for f in dropped] == ["CreateConstant"] and "cudaMemcpyToSymbol" not in out
    assert "  inline void CreateConstant() {\n\n}" in out and out.count("\n") == src.count("\n")
    assert "void Alloc() { cudaMalloc(&twd_, N); Check(cudaGetLastError()); }" in out
    assert host_runtime_calls("cudaMemcpyAsync(a, b, n); cudaMemcpy(a, b, n, k); cudaFree(a)") == ["cudaMemcpy"]


def test_a_specialized_class_is_a_class_too():
    """mshadow's `template <> struct Stream<gpu>` syncs its stream in host members: an explicit (or partial)
    specialization's members are a class's members, emptied where they call the host's runtime; the primary
    template's own members the same (the negative control: the specialization's head did not hide them before)."""
    src = ("template <typename Device> struct Stream { void Wait() {} };\n"
           "struct gpu {};\n"
           "template <> struct Stream<gpu> {\n  cudaStream_t s_;\n"
           "  inline void Wait() {\n    cudaStreamSynchronize(s_);\n  }\n"
           "  inline int Ready() const { return 1; }\n};\n"
           "template <typename T> struct Holder<T *, gpu> : public Stream<gpu> {\n"
           "  void Copy(T *p) { cudaMemcpy(p, p, 4, cudaMemcpyDeviceToDevice); }\n};\n")
    out, dropped = without_host_functions(src)
    assert [f.name for f in dropped] == ["Wait", "Copy"] and "cudaStreamSynchronize" not in out
    assert "  inline void Wait() {\n\n}" in out and out.count("\n") == src.count("\n")
    assert "inline int Ready() const { return 1; }" in out and "struct Stream { void Wait() {} };" in out


def test_a_digit_separator_is_no_character_literal():
    """llm.c's benchmark main prints `elapsed_time * 1'000`: a scanner that took the `'` of C++14's digit separator
    for a character literal ran on to the next quote, lost its braces and kept main (its runtime calls then refused
    the file). Character literals, prefixed ones too, stay literals (the negative control)."""
    from cudasrc.signatures import closing_bracket, opens_literal
    src = ("__global__ void k(float* y) { y[0] = 1.0f; }\n"
           "int main() {\n  float t = 2.5f;\n  printf(\"%f\\n\", t * 1'000 / 0x7f'ff);\n  cudaDeviceSynchronize();\n"
           "  char c = '}';\n  return c == L'x';\n}\n")
    kept, host = without_host_functions(src)
    assert [h.name for h in host] == ["main"] and "cudaDeviceSynchronize" not in kept
    assert not opens_literal("1'000", 1) and not opens_literal("0x7f'ff", 4) and not opens_literal("1.5'0", 3)
    assert opens_literal("c = 'a'", 4) and opens_literal("L'x'", 1) and opens_literal("u8'x'", 2)
    assert closing_bracket("{ n * 1'000; c = '}'; }", 0) == 22


def test_comments_next_to_character_literals_are_stripped_and_literals_kept():
    """A `'"'` opens no string (before, the comment after it survived inside a "string" running to the next quote);
    a digit separator opens no character literal; a `//` inside a string stays."""
    from cudasrc.signatures import strip_comments
    src = "char q = '\"'; // a \"quote\"\nint x = 1'000; /* c */ char s = '/';\nconst char* t = \"// not\";\n"
    assert strip_comments(src) == "char q = '\"'; \nint x = 1'000;  char s = '/';\nconst char* t = \"// not\";\n"


def test_a_macro_that_marks_device_code_in_the_cuda_branch_only_still_marks_it():
    """arrayfire's backend.hpp: `#ifdef __CUDACC__ #define __DH__ __device__ __host__ #else #define __DH__ #endif`.
    The CUDA build takes the first branch, so `static inline __DH__ int abs(int)` is device code; read as the last
    definition alone (empty), all of math.hpp's __DH__ functions were dropped as host code and nvcc's compile of
    what was left failed inside itself ("Broken module found"). Negative control: a macro empty in every branch."""
    from cudasrc.host_code import device_words_of
    header = ("#ifdef __CUDACC__\n#define __DH__ __device__ __host__\n#else\n#define __DH__\n#endif\n"
              "#ifdef FAST\n#define PLAIN inline\n#else\n#define PLAIN\n#endif\n")
    code = header + "static inline __DH__ int twice(int v) { return 2 * v; }\nPLAIN int host_only(int v) { return v; }\n"
    assert {"__DH__"} <= device_words_of(header) and "PLAIN" not in device_words_of(header)
    out, dropped = without_host_functions(code, device_words_of(header))
    assert "return 2 * v;" in out and [f.name for f in dropped] == ["host_only"]


def test_branches_that_open_the_same_brace_count_once(monkeypatch):
    """ik_llama.cpp's tile loaders open a block in both branches of a conditional (`#if AMD ... if (i < n) { #else {
    #endif`): counted in both, the extra brace kept every later function inside the loader, so the header's host
    template that launches kernels stayed and emu's host compile stopped on its `<<<...>>>`. The branches after the
    first now lend no braces where each opens the same number; the host template is dropped."""
    from cudasrc.host_code import program_of
    code = ("template <int n> static __device__ void load(int* x, int i) {\n"
            "#if defined(AMD_MFMA_AVAILABLE)\n    if (i < n) {\n#else\n    {\n#endif\n        x[i] = 1;\n    }\n}\n"
            "template <int n> static void launch(int* x) { load_kernel<n><<<1, 32>>>(x); }\n")
    kept, dropped = program_of([code]).split(code)
    assert [f.name for f in dropped] == ["launch"] and "<<<" not in kept and "x[i] = 1;" in kept
    # the negative control: counting every branch's braces, as before, keeps the host template
    from cudasrc import host_code
    monkeypatch.setattr(host_code, "_one_branchs_braces", lambda text: text)
    assert host_code.program_of([code + " "]).split(code + " ")[1] == ()
