"""Source rewriting and build errors: unsupported constructs are named, line numbers survive."""
from __future__ import annotations

import re

import numpy as np
import pytest

from harness.backends import BuildError, UnsupportedConstruct
from harness.backends.emu.rewrite import rewrite


def test_shared_declarations_become_arena_slots_and_lines_are_kept():
    src = ("__global__ void k(float* y){\n  __shared__ float a[8], b, c[2][4];\n"
           "  extern __shared__ __align__(16) float dyn[];\n  __shared__ double\n   d[3];\n  y[0]=a[0];\n}\n")
    rw = rewrite(src, "k.cu")
    body = rw.source.split('#line 1 "<emu-trampolines>"')[0]
    # declared in a function: one per instantiation of it, told apart by a static local's address
    assert 'shared_local<float[8]>(&__emu_site_0, 0, "a", 2)' in body and 'static char __emu_site_0;' in body
    assert 'shared_local<float>(&__emu_site_1, 1, "b", 2)' in body
    assert 'shared_local<float[2][4]>(&__emu_site_2, 2, "c", 2)' in body
    assert 'shared_local<double[3]>(&__emu_site_3, 3, "d", 4)' in body
    assert 'float (&dyn)[] = *reinterpret_cast<float (*)[]>(::emu::dyn_shared("dyn", int(sizeof(float))));' in body
    assert "__shared__" not in body
    lines = body.splitlines()[1:]                           # after the #line 1 directive
    assert lines[5].strip() == "y[0]=a[0];" and lines[6].strip() == "}"   # same line numbers as the source
    assert [n for n, _ in rw.shared_vars] == ["a", "b", "c", "d"]


def test_a_shared_declaration_may_define_its_struct_or_union_type(emu):
    """`__shared__ union { ... } u;` (CUB's temporary storages share one so) and `__shared__ struct T { ... } a, b[2];`
    at file scope: the type is defined first (an anonymous one named by emu), the variables are arena slots, the
    line numbers survive, and the members' own `;` and `__align__` are the type's."""
    src = ("struct Pair { int k; float v; };\n__shared__ struct Tile { int v[4]; } t, w[2];\n"
           "__global__ void k(int* y){\n  __shared__ union {\n    int a[4];\n    __align__(16) Pair p[2];\n  } u;\n"
           "  u.a[threadIdx.x] = 1 + threadIdx.x; t.v[threadIdx.x] = 10; w[1].v[threadIdx.x] = 100;\n"
           "  __syncthreads();\n  y[threadIdx.x] = u.a[3 - threadIdx.x] + t.v[threadIdx.x] + w[1].v[threadIdx.x];\n}\n")
    body = rewrite(src, "k.cu").source.split('#line 1 "<emu-trampolines>"')[0]
    assert "union __emu_shared_type_" in body and "struct Tile {" in body and "__shared__" not in body
    assert body.splitlines()[1:][9].strip().startswith("y[threadIdx.x] = u.a[3 - threadIdx.x]")
    y = np.zeros(4, np.int32)
    emu.load(src).launch("k", (1,), (4,), 0, [y], [0])
    assert (y == [114, 113, 112, 111]).all()
    # negative control: without the barrier, the union's slot is raced like any other shared variable
    with pytest.raises(Exception, match="data race on __shared__ 'u'"):
        emu.load(src.replace("  __syncthreads();\n", "")).launch("k", (1,), (4,), 0, [np.zeros(4, np.int32)], [0])


def test_mma_asm_becomes_a_warp_collective():
    src = ('__global__ void k(int* y){ int a0=0,a1=0,a2=0,a3=0,b0=0,b1=0,c0=0,c1=0,c2=0,c3=0;\n'
           '  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, '
           '{%0,%1,%2,%3};"\n    : "+r"(c0),"+r"(c1),"+r"(c2),"+r"(c3) : "r"(a0),"r"(a1),"r"(a2),"r"(a3), '
           '"r"(b0),"r"(b1));\n  y[0]=c0; }\n')
    body = rewrite(src).source
    call = ("do { const uint32_t __emu_in[] = {::emu::reg_bits((a0)), ::emu::reg_bits((a1)), ::emu::reg_bits((a2)), "
            "::emu::reg_bits((a3)), ::emu::reg_bits((b0)), ::emu::reg_bits((b1)), ::emu::reg_bits((c0)), "
            "::emu::reg_bits((c1)), ::emu::reg_bits((c2)), ::emu::reg_bits((c3))}; uint32_t __emu_out[4]; "
            "::emu::matrix_collective(::emu::W_MMA, ::emu::matrix_code(::emu::MT_S8, ::emu::MT_S8, ::emu::MT_S32, "
            "::emu::MT_S32, 32, false), __emu_in, 10, __emu_out, 4, 2); ::emu::set_reg((c0), __emu_out[0]); "
            "::emu::set_reg((c1), __emu_out[1]); ::emu::set_reg((c2), __emu_out[2]); "
            "::emu::set_reg((c3), __emu_out[3]); } while (0)")
    assert call in body
    assert "asm" not in body.split("<emu-trampolines>")[0]


@pytest.mark.parametrize("instruction, operands", [
    ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}"),
    ("mma.sync.aligned.m16n8k16.row.col.f16.bf16.bf16.f32", "{%0,%1}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}"),
    ("mma.sync.aligned.m16n8k16.row.col.satfinite.f32.f16.f16.f32", "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                                                                     "{%0,%1,%2,%3}"),
    ("mma.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32", "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}"),
    ("mma.sync.aligned.m16n8k16.row.col.f32.f16.bf16.f32", "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}"),
])
def test_mma_forms_emu_does_not_run_are_named(instruction, operands):
    src = ('__global__ void k(float* y){ unsigned a0=0,a1=0,a2=0,a3=0,b0=0,b1=0; float c0=0,c1=0,c2=0,c3=0;\n'
           f'  asm volatile("{instruction} {operands};" : "+f"(c0),"+f"(c1),"+f"(c2),"+f"(c3) : "r"(a0),"r"(a1),'
           '"r"(a2),"r"(a3),"r"(b0),"r"(b1));\n  y[0]=c0; }\n')
    assert re.search(rf"inline PTX '{instruction}' \(line 2\) is not a form emu runs; "
                     r"it runs mma\.sync\.aligned\.m16n8k\{8,16\}", deferred_asm(src))


def test_a_register_list_of_the_wrong_length_is_named():
    src = ('__global__ void k(float* y){ unsigned a0=0,b0=0; float c0=0,c1=0,c2=0,c3=0;\n'
           '  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4}, {%5}, '
           '{%0,%1,%2,%3};" : "+f"(c0),"+f"(c1),"+f"(c2),"+f"(c3) : "r"(a0),"r"(b0));\n  y[0]=c0; }\n')
    assert re.search(r"\(line 2\): a register list of 1 where the instruction takes 4", deferred_asm(src))


@pytest.mark.parametrize("snippet,named", [
    ("float v = tex1Dfetch(t, 0);", r"texture fetches"),
    ("texture<float, 1> t;", r"texture references \(`texture<...>`, removed in CUDA 12"),
    ("float4 v = tex2D<float4>(obj, 0.5f, 0.5f);", r"texture fetches"),
    ("surface<void, 2> s;", r"surface references \(`surface<...>`"),
    ("surf2Dwrite(1.0f, s, 0, 0);", r"surface loads/stores"),
    ("float v = __shfl(y[0], 0);", r"legacy warp shuffles"),
    ("cudaDeviceSynchronize();", r"CUDA runtime API calls"),
    ("auto g = cooperative_groups::this_multi_grid();", r"multi-grid group"),
])
def test_unsupported_constructs_are_named(snippet, named):
    with pytest.raises(UnsupportedConstruct, match=named + r".*line 2"):
        rewrite(f"__global__ void k(float* y){{\n  {snippet}\n}}\n")


def deferred_asm(src: str) -> str:
    """The message of the one inline PTX statement of `src` that emu does not run: the rewrite leaves a call that
    raises it when a launch runs it."""
    calls = re.findall(r'::emu::unsupported_asm\("((?:[^"\\]|\\.)*)"\)', rewrite(src).source)
    assert len(calls) == 1, calls
    return calls[0]


@pytest.mark.parametrize("snippet,named", [
    ('asm volatile("wgmma.fence.sync.aligned;");', r"inline PTX 'wgmma.fence.sync.aligned' \(line 2\) is not supported"),
    ('asm volatile("barrier.cluster.arrive;");', r"inline PTX 'barrier.cluster.arrive' \(line 2\) "
                                                r"is a barrier form emu does not run"),
    ('asm volatile("bra.uni elsewhere;\\n done:");', r"branches to elsewhere, a label it does not define"),
    ('asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 16;" :: "r"(n));',
     r"counts TMA transactions"),
])
def test_inline_ptx_emu_does_not_run_is_named_when_it_runs(snippet, named):
    assert re.search(named, deferred_asm(f"__global__ void k(float* y, unsigned n){{\n  {snippet}\n}}\n"))


def test_a_function_of_the_users_named_like_a_texture_fetch_is_not_one():
    src = ("__device__ float tex2DBilinear(const float* t, float x) { return t[(int)x]; }\n"
           "__global__ void k(float* y){ y[0] = tex2DBilinear(y, 1.0f); }\n")
    assert "tex2DBilinear(y, 1.0f)" in rewrite(src).source


def test_a_kernel_named_like_the_runtime_and_an_unexpanded_host_macro_are_not_runtime_calls():
    """NVIDIA's postProcessGL names its kernel `cudaProcess`; convolutionFFT2D's header keeps a host macro
    `#define SET_FLOAT_BASE checkCudaErrors(cudaBindTexture(...))` (empty in the other branch of an `#if`) that
    its device code never expands. Neither
    is a runtime call in device code. Negative controls: the same macro expanded in the kernel where the build keeps
    its branch, and a call of a runtime function the source does not define, are refused."""
    macro = ("#if USE_TEXTURE\n#define SET_BASE checkCudaErrors( cudaBindTexture(0, tex, d_Src) )\n"
             "#else\n#define SET_BASE\n#endif\n")
    own = "__global__ void\ncudaProcess(float* y) { y[threadIdx.x] = 1.0f; }\n"
    assert "cudaProcess" in rewrite(macro + own).source
    with pytest.raises(UnsupportedConstruct, match=r"CUDA runtime API calls in device source \(line 3\)"):
        rewrite("#define USE_TEXTURE 1\n" + macro + "__global__ void k(float* y) {\n  SET_BASE;\n}\n")
    with pytest.raises(UnsupportedConstruct, match=r"CUDA runtime API calls in device source \(line 4\)"):
        rewrite(own + "__global__ void k(float* y) {\n  cudaMemset(y, 0, 4);\n}\n")


def test_the_sources_own_host_functions_named_like_the_runtime_are_not_runtime_calls():
    """Kaldi's cu-kernels.cu defines its launchers `void cudaF_scale(dim3 Gr, ...) { _scale<<<Gr,Bl>>>(...); }`, and
    its header declares them, so their declarations stay once the bodies are dropped. A declaration of the source's
    own function is no runtime call. Negative control: the same source calling cudaMemset in a kernel."""
    from cudasrc.host_code import program_of
    header = "void cudaF_scale(dim3 Gr, dim3 Bl, float* y, float a);\n"
    src = ("template<typename Real>\n__global__\nstatic void _scale(Real* y, Real a) { y[threadIdx.x] *= a; }\n"
           "void cudaF_scale(dim3 Gr, dim3 Bl, float* y, float a) {\n  _scale<<<Gr,Bl>>>(y, a);}\n"
           "template __global__ void _scale<float>(float*, float);\n")
    out = rewrite(src, program=program_of([src, header])).source
    assert "void cudaF_scale(dim3 Gr, dim3 Bl, float* y, float a);" in out and "<<<" not in out
    bad = src.replace("y[threadIdx.x] *= a;", "cudaMemset(y, 0, 4);")
    with pytest.raises(UnsupportedConstruct, match=r"CUDA runtime API calls in device source \(line 3\)"):
        rewrite(bad, program=program_of([bad, header]))


def test_file_scope_shared_is_declared_where_used_and_uninstantiated_templates_are_named():
    out = rewrite("__shared__ float s[4];\n__global__ void k(float* y){ y[0]=s[0]; }\n"
                  "__global__ void q(float* s){ s[0]=1; }\n").source      # q's parameter hides the variable
    k = next(line for line in out.split("\n") if "void k(" in line)
    q = next(line for line in out.split("\n") if "void q(" in line)
    assert 'auto& s = ::emu::shared_var<float[4]>(0, "s", 1);' in k and "shared_var" not in q, out
    with pytest.raises(UnsupportedConstruct, match=r"template kernel\(s\) k with no explicit instantiation"):
        rewrite("template<int N> __global__ void k(float* y){ y[0]=N; }\n")
    with pytest.raises(UnsupportedConstruct, match=r"no __global__ kernel"):
        rewrite("__device__ float f(float x){ return x; }\n")


def test_missing_intrinsic_is_an_unsupported_construct(emu):
    # Hopper's DPX intrinsics: nvcc accepts them, emu has none
    with pytest.raises(UnsupportedConstruct, match=r"'__vimax3_s32' \(line 2\) is not provided by the emu runtime"):
        emu.load("__global__ void k(int* y){\n  y[0] = __vimax3_s32(y[0], y[1], y[2]);\n}\n")


def test_syntax_error_is_a_build_error(emu):
    # nvcc's device-side compile (the gate) reports it first, as a GPU build would; g++ where nvcc is absent
    with pytest.raises(BuildError, match=r"kernel.cu(:2:|\(2\)).*error"):
        emu.load("__global__ void k(float* y){\n  y[0] = ;\n}\n")


def test_bad_arguments_to_load(emu):
    with pytest.raises(ValueError, match=r"source: expected non-empty"):
        emu.load("   ")
    with pytest.raises(ValueError, match=r"flags: each flag must be a string starting with '-'"):
        emu.load("__global__ void k(float* y){ y[0]=1; }", flags=("O3",))
    with pytest.raises(ValueError, match=r"flags: '-I' needs its value in the same string"):
        emu.load("__global__ void k(float* y){ y[0]=1; }", flags=("-I", "include"))


def test_shared_declarations_in_the_forms_real_code_writes():
    out = rewrite("#define B 8\n__global__ void k(float* y) {\n"
                  "  __shared__ float rows[B][(B + 2) * 4];\n"          # parentheses in a bound
                  "  volatile __shared__ float v[(B >> 1) + 1];\n"       # a qualifier first; `>>` in a bound
                  "  extern float __shared__ dyn[];\n"                   # the type before the keyword
                  "  static __shared__ int n;\n"
                  "  y[0] = rows[0][0] + v[0] + dyn[0] + n;\n}\n").source
    assert 'auto& rows = ::emu::shared_local<float[B][((B + 2) * 4)]>(&__emu_site_0, 0, "rows", 3);' in out
    assert 'static char __emu_site_1; volatile auto& v = ::emu::shared_local<float[((B >> 1) + 1)]>(' in out
    assert 'float (&dyn)[] = *reinterpret_cast<float (*)[]>(::emu::dyn_shared("dyn", int(sizeof(float))));' in out
    assert "extern" not in out.split("dyn_shared")[0].splitlines()[-1]
    # spaces inside a bound are tokens' boundaries: `N * 32 +     + N` is not `N*32++N`
    assert "shared_local<int[(N * 32 + + N)]>" in rewrite(
        "#define N 2\n__global__ void k(int* y) {\n  __shared__ int t[N * 32 +     + N];\n  y[0] = t[0];\n}\n").source
    with pytest.raises(UnsupportedConstruct, match=r"initializer \(line 2\): CUDA allows none"):
        rewrite("__global__ void k(float* y) {\n  __shared__ float s = 1.0f;\n}\n")
    with pytest.raises(UnsupportedConstruct, match=r"initializer \(line 2\)"):
        rewrite("__global__ void k(float* y) {\n  __shared__ float s[2](1.0f);\n}\n")


def test_lines_follow_line_directives():
    """A source whose headers were inlined with `#line` markers names its own lines (the suites' adapters)."""
    src = ('#line 1 "helpers.h"\n__device__ int twice(int v) { return 2 * v; }\n#line 7 "kernel.cu"\n'
           "__global__ void k(float* y){\n  __shared__ float s[4] = {0};\n}\n")
    with pytest.raises(UnsupportedConstruct, match=r"__shared__ declaration with an initializer \(line 8\)"):
        rewrite(src)
    with pytest.raises(UnsupportedConstruct, match=r"initializer \(line 2\)"):
        rewrite("__global__ void k(float* y){\n  __shared__ float s[4] = {0};\n}\n")


def test_a_variable_in_a_branch_the_build_drops_does_not_exist():
    """`#if USE_TEX` around file-scope variables (NVIDIA's particles sample): the host table lists only what the
    preprocessor keeps, with the build's -D flags."""
    src = ("#if USE_TEX\n__device__ float4 cached[4];\n#endif\n__device__ int counter;\n"
           "__global__ void k(int* y){ y[0] = counter; }\n")
    assert rewrite(src, "k.cu").symbols == ["counter"]
    assert rewrite(src, "k.cu", {"USE_TEX": "1"}).symbols == ["cached", "counter"]
    # a condition this reader cannot evaluate: the text as it is (the build says what it finds)
    odd = src.replace("#if USE_TEX", "#if FEATURE(2)")
    assert rewrite(odd, "k.cu").symbols == ["cached", "counter"]


def test_a_source_with_variables_in_a_dropped_branch_builds_and_runs(emu):
    mod = emu.load("#if USE_TEX\n__device__ float4 cached[4];\n#endif\n"
                   "__global__ void k(int* y){ y[threadIdx.x] = threadIdx.x; }\n")
    y = np.zeros(4, np.int32)
    mod.launch("k", (1,), (4,), 0, [y], outputs=(0,))
    assert y.tolist() == [0, 1, 2, 3]


MACRO_KERNELS = r"""
#define SCALE_KERNEL(NAME, F)                                  \
  __global__ void NAME(float* y) { y[threadIdx.x] *= F; }
SCALE_KERNEL(twice, 2.0f)
"""


def test_kernels_written_inside_a_macro_are_named_not_miscompiled(emu):
    # The source text does not name a kernel that a macro expands to: alone, such kernels are an unsupported
    # construct that says why (before, the launch table named the macro's parameter and g++ failed on it).
    with pytest.raises(UnsupportedConstruct, match=r"inside #define macros \(line\(s\) 3\)"):
        rewrite(MACRO_KERNELS)
    # Beside a kernel written out, the written one runs; the macro's are left out of the launch table.
    mod = emu.load(MACRO_KERNELS + "__global__ void plain(float* y) { y[threadIdx.x] += 1.0f; }\n")
    y = np.zeros(4, np.float32)
    mod.launch("plain", (1,), (4,), 0, [y])
    assert np.array_equal(y, np.ones(4, np.float32))
    with pytest.raises(ValueError, match=r"no kernel 'twice' in this module \(it has plain\)"):
        mod.launch("twice", (1,), (4,), 0, [y])


PROTOTYPED = """typedef int data_t;
__global__ void test_kernel(int* n, data_t* out);     // a header's prototype, as Indigo's driver declares its kernel
__device__ data_t twice(data_t v) { return 2 * v; }
__global__ void test_kernel(int* n, data_t* out) { out[threadIdx.x] = twice(n[threadIdx.x]); }
"""


def test_a_kernel_declared_before_its_definition_is_one_kernel(emu):
    assert [(k.name, k.line) for k in rewrite(PROTOTYPED).kernels] == [("test_kernel", 4)]
    module = emu.load(PROTOTYPED)
    out = np.zeros(4, np.int32)
    module.launch("test_kernel", (1,), (4,), 0, [np.arange(4, dtype=np.int32), out], outputs=(1,))
    assert np.array_equal(out, [0, 2, 4, 6])


def test_a_construct_in_a_branch_the_build_drops_is_not_refused():
    """ggml's 2024 ggml-cuda.cu maps the _sync shuffles to HIP's legacy ones under `#if defined(GGML_USE_HIPBLAS)`:
    a branch this build never compiles. The same macro outside any conditional is refused (the negative control),
    and so is one in a branch that emu's own macros keep (`__CUDA_ARCH__`, `CUDART_VERSION`)."""
    mapping = "#define __shfl_xor_sync(mask, var, lane, width) __shfl_xor(var, lane, width)\n"
    kernel = "__global__ void k(float* y){ y[0] = __shfl_xor_sync(0xffffffffu, y[0], 1, 32); }\n"
    rewrite("#if defined(GGML_USE_HIPBLAS)\n" + mapping + "#endif\n" + kernel)
    for before, after in (("", ""), ("#if CUDART_VERSION >= 11000\n", "#endif\n"),
                          ("#ifdef __CUDA_ARCH__\n", "#endif\n"), ("#ifndef GGML_USE_HIPBLAS\n", "#endif\n")):
        with pytest.raises(UnsupportedConstruct, match=r"legacy warp shuffles without _sync \(line \d\)"):
            rewrite(before + mapping + after + kernel)


def test_the_macros_emu_predefines_are_the_runtimes():
    """EMU_PREDEFINED, with which the textual checks read a source's #ifs, is what emu_device.hpp defines."""
    from pathlib import Path

    from harness.backends.emu.rewrite import EMU_PREDEFINED
    header = (Path(__file__).parents[3] / "harness/backends/emu/emu_device.hpp").read_text()
    for name, value in EMU_PREDEFINED.items():
        assert re.search(rf"^#define {name} {value}$", header, re.M), name


def test_a_headers_rewritten_copy_is_part_of_the_modules_cache_key(tmp_path, monkeypatch):
    """emu compiles copies of the source's headers with their inline PTX translated. Their text was not in the
    module's key, so a module built before a translator change (add.cc and subc came in with cuFHE) kept running
    the old translation of a header's asm: a stale verdict. The copies as rewritten are now in the key."""
    from harness.backends.emu import build as emu_build
    from harness.backends.emu import toolchain as tc
    monkeypatch.setenv("QCONFORM_CACHE", str(tmp_path / "cache"))
    (tmp_path / "limbs.cuh").write_text('__device__ unsigned add(unsigned a, unsigned b) {\n  unsigned d;\n'
                                        '  asm("add.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));\n  return d;\n}\n')
    src = '#include "limbs.cuh"\n__global__ void k(unsigned* y) { y[0] = add(1u, 2u); }\n'
    toolchain = tc.toolchain()
    first = emu_build.build(src, [f"-I{tmp_path}"], toolchain=toolchain, name="k.cu")
    assert emu_build.build(src, [f"-I{tmp_path}"], toolchain=toolchain, name="k.cu").path == first.path   # reused
    translated = emu_build.rewrite_header
    monkeypatch.setattr(emu_build, "rewrite_header",          # another translation of the same header
                        lambda text, first_slot, name, *rest: (lambda r: (r[0] + "\n// retranslated\n", r[1]))(
                            translated(text, first_slot, name, *rest)))
    assert emu_build.build(src, [f"-I{tmp_path}"], toolchain=toolchain, name="k.cu").path != first.path


MEMBER_TEMPLATE_CALLS = r"""
template <typename To, typename From> struct Convert {
  template <int N> __device__ static void apply(To* dst, const From* src) {
    for (int i = 0; i < N; ++i) dst[i] = To(src[i]) * To(2);
  }
};
template <typename T> struct Limit { static constexpr int value = 3; };
template <typename To, typename From, int N> __device__ void convert(To* dst, const From* src) {
  if (Limit<To>::value < N) Convert<To, From>::apply<N>(dst, src);     // nvcc accepts the call without `template`
  else Convert<To, From>::template apply<N>(dst, src);
}
__global__ void k(const int* x, float* y) { convert<float, int, 4>(y + 4 * threadIdx.x, x + 4 * threadIdx.x); }
"""


def test_a_member_template_called_without_the_template_keyword_builds(emu, monkeypatch):
    """flashinfer's vec_dtypes.cuh calls `vec_cast<T, S>::cast<N>(...)`, which nvcc accepts and g++ reads as two
    comparisons (an error once instantiated): emu's rewrite writes the keyword in, for names the text declares as
    member templates; a comparison with another member (`Limit<To>::value < N`) and a call that has the keyword
    stay as written, in the source and in a header's copy."""
    from harness.backends.emu.rewrite import rewrite_header
    from harness.backends.emu.template_keyword import member_template_names
    assert member_template_names(MEMBER_TEMPLATE_CALLS) == {"apply"}
    header_copy = rewrite_header(MEMBER_TEMPLATE_CALLS, 0, "k.cuh", {}, member_template_names(MEMBER_TEMPLATE_CALLS))
    for body in (rewrite(MEMBER_TEMPLATE_CALLS, "k.cu").source, header_copy[0]):
        assert "if (Limit<To>::value < N) Convert<To, From>::template apply<N>(dst, src);" in body
        assert "else Convert<To, From>::template apply<N>(dst, src);" in body
    x, y = np.arange(16, dtype=np.int32), np.zeros(16, np.float32)
    emu.load(MEMBER_TEMPLATE_CALLS).launch("k", (1,), (4,), 0, [x, y], [1])
    np.testing.assert_array_equal(y, 2 * np.arange(16))
    # negative control: without the rule, g++ rejects the source
    from harness.backends.emu import rewrite as emu_rewrite
    monkeypatch.setattr(emu_rewrite, "with_template_keywords", lambda text, names: text)
    with pytest.raises(UnsupportedConstruct, match="unresolved overloaded function type"):
        emu.load(MEMBER_TEMPLATE_CALLS)


def test_a_member_template_of_one_header_called_in_another_file_gets_the_keyword(tmp_path, monkeypatch):
    """The member template may be declared in one of the program's headers and called, without `template`, in the
    source or in another header: the keyword is written in every file's copy, since the build reads them together."""
    from harness.backends.emu import build as emu_build
    from harness.backends.emu import toolchain as tc
    (tmp_path / "cast.cuh").write_text("template <typename To> struct Convert {\n"
                                       "  template <int N> __device__ static void apply(To* d, const int* s) {\n"
                                       "    for (int i = 0; i < N; ++i) d[i] = To(s[i]) + To(1);\n  }\n};\n")
    (tmp_path / "use.cuh").write_text('#include "cast.cuh"\ntemplate <typename To, int N>\n'
                                      "__device__ void convert(To* d, const int* s) { Convert<To>::apply<N>(d, s); }\n")
    src = ('#include "use.cuh"\n__global__ void k(const int* x, float* y) {\n'
           "  convert<float, 2>(y + 2 * threadIdx.x, x + 2 * threadIdx.x);\n"
           "  Convert<double>::apply<1>((double*)nullptr + 0 * threadIdx.x, x);\n}\n")
    rw = rewrite(src, "k.cu", headers={"cast.cuh": (tmp_path / "cast.cuh").read_text(),
                                       "use.cuh": (tmp_path / "use.cuh").read_text()})
    assert rw.member_templates == {"apply"} and "Convert<double>::template apply<1>(" in rw.source
    built = emu_build.build(src.replace("  Convert<double>::apply<1>((double*)nullptr + 0 * threadIdx.x, x);\n", ""),
                            [f"-I{tmp_path}"], toolchain=tc.toolchain(), name="k.cu")
    assert built.kernels[0].name == "k"
    # negative control: with each file's own member templates alone, use.cuh's call stays two comparisons for g++
    from harness.backends.emu import rewrite as emu_rewrite
    monkeypatch.setattr(emu_rewrite, "program_member_templates", lambda texts: frozenset())
    with pytest.raises((BuildError, UnsupportedConstruct), match="unresolved overloaded function type"):
        emu_build.build(src.replace("  Convert<double>::apply<1>((double*)nullptr + 0 * threadIdx.x, x);\n", ""),
                        [f"-I{tmp_path}"], toolchain=tc.toolchain(), name="k.cu")
