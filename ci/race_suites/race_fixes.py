"""The races projects fixed: an adapter for ci/score_race_suite.py that takes its labels from a project's history.

Inference engines fix data races in their CUDA kernels, each in a commit of its own whose message says so ("CUDA: fix
race condition in MMQ ids_dst", "Fix sync bug in GPTQ reconstruct kernel", ...). Each fix is a labelled pair written
by people who knew the race was real: the kernel at the fix's parent is racy, the kernel at the fix is race-free as
far as that race goes. SUITE is a clone of one of PROJECTS with its history (a bare one too: `git clone --bare`):
ggml (github.com/ggml-org/ggml, the tensor library of llama.cpp, and a race a llama.cpp pull request reports in its
decode attention over a Q8_0 cache), exllamav2 (github.com/turboderp/exllamav2),
exllama (github.com/turboderp/exllama, its first version), llm.c (github.com/karpathy/llm.c: a benchmark's
softmax, the training program's fused classifier, and a race a pull request reports in its fp32 program), HeCBench (github.com/ORNL/HeCBench, formerly
zjin-lcf/HeCBench: benchmark programs whose races users reported), Kaldi (github.com/kaldi-asr/kaldi: the speech
toolkit's matrix kernels), arrayfire (github.com/arrayfire/arrayfire: its CUDA backend's scans), cuFHE
(github.com/vernamlab/cuFHE: homomorphic encryption's bootstrapping) or OpenMM (github.com/openmm/openmm: molecular
dynamics, whose CUDA modules are composed at run time: a case's `module` and `prelude`) or Megatron-LM
(github.com/NVIDIA/Megatron-LM: its fused layer norm, with stand-ins for the PyTorch headers its device code uses: a
case's `headers`), mshadow (github.com/dmlc/mshadow: MXNet's tensor library, its warp-synchronous reductions) or
flashinfer (github.com/flashinfer-ai/flashinfer: its sampling's, top-k's and merge of states' reuses of shared
memory) or bitsandbytes
(github.com/bitsandbytes-foundation/bitsandbytes: its quantile estimate) or ik_llama.cpp
(github.com/ikawrakow/ik_llama.cpp: a fork of llama.cpp, its sparse-attention indexer's mask and Qwen3-Next's delta
net) or Arbor (github.com/arbor-sim/arbor: its Hines matrices' interleaving) or GPUMD (github.com/brucefan1983/GPUMD:
molecular dynamics, its warp-synchronous reductions). The
files are read from git at each commit (`git archive` of the folders the project's builds read, into a temporary
folder removed at exit); nothing of them is kept here.

Each case is one kernel of the fixed file as the project builds and launches it: the instantiation its
template-instances file makes (or that its host code launches), the project's include folders (ggml's
`-extended-lambda`; a framework header that serves host code only, such as ATen's, found empty or including only
the host library header it brings, cuBLAS's), a grid, block and
dynamic shared size its own launcher computes for a small problem, and arguments named as the kernel names them,
filled from the recorded seed (`qconform racescan`'s specs, harness.racescan.spec). The launch is run by the
command's own code (harness.cli.racescan.judge), so a record replays as the command line it prints. Where the fix
changed the launcher too (the shared bytes of ggml's ssm_scan and group_norm), each side gets its own.

The fixes, and how each case makes its race happen, are in PROJECTS; docs/KERNELS.md ("Races projects fixed") has
the verdicts. Fixes not here: the ones whose race is between launches or devices (ggml's programmatic dependent
launch, its split-mode row buffers), which one launch cannot show.
"""
from __future__ import annotations

import atexit
import io
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from harness.racescan import Verdict

from .run import file_verdict, kernel_record

GGML_CUDA = "src/ggml-cuda"
INSTANCES = f"{GGML_CUDA}/template-instances"
INCLUDES = (GGML_CUDA, "src", "include")                 # ggml's include folders since the backend had a folder
INCLUDES_2024 = ("include/ggml", "src")                  # the one-file backend of early 2024
EXLLAMAV2_CUDA = "exllamav2/exllamav2_ext/cuda"


@dataclass(frozen=True)
class Case:
    """One kernel launch, the same on both sides of a fix (but `shared` may differ: (parent, fix))."""
    name: str
    source: str                       # the file racescan loads, in the tree
    kernel: str
    grid: str
    block: str
    args: str
    shared: "tuple[int, int]" = (0, 0)
    includes: tuple = INCLUDES
    defines: tuple = ()
    barrier_sites: str = "same"
    empty_headers: tuple = ()         # headers of a framework that serve host code only (racescan --empty-header)
    relaxations: tuple = ("extended-lambda",)        # nvcc's, as the project's build gives them
    parts: tuple = ()                 # the folders its build reads, where not the project's (Project.parts)
    module: tuple = ()                # files a runtime compiler puts before `source` in one module, in order
    prelude: str = ""                 # the text it writes before them (OpenMM's compilation defines, typedefs)
    headers: tuple = ()               # (name, text): stand-ins for a framework's headers its device code uses


@dataclass(frozen=True)
class Fix:
    commit: str                       # the project's commit of the fix (its parent is the racy side)
    title: str
    cases: tuple
    reported: str = ""                # a race reported at `commit` and fixed after the history read here (the
                                      # issue that reports it): `commit` is the racy side, and there is no other
    kept: str = ""                    # a race the fix keeps, real by the memory model (where): its side is no
                                      # race-free label, so only the parent's is scored
    racy_at: str = ""                 # the racy side's commit where it is not the fix's parent: a first fix that
                                      # was wrong in another way, which `commit` redid


def _values(items) -> str:
    return "values(" + ",".join(str(v) for v in items) + ")"


# Flash attention, decode: one query of head size 128 against 256 keys of f16 K and V, one head, 4 warps.
_FA_VEC_ARGS = ("Q:float32[128]=random(-1,1) K:float16[32768]=random(-1,1) V:float16[32768]=random(-1,1) "
                "mask:float16[4096]={mask} dst:float32[128]!out dst_meta:null scale:float32=0.0883883 "
                "max_bias:float32=0 m0:float32=1 m1:float32=1 n_head_log2:uint32=1 logit_softcap:float32=0 "
                "ne00:int32=128 ne01:int32=1 ne02:int32=1 ne03:int32=1 ne10:int32=128 ne11:int32=256 ne12:int32=1 "
                "ne13:int32=1 ne31:int32=16 nb31:int32=512 nb01:int32=512 nb02:int32=512 nb03:int32=512 "
                "nb11:int32=256 nb12:int32=65536 nb13:int32=65536 nb21:int32=256 nb22:int32=65536 nb23:int32=65536 "
                "ne0:int32=128 ne1:int32=1 ne2:int32=1 ne3:int32=1")
# the mask's rows (16 x 256 halves): keys 0..127 masked out (-inf), so the first tile of 128 keys is skipped whole
_HALF_MASKED = _values((["-inf"] * 128 + [0] * 128) * 16)
# MoE: 4 experts, 8 tokens with 2 experts each (16 columns sorted by expert), K = 256 (512 for the fixup), 128 rows;
# ids_dst holds the expert-sorted columns' destinations, then room for the kernel's reads past them
_MMQ_IDS = "ids_dst:int32[149]=" + _values([0, 7, 8, 15, 1, 2, 9, 10, 3, 4, 11, 12, 5, 6, 13, 14, 0, 4, 8, 12, 16]
                                           + [0] * 128) + " expert_bounds:int32[5]=values(0,4,8,12,16)"
_SOFTMAX_PARAMS = ("p:struct={{nheads={heads},n_head_log2={heads},ncols={cols},nrows_x={rows},nrows_y={ne01},"
                   "ne00={cols},ne01={ne01},ne02={heads},ne03=1,nb11={nb11},nb12={nb12},nb13={nb12},ne12=1,ne13=1,"
                   "scale=1,max_bias=0,m0=1,m1=1}}")
_CUMSUM = ("src:float32[4096]=random(-1,1) dst:float32[4096]!out ne00:int64=2048 ne01:int64=2 ne02:int64=1 "
           "ne03:int64=1 {s00}s01:int64=2048 s02:int64=4096 s03:int64=4096 {s0}s1:int64=2048 s2:int64=4096 "
           "s3:int64=4096")

GGML_FIXES = (
    Fix("31f38075", "cuda : fix data race in soft max (llama/5853)", (
        # the block's sum reuses buf_iw while warp 0 may still read the maximum from it (2 rows of 256, 8 warps)
        Case("soft_max_f32", "src/ggml-cuda.cu", "soft_max_f32<true, 256, 256>", "32", "256",
             "x:float32[8192]=random(-4,4) mask:null pos:null dst:float32[8192]!out ncols_par:int32=256 "
             "nrows_y:int32=4 scale:float32=1 max_bias:float32=0 m0:float32=1 m1:float32=1 n_head_log2:uint32=8",
             (1152, 1152), INCLUDES_2024),)),
    Fix("6e2c0557", "CUDA: fix race condition in MMQ ids_dst (llama/13294)", (
        # stream-k over 2 blocks: each block's second expert tile rewrites ids_dst_shared while the first tile's
        # write-back still reads it
        Case("mul_mat_q", f"{INSTANCES}/mmq-instance-q8_0.cu", "mul_mat_q<GGML_TYPE_Q8_0, 16, 8, false>", "2,1,1",
             "32,8,1", "x:int8[139264]=random(-8,8) y:int32[6912]=random(-100,100) " + _MMQ_IDS +
             " dst:float32[2048] tmp_fixup:null ncols_x:int32=256 nrows_x:int32=128 ncols_y:int32=16 "
             "stride_row_x:int32=8 stride_col_dst:int32=128 channel_ratio:int32=1 nchannels_y:int32=4 "
             "stride_channel_x:int32=1024 stride_channel_y:int32=144 stride_channel_dst:int32=256 "
             "sample_ratio:int32=1 nsamples_y:int32=1 stride_sample_x:int32=4096 stride_sample_y:int32=1152 "
             "stride_sample_dst:int32=2048", (42048, 42048)),)),
    Fix("3c5fb16a", "CUDA: fix race condition in MMQ stream-k fixup (llama/13299)", (
        # K = 512 over 3 blocks: block 2 completes a tile block 1 left half done, reading ids_dst_shared as its
        # threads fill it
        Case("mul_mat_q_stream_k_fixup", f"{INSTANCES}/mmq-instance-q8_0.cu",
             "mul_mat_q_stream_k_fixup<GGML_TYPE_Q8_0, 16, 8, false>", "3,1,1", "32,8,1",
             _MMQ_IDS + " dst:float32[2048]=random(-1,1) tmp_last_tile:float32[6144]=random(-1,1) "
             "ncols_x:int32=512 nrows_x:int32=128 ncols_y:int32=16 stride_col_dst:int32=128 nchannels_y:int32=4 "
             "stride_channel_dst:int32=256 nsamples_y:int32=1 stride_sample_dst:int32=2048"),)),
    Fix("38648430", "CUDA: fix race conditions FlashAttention kernels (llama/13438)", (
        # KQ's initialisation by one warp against another warp's first scores (no mask)
        Case("flash_attn_vec_ext_f16 (KQ init)", f"{INSTANCES}/fattn-vec-f16-instance-hs128-f16-f16.cu",
             "flash_attn_vec_ext_f16<128, 1, GGML_TYPE_F16, GGML_TYPE_F16, false>", "1,1,1", "32,4,1",
             _FA_VEC_ARGS.format(mask="zeros")),)),
    Fix("575d02f5", "CUDA: fix race condition in FA vector kernels (llama/13742)", tuple(
        # a tile whose keys are all masked is skipped with `continue` while warp 3 still reads the tile's mask
        Case(f"flash_attn_vec_ext_{t} (masked tile)", f"{INSTANCES}/fattn-vec-{t}-instance-hs128-f16-f16.cu",
             f"flash_attn_vec_ext_{t}<128, 1, GGML_TYPE_F16, GGML_TYPE_F16, false>", "1,1,1", "32,4,1",
             _FA_VEC_ARGS.format(mask=_HALF_MASKED)) for t in ("f16", "f32"))),
    Fix("391d7449", "cuda: fix race condition in cumsum (llama/18448)", (
        # thread 0 adds the chunk's total to the carry while the other threads still read it (2 chunks of 1024)
        Case("cumsum_kernel", f"{GGML_CUDA}/cumsum.cu", "cumsum_kernel<float>", "2", "256",
             _CUMSUM.format(s00="s00:int64=1 ", s0="s0:int64=1 "), (1064, 1064)),
        Case("cumsum_cub_kernel", f"{GGML_CUDA}/cumsum.cu", "cumsum_cub_kernel<float, 256>", "2", "256",
             _CUMSUM.format(s00="", s0=""), defines=("GGML_CUDA_USE_CUB",)),)),
    Fix("b1712969", "Fix data race in CUDA's \"cpy\" kernel (llama/20507)", (
        # a transposed copy of 4 matrices of 32 x 32: the next matrix's tile is written while the last is read
        Case("cpy_scalar_transpose", f"{GGML_CUDA}/cpy.cu", "cpy_scalar_transpose<float>", "1,1,1", "32,8",
             "cx:float32[4096]=random(-1,1) cdst:float32[4096]!out ne:int64=4096 ne00:int64=32 ne01:int64=32 "
             "ne02:int64=4 nb00:int64=4 nb01:int64=128 nb02:int64=4096 nb03:int64=16384 ne10:int64=32 "
             "ne11:int64=32 ne12:int64=4 nb10:int64=4 nb11:int64=128 nb12:int64=4096 nb13:int64=16384"),)),
    Fix("5f0b0e89", "CUDA: Fix ssm_scan_f32 data-races (llama/24360)", (
        # Mamba-1, d_state 16, 128 channels, 2 tokens: CUB's load storage reused, and smemB/smemC per token
        Case("ssm_scan_f32", f"{GGML_CUDA}/ssm-scan.cu", "ssm_scan_f32<128, 16, 2>", "1,1", "128",
             "src0_ptr:float32[2048]=random(-1,1) src1_ptr:float32[256]=random(-1,1) "
             "src2_ptr:float32[256]=random(-3,3) "
             "src3_ptr:float32[2048]=random(-1,0) src4_ptr:float32[32]=random(-1,1) src5_ptr:float32[32]=random(-1,1) "
             "src6_ptr:int32[1]=0 dst_ptr:float32[2304]!out src0_nb2:int32=64 src0_nb3:int32=8192 "
             "src1_nb2:int32=512 src1_nb3:int32=1024 src2_nb1:int32=512 src2_nb2:int32=1024 src3_nb1:int32=64 "
             "src4_nb2:int32=64 src4_nb3:int32=128 src5_nb2:int32=64 src5_nb3:int32=128 s_off:int64=1024 "
             "d_inner:int64=128 L_param:int64=2", (17408, 0)),)),
    Fix("3e12f441", "CUDA: Fix data-races when reusing SMEM in block_reduce (llama/26385)", (
        # the block's sum after its maximum through one buffer (4 x 8 rows of 256, 8 warps)
        Case("soft_max_f32", f"{GGML_CUDA}/softmax.cu", "soft_max_f32<true, 256, 256, half>", "4,8,1", "256",
             "x:float32[8192]=random(-4,4) mask:null sinks:null dst:float32[8192]!out "
             + _SOFTMAX_PARAMS.format(heads=8, cols=256, rows=32, ne01=4, nb11=512, nb12=2048), (1152, 1152)),
        # one row of 16384 over 4 cooperative blocks: the sum's reduction after the maximum's in one buffer
        Case("soft_max_f32_parallelize_cols", f"{GGML_CUDA}/softmax.cu", "soft_max_f32_parallelize_cols", "4",
             "256", "x:float32[16384]=random(-4,4) dst:float32[16384]!out tmp_maxs:float32[4] tmp_sums:float32[4] "
             + _SOFTMAX_PARAMS.format(heads=1, cols=16384, rows=1, ne01=1, nb11=0, nb12=0)),
        # the variance's reduction after the mean's in s_sum (2 groups of 2048, 32 warps)
        Case("group_norm_f32", f"{GGML_CUDA}/norm.cu", "group_norm_f32<1024>", "2", "1024",
             "x:float32[4096]=random(-2,2) dst:float32[4096]!out group_size:int32=2048 ne_elements:int32=4096 "
             "eps:float32=1e-6", (128, 256)),)),
    Fix("d99724f2", "readme : update following llama.cpp style (#1599): the newest commit read here", (
        # decode attention over a Q8_0 KV cache at head size 64: Q is quantized to q8_1 in shared memory by 16
        # lanes' worth of ints (ni = 16), but all 32 lanes store an int, and lanes 16..31 write over the scales
        # and sums that lanes 0 and 8 store right after them, in one warp with nothing between (one query, 128
        # cached keys of Q8_0 rows of 68 bytes, one head)
        Case("flash_attn_ext_vec (Q8_0 K and V, head size 64)", f"{INSTANCES}/fattn-vec-instance-q8_0-q8_0.cu",
             "flash_attn_ext_vec<64, 1, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, false>", "1,1,1", "32,4",
             "Q_ptr:float32[64]=random(-1,1) K_ptr:uint8[8704]=random(0,120) V_ptr:uint8[8704]=random(0,120) "
             "mask_ptr:null sinks_ptr:null KV_max_ptr:null dst_ptr:float32[64]!out dst_meta_ptr:null "
             "scale:float32=0.125 max_bias:float32=0 m0:float32=1 m1:float32=1 n_head_log2:uint32=1 "
             "logit_softcap:float32=0 ne00:int32=64 ne01:struct={x=1,y=0,z=1} ne02:int32=1 ne03:int32=1 "
             "nb01:int32=256 nb02:int32=256 nb03:int32=256 ne10:int32=64 ne11:int32=128 ne12:int32=1 ne13:int32=1 "
             "nb11:int32=68 nb12:int32=8704 nb13:int64=8704 nb21:int32=68 nb22:int32=8704 nb23:int64=8704 "
             "ne31:int32=1 ne32:int32=1 ne33:int32=1 nb31:int32=256 nb32:int32=256 nb33:int64=256"),),
        reported="ggml-org/llama.cpp#28358 (September 2026, open: its first race, found by compute-sanitizer's "
                 "racecheck)"),
    Fix("d99724f2", "readme : update following llama.cpp style (#1599): the newest commit read here", (
        # MUL_MAT_ID's helper as the issue reproduces it (8 experts, 2 used per token, 32 tokens): a block of one warp
        # per expert; the lanes that find their expert store a compact record (it, iex) into shared memory, and other
        # lanes read those records back after shuffles and a warp reduction alone. A shuffle exchanges registers; only
        # __syncwarp orders memory among a warp's lanes (the pull request adds one): a race under --warp-order
        # syncwarp, ordered under the collectives rule
        Case("mm_ids_helper", f"{GGML_CUDA}/mmid.cu", "mm_ids_helper<2>", "8", "32",
             "ids:int32[64]=distinct(0,8,2) ids_src1:int32[64]!out ids_dst:int32[64]!out expert_bounds:int32[9]!out "
             "n_tokens:int32=32 n_expert_used_var:int32=2 nchannels_y:int32=1 si1:int32=2 sis1:int32=1 "
             "write_inverse:bool=0", (128, 128)),),
        reported="ggml-org/llama.cpp#28376 (September 2026: compute-sanitizer's racecheck reports the shared records' "
                 "read-after-write; #28475 fixed it after the history read here)"),
)

EXLLAMAV2_FIXES = (
    Fix("9a7afecd", "Fix sync bug in GPTQ reconstruct kernel", (
        # a GPTQ matrix of 256 x 512 with act-order (a permutation of its rows), in 2 blocks of 128 rows: each thread
        # reads the whole permutation that the block's threads have just written
        Case("reconstruct_gptq_kernel", f"{EXLLAMAV2_CUDA}/q_matrix.cu", "reconstruct_gptq_kernel", "1,2", "128",
             "b_q_weight:uint32[16384]=random(0,4294967295) b_q_perm:uint16[256]=distinct(0,256,256) "
             "b_gptq_qzeros:uint32[128]=random(0,4294967295) b_gptq_scales:float16[1024]=random(0.001,0.01) "
             "size_k:int32=256 size_n:int32=512 groupsize:int32=128 groups:int32=2 b:float16[131072]!out "
             "rows_4:int32=256 row_a:int32=0 row_b:int32=256", includes=("exllamav2/exllamav2_ext",),
             empty_headers=("ATen/cuda/CUDAContext.h",), relaxations=()),)),
)

EXLLAMA_FIXES = (
    Fix("d5df6a8", "Optimize q4_matmul: fix __syncthreads", (
        # x (2 rows of 128) times a 4-bit matrix of 128 x 64 with one group, as q4_matmul_cuda launches it: blocks of
        # one warp (THREADS_X 32, THREADS_Y 1), one per 32 columns and row, the whole of `dim` in one block along z.
        # Its lanes fill the shared row of x and read all of it with no barrier (THREADS_X * THREADS_Y > 32 is
        # false), and the even lanes zero pairs of outputs that the odd lanes then add to, behind a __syncthreads()
        # only the even lanes reach. A second block along z would race on `out` at the fix too (one block zeroes
        # what the others add to), and a second group per block would reuse the row before all lanes have read it.
        Case("q4_matmul_kernel", "exllama_ext/cuda_func/q4_matmul.cu", "q4_matmul_kernel<true, true, false>", "2,2,1",
             "32", "x:float16[256]=random(-1,1) w:uint32[1024]=random(0,4294967295) out:float16[128]!out "
             "w_scales:float16[64]=random(0.001,0.01) w_zeros:uint32[8]=random(0,4294967295) height:int32=2 "
             "dim:int32=128 width:int32=64 groupsize:int32=128 block_size_z:int32=256 x_map:null no_zero:bool=0",
             (256, 256), includes=("exllama_ext",), empty_headers=("ATen/cuda/CUDAContext.h=cublas_v2.h",),
             relaxations=()),)),
)


LLMC_FIXES = (
    Fix("c73fa884", "fixed numerics for online kernel, and an existing race condition in kernel 2", (
        # 4 rows of 256 over 128 threads: every thread reads the maximum from shared[0] before the barrier after the
        # reduction's last step, which thread 0 writes (the file is a whole benchmark program: its main is host code)
        Case("softmax_forward_kernel2", "dev/cuda/softmax_forward.cu", "softmax_forward_kernel2", "4", "128",
             "out:float32[1024]!out inp:float32[1024]=random(-4,4) N:int32=4 C:int32=256", (512, 512), includes=(),
             relaxations=()),)),
    Fix("0f144e3", "Support 100% determinism, fix race condition, update global norm", (
        # the training program's fused cross-entropy (bf16, llm.c's default build): 2 rows of a vocabulary of 8192,
        # one block of 1024 threads per row, as fused_classifier launches it (V >= 8 * 1024: its first loop
        # assumes so). Thread 0 reads the target's logit for the loss while the other threads overwrite the
        # row's logits with their gradients; the fix puts a barrier between. The header includes NVTX's and the
        # profiler's headers for its host code (qconform's stand-ins where the toolkit lacks them).
        Case("fused_classifier_kernel5", "llmc/fused_classifier.cuh", "fused_classifier_kernel5<true, false>", "2",
             "1024", "logits:bfloat16[16384]=random(-4,4) losses:bfloat16[2]!out probs:null dloss:float32=0.25 "
             "targets:int32[2]=random(0,8192) B:int32=1 T:int32=2 V:int32=8192 P:int32=8192", includes=("llmc",),
             relaxations=(), parts=("llmc",)),)),
    Fix("f1e2ace", "Fix data race between two writes on a shared memory in soft_max_autoregressive_backward_kernel", (
        # the fp32 training program's attention backward: B 1, 2 heads, T 64, as its backward launches it
        # (T/4 x B*NH blocks of 256). Warp 0 zeroes block_acc while the other warps store their sums into it, with no
        # barrier between (the race the pull request describes); the next row's sums also overwrite block_acc while
        # other warps still read the last row's
        Case("softmax_autoregressive_backward_kernel", "train_gpt2_fp32.cu", "softmax_autoregressive_backward_kernel",
             "16,2", "256", "dpreatt:float32[8192]=zeros datt:float32[8192]=random(-1,1) att:float32[8192]=random(0,1) "
             "B:int32=1 T:int32=64 C:int32=128 scale:float32=0.125", includes=(), relaxations=(),
             parts=("train_gpt2_fp32.cu", "llmc")),),
        reported="karpathy/llm.c#847 (April 2026, open)"),
)

# lsqt's folder holds an archive of examples that a snapshot of the history may lack: its build's three files only
_LSQT = tuple(f"src/lsqt-cuda/{f}" for f in ("vector.cu", "vector.h", "common.h"))

HECBENCH_FIXES = (
    Fix("5e7005d5a", "[aidw] ... fix the data-race issue", (
        # 512 points interpolated from 512 data points in 2 blocks of 256, as main sizes its launch: each block
        # stages the data points in tiles of 256 and reads a whole tile; the next tile overwrote it with no
        # barrier after the reads (the fix adds one)
        Case("AIDW_Kernel_Tiled", "src/aidw-cuda/main.cu", "AIDW_Kernel_Tiled", "2", "256",
             "dx:float32[512]=random(0,1) dy:float32[512]=random(0,1) dz:float32[512]=random(0,1) dnum:int32=512 "
             "ix:float32[512]=random(0,1) iy:float32[512]=random(0,1) iz:float32[512]!out inum:int32=512 "
             "area:float32=1 avg_dist:float32[512]=random(0.01,0.1)", includes=(), relaxations=(),
             parts=("src/aidw-cuda",)),)),
    Fix("13ad568c9", "[adv] address data races between shared memory reads and writes in the kernels", (
        # 2 elements of degree 7 (512 nodes, 4096 cubature nodes), blocks of 16 x 16 as main launches them, built
        # as its Makefile builds it (-Ddfloat=double -Ddlong=int): the interpolated fields are written to shared
        # arrays that other threads still read from the last step, with no barrier between
        Case("advCubatureHex3D", "src/adv-cuda/main.cu", "advCubatureHex3D", "2", "16,16",
             "Nelements:int32=2 vgeo:float64[12288]=random(0,1) cubvgeo:float64[98304]=random(0,1) "
             "cubD:float64[24576]=random(0,1) cubInterpT:float64[2097152]=random(0,1) offset:int32=1024 "
             "U:float64[3072]=random(0,1) NU:float64[3072]!out", includes=(), defines=("dfloat=double", "dlong=int"),
             relaxations=(), parts=("src/adv-cuda",)),)),
    Fix("061bd6588", "[lsqt] address compile errors", (
        # the inner products of 600 complex states, 3 blocks of 256, then of 2 moments over those 3 partial sums, as
        # Vector::inner_product_1 and _2 launch them, built as its Makefile builds it (-DDEBUG; real is double):
        # each block ends in a warp-synchronous reduce over a volatile shared array by warp 0's lanes, with no
        # __syncwarp between the steps. Issue #91 reported it; f5f07f3ed put __syncwarp between every read and
        # write, misspelled `__syncwrap`, which did not build until this commit: the racy side is its parent.
        Case("gpu_find_inner_product_1", "src/lsqt-cuda/vector.cu", "gpu_find_inner_product_1", "3", "256",
             "number_of_atoms:int32=600 g_final_state_real:float64[600]=random(-1,1) "
             "g_final_state_imag:float64[600]=random(-1,1) g_random_state_real:float64[600]=random(-1,1) "
             "g_random_state_imag:float64[600]=random(-1,1) g_inner_product_real:float64[3]!out "
             "g_inner_product_imag:float64[3]!out g_offset:int32=0", includes=(), defines=("DEBUG",),
             relaxations=(), parts=_LSQT),
        Case("gpu_find_inner_product_2", "src/lsqt-cuda/vector.cu", "gpu_find_inner_product_2", "2", "256",
             "number_of_atoms:int32=600 g_inner_product_1_real:float64[6]=random(-1,1) "
             "g_inner_product_1_imag:float64[6]=random(-1,1) g_inner_product_2_real:float64[2]!out "
             "g_inner_product_2_imag:float64[2]!out", includes=(), defines=("DEBUG",), relaxations=(),
             parts=_LSQT)), racy_at="f5f07f3ed^"),
    # Races users reported in June 2026 (ORNL/HeCBench issues #253 to #264, each with compute-sanitizer's racecheck
    # log or a reading of the memory model, and the racing lines), which the maintainer fixed and closed after the
    # newest commit here: the programs at that commit are racy, with no race-free side in this history.
    Fix("49175104c", "surfel_render_tile: the next tile of surfels overwrites the shared tile being read", (
        # 512 surfels in tiles of 256 (the race needs more than one tile, the issue says), 2 blocks of 16 x 16
        Case("surfel_render_tile", "src/surfel-cuda/main.cu", "surfel_render_tile<float, 256>", "2,1", "16,16",
             "s:float32[3584]=random(-1,1) N:int32=512 f:float32=0.5 w:int32=32 h:int32=16 d:float32[512]!out",
             includes=(), relaxations=(), parts=("src/surfel-cuda",)),), reported="ORNL/HeCBench#253"),
    Fix("49175104c", "vhgw_horiz's twoWayScan: in-place scan steps read and write before one barrier", (
        # a structuring element of 64 (the block's width; over 32 the race is across warps, the issue says), an
        # image of 128 x 2, as erode launches it; `dst` zeroed first as erode does (the kernel writes its interior)
        Case("vhgw_horiz", "src/morphology-cuda/morphology.cu", "vhgw_horiz<MorphOpType::ERODE>", "2,2", "64",
             "dst:uint8[256]=zeros src:uint8[256]=random(0,255) width:int32=128 height:int32=2 selSize:int32=64",
             (256, 256), includes=(), relaxations=(), parts=("src/morphology-cuda",)),),
        reported="ORNL/HeCBench#255"),
    Fix("49175104c", "sosfilt: a section reads s_out[tx - 1] while section tx - 1 writes it", (
        # 2 signals of 128 samples through 64 sections (blocks of 64, as filtering launches them), filtered in
        # place; the shared bytes are filtering's (out, zi and sos)
        Case("sosfilt", "src/sosfil-cuda/main.cu", "sosfilt<float>", "2", "64",
             "n_signals:int32=2 n_samples:int32=128 n_sections:int32=64 zi_width:int32=2 sos:float32[384]=random(-1,1) "
             "zi:float32[256]=random(-1,1) x_in:float32[256]=random(-1,1)", (2816, 2816), includes=(),
             relaxations=(), parts=("src/sosfil-cuda",)),), reported="ORNL/HeCBench#256"),
    Fix("49175104c", "hungarian's warp-synchronous minimum reductions without __syncwarp", (
        # the step-1 row minimum over the program's 2048 x 2048 slack matrix (its __device__ arrays; no
        # parameters), blocks of 256 as the program launches them, 2 of its 256 blocks: the last 32 threads
        # reduce through volatile shared memory with no __syncwarp (issue #263 names this kernel among three)
        Case("calc_min_in_rows", "src/hungarian-cuda/main.cu", "calc_min_in_rows", "2", "256", "", includes=(),
             relaxations=(), parts=("src/hungarian-cuda",)),), reported="ORNL/HeCBench#263"),
    Fix("49175104c", "generatingTriangles: every thread reads the block's offset while one thread stores it", (
        # 2 blocks of 4 x 4 x 8 voxels, as main launches them, at main's isoValue; the lookup tables zeroed, so no
        # cube emits a vertex: the race is in the block's sums, before them. The only reads that race are dead
        # (sumVertices and sumTriangles are not used after them), which the issue says racecheck does not see on a
        # stock build either: the compilers drop them, and the detector sees the compiled accesses (a miss)
        Case("generatingTriangles", "src/marchingCubes-cuda/main.cu", "generatingTriangles", "2", "4,4,8",
             "isoValue:float32=-0.9 blockIndicesLv2:uint32[2]=values(0,1) distinctEdgesTable:uint16[256]=zeros "
             "triTable:int32[4096]=zeros edgeIDTable:uint8[48]=zeros countedVerticesNum:uint32[1]=zeros "
             "countedTrianglesNum:uint32[1]=zeros triangles:uint64[1]=zeros coordX:float32[1]=zeros "
             "coordY:float32[1]=zeros coordZ:float32[1]=zeros coordZP:float32[1]=zeros", includes=(),
             relaxations=(), parts=("src/marchingCubes-cuda",)),), reported="ORNL/HeCBench#254"),
    Fix("49175104c", "FWrem_64: the diagonal tile's stores into s_kj while other warps still read it", (
        # a 192-vertex matrix (3 tiles of 64 a side), the step x = 0: 4 blocks of 1024 threads, as FW_gpu_64
        # launches them; the diagonal tile of the next step (block 0) rewrites s_kj after the loop that reads it,
        # with no barrier between (the lines 382/408 and 383/409). Its build reads mis-cuda's graph.h.
        Case("FWrem_64", "src/floydwarshall2-cuda/main.cu", "FWrem_64", "4", "1024",
             "AdjMat:int32[36864]=random(0,1000) upper:int32=192 krows:int32[36864]=random(0,1000) "
             "kcols:int32[36864]=random(0,1000) x:int32=0 subm1:int32=2", includes=("src/mis-cuda",),
             relaxations=(), parts=("src/floydwarshall2-cuda", "src/mis-cuda")),), reported="ORNL/HeCBench#261"),
    Fix("49175104c", "SSSP_gpu: thread 0 fetches the next frontier base while others still read the last", (
        # a frontier of 512 vertices of out-degree 4 (each Node {first edge, degree}, each Edge {target, weight}
        # given as its ints), 2 blocks of 256 as main's defaults give; every vertex white, the shade GRAY0 (main's
        # constants). Thread 0 stores the shared base for the next round while other threads still read it (the
        # issue's lines 205/261), the local queue's tail is read while others add to it, and `cost` is read plainly
        # while others atomicMax it. The folder's input archive is left out (not a source)
        Case("SSSP_gpu", "src/sssp-cuda/main.cu", "SSSP_gpu", "2", "256",
             "graph_nodes_av:int32[1024]=" + _values(v for i in range(512) for v in (4 * i, 4))
             + " graph_edges_av:int32[4096]=random(0,512) cost:int32[512]=zeros color:int32[512]=16677217 "
             "q1:int32[512]=" + _values(range(512)) + " q2:int32[4096]=zeros n_t:int32[1]=512 head:int32[1]=zeros "
             "tail:int32[1]=zeros overflow:int32[1]=zeros gray_shade:int32[1]=16677219 iter:int32[1]=zeros",
             includes=(), relaxations=(),
             parts=("src/sssp-cuda/main.cu", "src/sssp-cuda/kernel.h", "src/sssp-cuda/support")),),
        reported="ORNL/HeCBench#264"),
)

# Kaldi's cudamatrix: one block of CU1DBLOCK (256) threads per row, as its launchers give (4 rows of 512), built as
# its makefiles build it (HAVE_CUDA=1, single precision).
_KALDI_ROWS = "{rows=4,cols=512,stride=512}"
_KALDI_BUILD = dict(includes=("src",), defines=("HAVE_CUDA=1", "KALDI_DOUBLEPRECISION=0"), relaxations=())


def _kaldi(kernel: str, args: str) -> Case:
    return Case(kernel, "src/cudamatrix/cu-kernels.cu", f"{kernel}<float>", "4", "256", args, **_KALDI_BUILD)


KALDI_FIXES = (
    # Each block reduced its row to one warp's worth with barriers, then the last 32 threads went on alone
    # ("Threads implicitly synchronized within a warp"), through a shared array that is not volatile, with no
    # __syncwarp; the fix reduces with cub::BlockReduce (CUB 2's cub::Max, which qconform gives back on CUB 3).
    Fix("bcfe3f8c5", "[src] Change warp-synchronous to cub::BlockReduce (safer but slower) (#3080)", (
        _kaldi("_softmax_reduce", "y:float32[2048]!out x:float32[2048]=random(-4,4) "
               f"d:struct={_KALDI_ROWS} src_stride:int32=512"),
        _kaldi("_log_softmax_reduce", "y:float32[2048]!out x:float32[2048]=random(-4,4) "
               f"y_dim:struct={_KALDI_ROWS} x_stride:int32=512"),
        _kaldi("_diff_softmax", f"x:float32[2048]!out dim:struct={_KALDI_ROWS} value:float32[2048]=random(0,1) "
               "value_stride:int32=512 diff:float32[2048]=random(-1,1) diff_stride:int32=512"),
        _kaldi("_diff_log_softmax", f"in_deriv_dim:struct={_KALDI_ROWS} out_value:float32[2048]=random(-4,0) "
               "out_value_stride:int32=512 out_deriv:float32[2048]=random(-1,1) out_deriv_stride:int32=512 "
               "in_deriv:float32[2048]!out"),)),
    # The same commit's _normalize_per_row was its own new race: CUB's sum is defined in thread 0 only, every
    # thread stored its own square root at ssum[tid], and all read ssum[0] with no barrier after thread 0's store.
    # Ten days later: "fixing a synchronization bug in 'normalize-per-row' ... was only apparent using large matrices".
    Fix("73720e639", "[src] cudamatrix: fixing a synchronization bug in 'normalize-per-row' (#3145)", (
        _kaldi("_normalize_per_row", "y:float32[2048]!out y_stride:int32=512 x:float32[2048]=random(-2,2) "
               f"x_d:struct={_KALDI_ROWS} target_rms:float32=1 add_log_stddev:bool=0"),)),
)

# arrayfire's CUDA backend (2016): a tensor is a `Param<T>` (its data pointer, dims and strides) passed by value, each
# pointer an array of its own. The build's generated af/version.h and the old Thrust internals its debug header names
# for host code are found empty.
_AF_TENSOR = "{{ptr=@{dtype}[{n}]={fill},dims=values({d0},1,1,1),strides=values(1,{d0},{d0},{d0})}}"
_AF_BUILD = dict(includes=("src/backend/cuda", "src/backend", "src/api/c", "include"), relaxations=(),
                 empty_headers=("af/version.h", "thrust/version.h", "thrust/system/cuda/detail/par.h"))

ARRAYFIRE_FIXES = (
    # A sum of 4096 floats in 2 blocks of 256 threads (8 steps each), as reduce_first_launcher launches it. Each block
    # ends in a warp-synchronous reduction through volatile shared memory (`warp_reduce`), with no __syncwarp: lanes
    # of one warp race. A contributor's fix (d88e6a354, #633) put a __syncthreads() inside `if (tidx < n)`, which
    # the maintainer called dangerous (a BarrierDivergence here: the other threads exit while 16 wait); the next day
    # he made every step a barrier the whole block meets. Its build reads Boost's scoped_ptr for host code.
    Fix("0d0d7d128", "Remove the need for volatile memory by always using __syncthreads();", (
        Case("reduce_first_kernel", "src/backend/cuda/kernel/reduce.hpp",
             "reduce_first_kernel<float, float, af_add_t, 256>", "2,1", "256,1",
             "out:struct=" + _AF_TENSOR.format(dtype="float32", n=2, fill="zeros", d0=2)
             + " in:struct=" + _AF_TENSOR.format(dtype="float32", n=4096, fill="random(-1,1)", d0=4096)
             + " blocks_x:uint32=2 blocks_y:uint32=1 repeat:uint32=8", **_AF_BUILD),),
        racy_at="d88e6a354^"),
    Fix("a7a297ba8", "BUGFIX: Add missing syncthreads to scan_by_key", (
        # an inclusive sum scan by key of 16384 floats, as scan_first_by_key launches it past one block's reach
        # (256 threads, 32 repeats): 2 blocks of 256 threads, 32 steps each, then the blocks' totals in tmp, tflg
        # and tlid. Thread 0 reads the carried flag s_ftmp to find a segment's boundary while the block's last
        # thread stores the next one, with no barrier between (the fix adds it). The same commit's
        # scan_dim_nonfinal_kernel is not here: its `sfptr[(start - off) * THREADS_X]` makes an unsigned index
        # that wraps to 4 GiB past the shared array, which a GPU's 32-bit shared addresses wrap back and emu stops
        # at (a KernelCrash on both sides).
        Case("scan_nonfinal_kernel", "src/backend/cuda/kernel/scan_first_by_key_impl.hpp",
             "scan_nonfinal_kernel<float, int, float, af_add_t, 256, true>", "2,1", "256,1",
             "out:struct=" + _AF_TENSOR.format(dtype="float32", n=16384, fill="zeros", d0=16384)
             + " tmp:struct=" + _AF_TENSOR.format(dtype="float32", n=2, fill="zeros", d0=2)
             + " tflg:struct=" + _AF_TENSOR.format(dtype="int8", n=2, fill="zeros", d0=2)
             + " tlid:struct=" + _AF_TENSOR.format(dtype="int32", n=2, fill="zeros", d0=2)
             + " in:struct=" + _AF_TENSOR.format(dtype="float32", n=16384, fill="random(-1,1)", d0=16384)
             + " key:struct=" + _AF_TENSOR.format(dtype="int32", n=16384, fill="random(0,4)", d0=16384)
             + " blocks_x:uint32=2 blocks_y:uint32=1 lim:uint32=32", **_AF_BUILD),)),
)


# cuFHE (2018): TFHE's bootstrapping on the GPU, one block of 512 threads per gate, its number-theoretic transforms
# in place in shared memory, their modular arithmetic in inline PTX with carries. Built as its Makefile builds it
# (`-I.` for `#include <include/...>`). Arrays of its FFP class (a uint64 modulo 2^64 - 2^32 + 1) are given as bytes.
_CUFHE_NTT = ",".join(f"{t}=@uint8[8192]=random(0,255)" for t in ("twd_", "twd_inv_", "twd_sqrt_", "twd_sqrt_inv_"))

CUFHE_FIXES = (
    Fix("7617fce", "Add a __syncthreads() call to prevent a race condition in NTT/NTTInv", (
        # one bootstrapping of an LWE sample of n = 500 (its 500 accumulations, each 4 NTTs and 2 inverse NTTs of
        # 1024 points), as Bootstrap launches it: each 128-thread NTT writes its input into the shared buffer that
        # other threads still read from the step before, with no barrier between (the fix adds one at each
        # transform's start, and the barriers its idle threads meet in branches of their own: --barrier-sites any)
        Case("__Bootstrap__", "cufhe/lib/bootstrap_gpu.cu", "__Bootstrap__", "1", "512",
             "out:int32[501]!out in:int32[501]=random(-2147483648,2147483647) mu:int32=536870912 "
             "bk:uint8[32768000]=random(0,255) ksk:int32[16777216]=random(-2147483648,2147483647) "
             f"ntt:struct={{{_CUFHE_NTT}}}", includes=("cufhe",), barrier_sites="any", relaxations=()),),
        kept="NTT1024 writes its output over the shared buffer that other warps still read in the transform's last "
             "step (ntt_1024_device.cuh:78 against the FFP store of line 153), with no barrier between; "
             "cuFHE's newest tree has it too"),
)


# OpenMM (github.com/openmm/openmm, molecular dynamics): its CUDA platform compiles each module at run time, from
# the defines and typedefs CudaContext::createModule writes (here those of a Volta or later device in single
# precision), the platform's common.cu where the tree has one, vectorOps.cu, and the kernel file, whose own
# placeholders (the sort's DATA_TYPE, KEY_TYPE...) are given as -D. The sort's are those of OpenMM's own test of it
# (TestCudaSort.cpp: floats keyed by their value).
_OPENMM_DEFINES = ("#define SYNC_WARPS __syncwarp();\n"
                   "#define SHFL(var, srcLane) __shfl_sync(0xffffffff, var, srcLane);\n"
                   "#define BALLOT(var) __ballot_sync(0xffffffff, var);\n"
                   + "".join(f"#define make_{k}{n} make_float{n}\n" for k in ("real", "mixed") for n in (2, 3, 4)))
_OPENMM_MATH = "".join(f"#define {m} {f}\n" for m, f in (
    ("SQRT", "sqrtf"), ("RSQRT", "rsqrtf"), ("RECIP", "1.0f/"), ("EXP", "expf"), ("LOG", "logf"), ("POW", "powf"),
    ("COS", "cosf"), ("SIN", "sinf"), ("TAN", "tanf"), ("ACOS", "acosf"), ("ASIN", "asinf"), ("ATAN", "atanf"),
    ("ERF", "erff"), ("ERFC", "erfcf"), ("FMA", "fmaf"), ("FABS", "fabsf")))
_OPENMM_TYPEDEFS = ("".join(f"typedef float{n} {k}{n};\n" if n else f"typedef float {k};\n"
                            for k in ("real", "mixed") for n in ("", 2, 3, 4)) + "typedef unsigned int tileflags;\n")
OPENMM_CUDA = "platforms/cuda/src/kernels"
OPENMM_COMMON = "platforms/common/src/kernels"
_OPENMM_SORT = ("DATA_TYPE=float", "KEY_TYPE=float", "SORT_KEY=value", "MIN_KEY=-3.40282e+38f", "MAX_KEY=3.40282e+38f",
                "MAX_VALUE=3.40282e+38f")
# the first RMSD kernel: 100 particles of 4 floats (x, y, z, charge) and their reference positions, in one block
_RMSD_ARGS = ("numParticles:int32=100 posq:float32[400]=random(-2,2) referencePos:float32[400]=random(-2,2) "
              "particles:int32[100]=iota buffer:float32[13]!out")


def _openmm(name: str, source: str, kernel: str, grid: str, block: str, args: str, shared: int = 0,
            defines: tuple = (), vector_ops: bool = True, common: bool = False) -> Case:
    """One OpenMM kernel as its CUDA platform compiles and launches it: `vector_ops` where its module starts with
    vectorOps.cu (not the sort's); `common`: a kernel of the common compute framework (2020 on), whose module
    starts with the platform's common.cu and the math defines."""
    module = ((f"{OPENMM_CUDA}/common.cu",) if common else ()) + ((f"{OPENMM_CUDA}/vectorOps.cu",) if vector_ops else ())
    return Case(name, source, kernel, grid, block, args, (shared, shared), includes=(), defines=defines,
                relaxations=(), parts=(OPENMM_CUDA, OPENMM_COMMON) if common else (OPENMM_CUDA,), module=module,
                prelude=_OPENMM_DEFINES + (_OPENMM_MATH if common else "") + _OPENMM_TYPEDEFS)


OPENMM_FIXES = (
    Fix("65caf22b", "Fixes a race-condition in compute Range", (
        # a list of 10000 floats (past the short-list sort) in one block of 1024: every thread reads the minimum
        # from rangeBuffer[0] while thread 0 already stores its maximum there for the second reduction
        _openmm("computeRange", f"{OPENMM_CUDA}/sort.cu", "computeRange", "1", "1024",
                "data:float32[10000]=random(-1,1) length:uint32=10000 range:float32[2]!out", 4096, _OPENMM_SORT,
                vector_ops=False),)),
    Fix("9abaa587", "Fixed race condition in sorting", (
        # 140000 floats give 1093 buckets of 128, summed by one block of 1024 in two passes: the second pass loads
        # its bucket sizes into posBuffer while threads of the first still read posBuffer[1023] for the offset.
        # (The fix's other barrier, at the end of sortBuckets' in-block sort, orders no conflicting accesses: each
        # thread reads back only its own slot before the next bucket; measured clean at the parent too.)
        _openmm("computeBucketPositions", f"{OPENMM_CUDA}/sort.cu", "computeBucketPositions", "1", "1024",
                "numBuckets:uint32=1093 bucketOffset:uint32[1093]=random(0,256)", 4096, _OPENMM_SORT,
                vector_ops=False),)),
    Fix("de666e30", "Fixed race condition", (
        # reduceValue is called 13 times in a row over one shared buffer: each call's first store into temp races
        # with the last call's read of temp[0] (256 threads, as executeImpl launches it)
        _openmm("computeRMSDPart1", f"{OPENMM_CUDA}/rmsd.cu", "computeRMSDPart1", "1", "256", _RMSD_ARGS, 1024),),
        kept="reduceValue's first loop sums within each warp behind __syncwarp alone, and its second loop's first "
             "step reads temp[32] from warp 0 while warp 1 still writes it (rmsd.cu:14 against line 19): OpenMM "
             "fixed it in 2026 (b4e4b330, below)"),
    Fix("b4e4b330", "Fixed a GPU thread synchronization bug (#5346)", (
        # the common framework's reduceValue: the step across warps reads what another warp's last __syncwarp-only
        # step wrote, with no barrier between (one block of THREAD_BLOCK_SIZE 256, as each launcher gives it)
        _openmm("computeRMSDPart1", f"{OPENMM_COMMON}/rmsd.cc", "computeRMSDPart1", "1", "256", _RMSD_ARGS,
                defines=("THREAD_BLOCK_SIZE=256",), common=True),
        # the radius of gyration's first step: 600 particles in 3 blocks (execute(numParticles, 256))
        _openmm("computeCenterPosition", f"{OPENMM_COMMON}/rg.cc", "computeCenterPosition", "3", "256",
                "numParticles:int32=600 posq:float32[2400]=random(-2,2) particles:int32[600]=iota "
                "centerBuffer:float32[9]!out", defines=("THREAD_BLOCK_SIZE=256", "PADDED_NUM_ATOMS=640"),
                common=True),
        # the orientation restraint's correlation matrix (9 sums) in one block
        _openmm("computeCorrelationMatrix", f"{OPENMM_COMMON}/orientationRestraintForce.cc",
                "computeCorrelationMatrix", "1", "256", _RMSD_ARGS.replace("[13]", "[9]"),
                defines=("THREAD_BLOCK_SIZE=256",), common=True),)),
)


# Megatron-LM (github.com/NVIDIA/Megatron-LM): its fused layer norm, a PyTorch extension copied from apex. Its device
# code takes two things from PyTorch's headers: at::Half (c10::Half, an IEEE half with float conversions, laid out as
# CUDA's __half, which stands for it) and WARP_SHFL / WARP_SHFL_XOR (ATen/cuda/DeviceUtils.cuh: __shfl_sync and
# __shfl_xor_sync over the whole warp); the rest of what it includes from ATen serves its host launchers.
_MEGATRON_ATEN = (
    ("ATen/ATen.h", "#pragma once\n#include <cuda_fp16.h>\nnamespace at { using Half = __half; }\n"),
    ("ATen/AccumulateType.h", "#pragma once\n"),
    ("ATen/cuda/CUDAContext.h", "#pragma once\n"),
    ("ATen/cuda/DeviceUtils.cuh",
     "#pragma once\n"
     "template <typename T> __device__ __forceinline__ T WARP_SHFL(T value, int srcLane, int width = warpSize,\n"
     "    unsigned int mask = 0xffffffff) { return __shfl_sync(mask, value, srcLane, width); }\n"
     "template <typename T> __device__ __forceinline__ T WARP_SHFL_XOR(T value, int laneMask, int width = warpSize,\n"
     "    unsigned int mask = 0xffffffff) { return __shfl_xor_sync(mask, value, laneMask, width); }\n"))
MEGATRON_KERNELS = "megatron/fused_kernels"
# 65536 rows of 32 floats: the fewest rows for which the launchers' grid (1, min(n1, maxGridSize[1] = 65535)) gives
# a block two rows, the first at blockIdx.y and the next 65535 rows on; blocks of 32 x 4 as they launch them
_LAYER_NORM_ROWS = "n1:int32=65536 n2:int32=32"


def _megatron(name: str, kernel: str, args: str, shared: int) -> Case:
    return Case(name, f"{MEGATRON_KERNELS}/layer_norm_cuda_kernel.cu", kernel, "1,65535", "32,4", args,
                (shared, shared), includes=(MEGATRON_KERNELS,), relaxations=(), headers=_MEGATRON_ATEN)


MEGATRON_FIXES = (
    Fix("1ec6b0e9", "fix race in `cuApplyLayerNorm` (merge request !336)", (
        # block 0's second row: its warps store their Welford partials into the shared buffer while warp 0 still
        # reads the first row's mean and variance from its first two floats
        _megatron("cuApplyLayerNorm", "cuApplyLayerNorm<float, float, float>",
                  "output_vals:float32[2097152]!out mean:float32[65536]!out invvar:float32[65536]!out "
                  f"vals:float32[2097152]=random(-1,1) {_LAYER_NORM_ROWS} epsilon:float32=1e-5 gamma:null beta:null",
                  24),)),
    Fix("5478d67e", "fix potential race in `cuComputeGradInput` (merge request !340)", (
        # block 0's second row: the shared buffer of the row's two sums is written again while other warps still
        # read the first row's
        _megatron("cuComputeGradInput", "cuComputeGradInput<float, float, float>",
                  f"dout:float32[2097152]=random(-1,1) input:float32[2097152]=random(-1,1) {_LAYER_NORM_ROWS} "
                  "mean:float32[65536]=random(-0.1,0.1) invvar:float32[65536]=random(0.5,2) epsilon:float32=1e-5 "
                  "gamma:float32[32]=random(0.5,1.5) grad_input:float32[2097152]!out", 512),)),
)


# mshadow (github.com/dmlc/mshadow, MXNet's tensor library, header-only): its kernels take expression plans by value,
# `Plan<Tensor<gpu, 2, float>, float>`, a partial specialization holding a pointer and a stride. Built as its own test
# program (test/test.cu, `-I..`), without a CPU BLAS (MKL is the default; the GPU kernels use none); Thrust serves
# only its host sort, and is found empty.
_MSHADOW_PLAN = "mshadow::expr::Plan<mshadow::Tensor<mshadow::gpu, 2, float>, float>"

MSHADOW_FIXES = (
    Fix("83a3b45", "Adding __syncwarp() from CUDA 9 to unsafe warp-synchronous code (#263)", (
        # the test's Softmax of a 2 x 4 tensor: a block of 256 per row, whose maximum and sum end in ReduceX's
        # warp-synchronous steps through volatile shared memory, with no __syncwarp before the fix (a lane reads
        # what another lane of warp 0 stores in the same step)
        Case("SoftmaxKernel", "test/test.cu", f"SoftmaxKernel<8, float, {_MSHADOW_PLAN}, {_MSHADOW_PLAN}>", "2", "256",
             "dst:struct={dptr_=@float32[8]=zeros,stride_=4} src:struct={dptr_=@float32[8]=random(-1,1),stride_=4} "
             "xmax:uint32=4", includes=(".",), defines=("MSHADOW_USE_MKL=0", "MSHADOW_USE_CBLAS=0"), relaxations=(),
             empty_headers=("thrust/device_ptr.h", "thrust/sort.h", "thrust/system/cuda/execution_policy.h")),)),
)


# flashinfer (github.com/flashinfer-ai/flashinfer: LLM serving kernels, header-only): its sampling and top-k kernels,
# built from the header that defines them (sampling.cuh, which includes topk.cuh) with its JIT's
# `--expt-relaxed-constexpr`; cuRAND's host header serves host code only, and is found empty.
_FLASHINFER = dict(includes=("include",), relaxations=("expt-relaxed-constexpr",), empty_headers=("curand.h",))

FLASHINFER_FIXES = (
    Fix("78d0a06b7", "fix(sampling): fix shared-memory race and out-of-range token id in SamplingFromLogitsKernel "
                     "(#3624)", (
        # Gumbel-max sampling of 2 rows of a vocabulary of 8192 floats, 1024 threads of 4 items per row, as
        # SamplingFromLogits launches them on an sm80+ device (its dynamic shared bytes: sizeof the BlockReduce's
        # TempStorage, 296 with CUDA 13's CUB): the 2 tiles' BlockReduce reuse one storage with no barrier between
        Case("SamplingFromLogitsKernel", "include/flashinfer/sampling.cuh",
             "SamplingFromLogitsKernel<1024, cub::BLOCK_SCAN_WARP_SCANS, cub::BLOCK_REDUCE_WARP_REDUCTIONS, 4, false, "
             "float, int>", "2", "1024",
             "logits:float32[16384]=random(-4,4) output:int32[2]!out indices:null d:uint32=8192 seed_arr:null "
             "seed_val:uint64=42 offset_arr:null offset_val:uint64=0", (296, 296), **_FLASHINFER),)),
    Fix("0b29eed26", "Fix smem race in `FilteredTopK` overflow refinement (#3529)", (
        # the top 100 of one row of 32768 equal floats, deterministic (the pull request's tie-heavy input): every
        # score is a candidate, more than the 16384 the shared buffer holds, so the overflow fallback refines byte
        # by byte, and each round clears s_histogram while other warps still read the round before's (1024
        # threads, its 128 KiB of dynamic shared memory, as LaunchFilteredTopKUnified launches it)
        Case("FilteredTopKUnifiedKernel", "include/flashinfer/sampling.cuh",
             "FilteredTopKUnifiedKernel<float, int, 4, true, flashinfer::sampling::FilteredTopKMode::Plain, "
             "flashinfer::sampling::TopKTieBreak::None>", "1", "1024",
             "input:float32[32768]=0.5 output:int32[100]!out aux_output:float32[100]!out aux_input:null "
             "aux_stride:int64=0 row_to_batch:null lengths:null row_starts:null num_rows:uint32=1 top_k:uint32=100 "
             "max_len:uint32=32768", (131072, 131072), **_FLASHINFER),)),
    Fix("6dff34d1b", "perf&bugfix: skip kv-tile computation out of sliding window in FA2; fix __syncthreads in "
                     "mergestate (#1661)", (
        # the persistent merge of attention states (split-KV decode's last step) and their sum: 4 positions of one
        # head of 128 halves, 3 partial states each, on 2 blocks of 16 x 8 threads (VariableLengthMergeStates's
        # geometry for a head of 128 halves; its dynamic shared bytes: 4 stages of 8 rows, and 128 floats), so
        # each block merges 2 positions: the second position's loads into shared memory (the S values, the
        # cp.async of V) overwrite what other warps still read in the first's threadblock_sync_state, with no
        # barrier between (the fix puts one at the top of the loop)
        Case("PersistentVariableLengthMergeStatesKernel", "include/flashinfer/attention/cascade.cuh",
             "PersistentVariableLengthMergeStatesKernel<8, 16, 8, 4, half, half, int>", "2", "16,8",
             "V:float16[1536]=random(-1,1) S:float32[12]=random(-2,2) indptr:int32[5]=values(0,3,6,9,12) "
             "v_merged:float16[512]!out s_merged:float32[4]!out max_seq_len:uint32=4 seq_len_ptr:null "
             "num_heads:uint32=1", (8704, 8704), **_FLASHINFER),
        Case("PersistentVariableLengthAttentionSumKernel", "include/flashinfer/attention/cascade.cuh",
             "PersistentVariableLengthAttentionSumKernel<8, 16, 8, 4, half, half, int>", "2", "16,8",
             "V:float16[1536]=random(-1,1) indptr:int32[5]=values(0,3,6,9,12) v_sum:float16[512]!out "
             "max_seq_len:uint32=4 seq_len_ptr:null num_heads:uint32=1", (8192, 8192), **_FLASHINFER)),
        kept="every row of the block stores the same merged vector (cascade.cuh:459 and :548 at the fix), and every "
             "thread of a row the same log-sum-exp (:125 into shared memory, :461 into s_merged): same-value "
             "stores, unordered; flashinfer's newest tree has them too"),
)


# bitsandbytes (github.com/bitsandbytes-foundation/bitsandbytes: 8-bit and 4-bit quantization): its kernels.cu as its
# CMake build compiles it, with its csrc folder; ops.cuh's context classes name cuBLASLt's and cuSPARSE's handles, whose
# stand-ins declare them (the toolkit here has neither library), and Thrust serves host code only, found empty.
_BITSANDBYTES_HEADERS = (
    ("cublasLt.h", "#pragma once\n#include <cublas_v2.h>\ntypedef struct cublasLtContext* cublasLtHandle_t;\n"
                   "cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle);\n"),
    ("cusparse.h", "#pragma once\ntypedef struct cusparseContext* cusparseHandle_t;\n"
                   "typedef enum { CUSPARSE_STATUS_SUCCESS = 0 } cusparseStatus_t;\n"
                   "cusparseStatus_t cusparseCreate(cusparseHandle_t* handle);\n"
                   "const char* cusparseGetErrorString(cusparseStatus_t status);\n"))

BITSANDBYTES_FIXES = (
    Fix("5b28fd3f", "Fix race condition in kEstimateQuantiles (#1061)", (
        # the 256 quantiles of 4096 floats in one block of 512, as estimateQuantiles launches it (`code` zeroed
        # first): the block's slots are set to -1 by every thread and then 256 threads store their quantile's
        # index into some of them, with no barrier between (the fix adds one)
        Case("kEstimateQuantiles", "csrc/kernels.cu", "kEstimateQuantiles<float>", "1", "512",
             "A:float32[4096]=random(-1,1) code:float32[256]=zeros offset:float32=0.001 "
             "max_val:float32=3.4028235e38 n:int32=4096", includes=("csrc",), relaxations=(),
             headers=_BITSANDBYTES_HEADERS,
             empty_headers=("thrust/host_vector.h", "thrust/device_vector.h")),)),
)


# ik_llama.cpp (github.com/ikawrakow/ik_llama.cpp: a fork of llama.cpp with its own CUDA kernels): its ggml-cuda files
# as its CMake build compiles them, with the two values the build defines for every CUDA file (GGML_CUDA_FUSION and
# GGML_CUDA_MIN_BATCH_OFFLOAD, their defaults) and ggml's `-extended-lambda`.
_IK_CUDA = "ggml/src/ggml-cuda"
_IK = dict(includes=(_IK_CUDA, "ggml/src", "ggml/include"),
           defines=("GGML_CUDA_FUSION=1", "GGML_CUDA_MIN_BATCH_OFFLOAD=32"))

IK_LLAMA_FIXES = (
    Fix("8337e4cd3", "the newest commit read here (August 2026)", (
        # ik_llama.cpp's copy of ggml's mm_ids_helper, as llama.cpp's issue reproduces it (8 experts, 2 used per token,
        # 32 tokens): the compact records are stored by some lanes and read by others after a warp reduction alone; a
        # race under --warp-order syncwarp, ordered under the collectives rule (the pull request adds a __syncwarp)
        Case("mmq_ids_helper", f"{_IK_CUDA}/mmq_id.cu", "mmq_ids_helper<2>", "8", "32",
             "ids:int32[64]=distinct(0,8,2) ids_src1:int32[64]!out ids_dst:int32[64]!out expert_bounds:int32[9]!out "
             "n_tokens:int32=32 n_expert_used_var:int32=2 nchannels_y:int32=1 si1:int32=2 sis1:int32=1", (128, 128),
             **_IK),),
        reported="ikawrakow/ik_llama.cpp#2502 (September 2026, open: compute-sanitizer's racecheck reports the store "
                 "at mmq_id.cu:94 and the read at :104, with a warp reduction alone between)"),
    Fix("fbcc743c7", "Fix race in indexer topk on CUDA (#2148)", (
        # the sparse-attention indexer's mask (DeepSeek-style DSA): 4 rows of 64 keys, each a block of 256 as
        # ggml_cuda_op_indexer_mask launches it, whose top 8 keys are unmasked: each row is filled with -inf, the
        # top-k slots set to 0, then the base mask added, three passes over one row of global memory by the same
        # threads with no barrier between (the fix adds two); issue #2139 reported it
        Case("k_indexer_mask", f"{_IK_CUDA}/indexer_topk.cu", "k_indexer_mask<float>", "4", "256",
             "ne0:int32=64 ne1:int32=4 ne2:int32=1 ntopk:int32=8 ne11:int32=4 nb01:uint64=256 nb02:uint64=1024 "
             "nb03:uint64=1024 nb11:uint64=32 nb12:uint64=128 nb13:uint64=128 nb1:uint64=256 nb2:uint64=1024 "
             "nb3:uint64=1024 mask:float32[256]=random(-1,0) idx:int32[32]=distinct(0,64,8) dst:float32[256]!out",
             **_IK),)),
    Fix("52efa12fd", "fix: add missing __syncthreads in delta net CUDA kernel (#1649)", (
        # Qwen3-Next's gated delta net, one head of 128 over 4 tokens (decode's short path: 256 threads), 4 blocks
        # of one warp's rows each, as delta_net_f32_cuda launches them with its 2 x 128 floats of shared memory: each
        # token's q and k are loaded into shared memory while other warps still read the last token's k in the
        # state update
        Case("delta_net_recurrent_f32", f"{_IK_CUDA}/delta-net.cu", "delta_net_recurrent_f32<128, 256>", "4", "256",
             "q:float32[512]=random(-1,1) k:float32[512]=random(-1,1) v:float32[512]=random(-1,1) "
             "g:float32[4]=random(-1,0) beta_in:float32[4]=random(-2,2) state_in:float32[16384]=random(-1,1) "
             "dst:float32[16896]!out n_heads:int64=1 gqa_ratio:int64=1 repeat_type:int32=0 n_tokens:int64=4 "
             "n_seqs:int64=1 output_offset:int64=512 vnb1:uint64=128 vnb2:uint64=512 vnb3:uint64=512",
             (1024, 1024), **_IK),)),
)


# Arbor (github.com/arbor-sim/arbor: a neural network simulator, then namespace nest::mc): the interleaved storage of
# its Hines matrices on the GPU, header-only kernels in src/backends/gpu/kernels, as matrix_state_interleaved launches
# them for its fvm backend (value_type double, size_type cell_lid_type, uint32): blocks of 32 matrices, 32 threads
# per matrix, so 1024 threads; 32 matrices of 64 compartments (padded size 64), so each loop makes 2 passes over its
# shared buffer, and the second pass's stores meet the first's reads in other warps, with no barrier between.
_ARBOR_SIZES = f"sizes:uint32[32]={_values([64] * 32)} starts:uint32[32]={_values(range(0, 2048, 64))}"
_ARBOR = dict(includes=(), relaxations=())
_ARBOR_KERNELS = "src/backends/gpu/kernels"

ARBOR_FIXES = (
    Fix("bd1e56a56", "Add required thread synchronization to matrix kernel. (#280)", (
        Case("flat_to_interleaved", f"{_ARBOR_KERNELS}/interleave.hpp",
             "nest::mc::gpu::flat_to_interleaved<double, unsigned int, 32, 32, 1024>", "1", "1024",
             f"in:float64[2048]=random(-1,1) out:float64[2048]!out {_ARBOR_SIZES} padded_size:uint32=64 "
             "num_vec:uint32=32", **_ARBOR),
        Case("interleaved_to_flat", f"{_ARBOR_KERNELS}/interleave.hpp",
             "nest::mc::gpu::interleaved_to_flat<double, unsigned int, 32, 32, 1024>", "1", "1024",
             f"in:float64[2048]=random(-1,1) out:float64[2048]!out {_ARBOR_SIZES} padded_size:uint32=64 "
             "num_vec:uint32=32", **_ARBOR),
        Case("assemble_matrix_interleaved", f"{_ARBOR_KERNELS}/assemble_matrix.hpp",
             "nest::mc::gpu::assemble_matrix_interleaved<double, unsigned int, 32, 32, 1024>", "1", "1024",
             "d:float64[2048]!out rhs:float64[2048]!out invariant_d:float64[2048]=random(0,1) "
             "voltage:float64[2048]=random(-70,-50) current:float64[2048]=random(-1,1) "
             f"cv_capacitance:float64[2048]=random(0,1) {_ARBOR_SIZES} dt:float64=0.025 padded_size:uint32=64 "
             "num_mtx:uint32=32", **_ARBOR),)),
)


# GPUMD (github.com/brucefan1983/GPUMD: molecular dynamics): its block reductions ended in a warp-synchronous
# `warp_reduce` over a volatile shared array, six steps of `s[t] += s[t + k]` by the 32 lanes of warp 0 with nothing
# between them. Its issue #36 ("removing all warp-synchronous code", August 2019: unsafe, and incorrect since Volta)
# led to one commit per file that replaced each with a loop of barriers. Each file as its makefile builds it
# (`-DDEBUG`, the src folder); sizes as its wrappers launch them, small: 1500 atoms over the kernels' 1024-thread
# patches (2 patches), or 2 groups of 600 and 424 atoms in a permutation of 1024.
_GPUMD = dict(includes=("src",), defines=("DEBUG",), relaxations=())
_GPUMD_VELOCITIES = "g_vx:float64[1500]=random(-1,1) g_vy:float64[1500]=random(-1,1) g_vz:float64[1500]=random(-1,1)"
_GPUMD_GROUPS = ("g_group_size:int32[2]=values(600,424) g_group_size_sum:int32[2]=values(0,600) "
                 "g_group_contents:int32[1024]=distinct(0,1024,1024)")
_GPUMD_GROUP_ATOMS = ("g_mass:float64[1024]=random(1,2) g_vx:float64[1024]=random(-1,1) "
                      "g_vy:float64[1024]=random(-1,1) g_vz:float64[1024]=random(-1,1)")

GPUMD_FIXES = (
    Fix("714fe1db", "start to remove the warp_reduce() function", (
        # temperature, potential energy and the three pressures, a block each (the overload without a fixed group)
        Case("gpu_find_thermo", "src/ensemble.cu", "gpu_find_thermo", "5", "1024",
             "N:int32=1500 T:float64=300 volume:float64=1000 g_mass:float64[1500]=random(1,2) "
             f"g_potential:float64[1500]=random(-1,1) {_GPUMD_VELOCITIES} g_sx:float64[1500]=random(-1,1) "
             "g_sy:float64[1500]=random(-1,1) g_sz:float64[1500]=random(-1,1) g_thermo:float64[5]!out", **_GPUMD),)),
    Fix("99dcd813", "remove warp_reduce in ensemble.cu", (
        Case("gpu_find_vc_and_ke", "src/ensemble.cu", "gpu_find_vc_and_ke", "2", "512",
             f"{_GPUMD_GROUPS} {_GPUMD_GROUP_ATOMS} g_vcx:float64[2]!out g_vcy:float64[2]!out g_vcz:float64[2]!out "
             "g_ke:float64[2]!out", **_GPUMD),)),
    Fix("45ecaed1", "remove warp_reduce in compute.cu", (
        Case("find_group_sum_1", "src/compute.cu", "find_group_sum_1", "2", "256",
             f"{_GPUMD_GROUPS} g_in:float64[1024]=random(-1,1) g_out:float64[2]!out", **_GPUMD),
        Case("find_group_sum_3", "src/compute.cu", "find_group_sum_3", "2", "256",
             f"{_GPUMD_GROUPS} g_fx:float64[1024]=random(-1,1) g_fy:float64[1024]=random(-1,1) "
             "g_fz:float64[1024]=random(-1,1) g_out:float64[6]!out", **_GPUMD))),
    Fix("7addbfb5", "remove warp_reduce in force.cu", (
        Case("gpu_sum_force", "src/force.cu", "gpu_sum_force", "3", "1024",
             "N:int32=1500 g_fx:float64[1500]=random(-1,1) g_fy:float64[1500]=random(-1,1) "
             "g_fz:float64[1500]=random(-1,1) g_f:float64[3]!out", **_GPUMD),)),
    Fix("67fdd3ce", "remove warp_reduce in validate.cu", (
        Case("sum_potential", "src/validate.cu", "sum_potential", "1", "1024",
             "N:int32=1500 m:int32=0 p:float64[1500]=random(-1,1) p_sum:float64[1]!out", **_GPUMD),)),
    Fix("edacc68a", "remove warp_reduce in neighbor.cu", (
        # atoms that moved more than sqrt(d2), counted per block of 1024, then over the blocks
        Case("check_atom_distance_1", "src/neighbor.cu", "check_atom_distance_1", "2", "1024",
             "N:int32=1500 d2:float64=0.25 x_old:float64[1500]=random(0,1) y_old:float64[1500]=random(0,1) "
             "z_old:float64[1500]=random(0,1) x_new:float64[1500]=random(0,1) y_new:float64[1500]=random(0,1) "
             "z_new:float64[1500]=random(0,1) g_sum:int32[2]!out", **_GPUMD),
        Case("check_atom_distance_2", "src/neighbor.cu", "check_atom_distance_2", "1", "1024",
             "M:int32=2 g_sum_i:int32[2]=random(0,1024) g_sum_o:int32[1]!out", **_GPUMD))),
    Fix("061ae9cd", "remove warp_reduce in sdc.cu and vac.cu", (
        # the velocity autocorrelation of 200 atoms over 3 + 2 frames, 2 correlation steps (a block each)
        Case("gpu_find_vac", "src/vac.cu", "gpu_find_vac", "2", "128",
             "N:int32=200 M:int32=3 compute_dos:int32=1 g_mass:float64[200]=random(1,2) "
             "g_vx:float64[1000]=random(-1,1) g_vy:float64[1000]=random(-1,1) g_vz:float64[1000]=random(-1,1) "
             "g_vac_x:float64[2]!out g_vac_y:float64[2]!out g_vac_z:float64[2]!out g_gindex:null "
             "grouping_method:int32=-1", **_GPUMD),)),
    Fix("acfa2191", "remove warp_reduce in hnemd_kappa.cu", (
        Case("gpu_sum_heat", "src/hnemd_kappa.cu", "gpu_sum_heat", "5", "1024",
             "N:int32=1500 step:int32=0 g_heat:float64[7500]=random(-1,1) g_heat_sum:float64[5]!out", **_GPUMD),)),
    Fix("540516e0", "remove warp_reduce in hac.cu", (
        Case("gpu_sum_heat", "src/hac.cu", "gpu_sum_heat", "5", "1024",
             "N:int32=1500 Nd:int32=1 nd:int32=0 g_heat:float64[7500]=random(-1,1) g_heat_all:float64[5]!out",
             **_GPUMD),
        # the heat current autocorrelation: 258 samples, 2 correlation steps, so 256 products in 2 patches of 128
        Case("gpu_find_hac", "src/hac.cu", "gpu_find_hac", "2", "128",
             "Nc:int32=2 Nd:int32=258 g_heat:float64[1290]=random(-1,1) g_hac:float64[10]!out", **_GPUMD))),
    Fix("2f6a4ebd", "remove warp_reduce totally", (
        Case("find_ke", "src/ensemble_lan.cu", "find_ke", "2", "512",
             f"{_GPUMD_GROUPS} {_GPUMD_GROUP_ATOMS} g_ke:float64[2]!out", **_GPUMD),
        # the spectral heat current: 2 pairs of atoms, 130 + 2 frames of their 12 forces and velocities
        Case("gpu_find_k_time", "src/shc.cu", "gpu_find_k_time", "2", "128",
             "Nc:int32=2 Nd:int32=132 M:int32=130 number_of_sections:int32=1 number_of_pairs:int32=2 "
             "g_fv_all:float64[3168]=random(-1,1) g_k_time_i:float64[2]!out g_k_time_o:float64[2]!out",
             **_GPUMD))),
)


@dataclass(frozen=True)
class Project:
    name: str
    parts: tuple                      # what its cases' builds read of a commit
    fixes: tuple


PROJECTS = (Project("ggml", ("src", "include"), GGML_FIXES),
            Project("exllamav2", ("exllamav2/exllamav2_ext",), EXLLAMAV2_FIXES),
            Project("exllama", ("exllama_ext",), EXLLAMA_FIXES),
            Project("llm.c", ("dev/cuda",), LLMC_FIXES),
            Project("HeCBench", (), HECBENCH_FIXES),
            Project("Kaldi", ("src/cudamatrix",), KALDI_FIXES),
            Project("arrayfire", ("src/backend", "src/api/c", "include"), ARRAYFIRE_FIXES),
            Project("cuFHE", ("cufhe",), CUFHE_FIXES),
            Project("OpenMM", (OPENMM_CUDA,), OPENMM_FIXES),
            Project("Megatron-LM", (MEGATRON_KERNELS,), MEGATRON_FIXES),
            Project("mshadow", ("mshadow", "test"), MSHADOW_FIXES),
            Project("flashinfer", ("include",), FLASHINFER_FIXES),
            Project("bitsandbytes", ("csrc",), BITSANDBYTES_FIXES),
            Project("ik_llama.cpp", ("ggml/src", "ggml/include"), IK_LLAMA_FIXES),
            Project("Arbor", (_ARBOR_KERNELS,), ARBOR_FIXES),
            Project("GPUMD", ("src",), GPUMD_FIXES))


class Side(NamedTuple):
    """One case on one side of its fix: the parent's tree (racy) or the fix's (race-free); a reported race's racy
    side is the reported commit's tree."""
    project: Project
    fix: Fix
    case: Case
    racy: bool

    @property
    def rev(self) -> str:
        """The commit its tree is read at: the fix's parent for the racy side of a fix, else the commit itself."""
        if self.racy and not self.fix.reported:
            return self.fix.racy_at or f"{self.fix.commit}^"
        return self.fix.commit

    @property
    def name(self) -> str:
        if self.fix.reported:
            return f"{self.fix.commit} {self.case.name} (reported racy)"
        return f"{self.fix.commit} {self.case.name} ({'before' if self.racy else 'after'} the fix)"


def _git_dir(root: Path) -> "Path | None":
    for d in (root / ".git", root):
        if (d / "HEAD").is_file() and (d / "objects").is_dir():
            return d
    return None


class GitError(RuntimeError):
    """A git command on the suite's clone failed; its message ends with git's own."""


def _git(git_dir: Path, *args: str, binary: bool = False):
    done = subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True)
    if done.returncode:
        raise GitError(f"git {' '.join(args)} failed (exit {done.returncode}): "
                       f"{done.stderr.decode(errors='replace').strip()[-500:]}")
    return done.stdout if binary else done.stdout.decode()


def _has(git_dir: Path, commit: str) -> bool:
    try:
        _git(git_dir, "cat-file", "-e", f"{commit}^{{commit}}")
        return True
    except (GitError, OSError):
        return False


def suite_files(root: Path) -> "list[Side] | None":
    """Every case of the project whose fixes `root`'s history has, on both sides of its fix (a reported race, and a
    fix that keeps a race, on its racy side alone); else None."""
    git_dir = _git_dir(root)
    if git_dir is None:
        return None
    for project in PROJECTS:
        if project.fixes and all(_has(git_dir, fix.commit) for fix in project.fixes):
            return [Side(project, fix, case, racy) for fix in project.fixes for case in fix.cases
                    for racy in ((True,) if fix.reported or fix.kept else (True, False))]
    return None


def label_of(side: Side) -> str:
    return "racy" if side.racy else "race-free"


_TREES: dict = {}


def _tree(git_dir: Path, rev: str, parts: tuple) -> Path:
    """The folders `parts` of `rev`, extracted once into a temporary folder (removed at exit)."""
    full = _git(git_dir, "rev-parse", "--verify", f"{rev}^{{commit}}").strip()
    key = (full, parts)
    if key not in _TREES:
        folder = Path(tempfile.mkdtemp(prefix=f"qconform-race-fix-{full[:8]}-"))
        atexit.register(shutil.rmtree, folder, True)
        data = _git(git_dir, "archive", "--format=tar", full, *parts, binary=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            # the data filter (no links out of the folder, no special files) where this Python has it (3.10.12+)
            tar.extractall(folder, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        _TREES[key] = folder
    return _TREES[key]


def _file_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def module_source(case: Case, tree: Path) -> Path:
    """The file racescan reads for `case` in `tree`: its source, or, for a runtime-compiled module, the text the
    project's compiler would build (prelude, the module's files, the source), written once beside the tree's files."""
    if not (case.module or case.prelude):
        return tree / case.source
    out = tree / "qconform-modules" / (_file_name(f"{case.name}-{Path(case.source).name}") + ".cu")
    if not out.exists():
        parts = [case.prelude] + [(tree / f).read_text() for f in (*case.module, case.source)]
        out.parent.mkdir(exist_ok=True)
        out.write_text("\n".join(parts))
    return out


def stand_in_headers(case: Case, tree: Path) -> Path:
    """The folder of `case`'s stand-in headers (written once beside the tree's files), searched first."""
    folder = tree / "qconform-headers" / _file_name(case.name)
    for name, text in case.headers:
        path = folder / name
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return folder


def command_line(side: Side, tree: Path, seed: int, timeout_s: float, acquire: str, race_check: bool,
                 accesses: str, warp_order: str = "collectives") -> list[str]:
    """`qconform racescan`'s arguments for `side` in `tree`."""
    c = side.case
    argv = ["racescan", str(module_source(c, tree)), "--kernel", c.kernel, "--grid", c.grid, "--block", c.block,
            "--shared", str(c.shared[0 if side.racy else 1]), "--seed", str(seed), "--args", c.args,
            "--timeout", str(timeout_s), "--acquire", acquire, "--race-check", "on" if race_check else "off",
            "--barrier-sites", c.barrier_sites, "--accesses", accesses, "--warp-order", warp_order]
    if c.headers:
        argv += ["-I", str(stand_in_headers(c, tree))]
    for d in c.includes:
        argv += ["-I", str(tree / d)]
    for d in c.defines:
        argv += ["-D", d]
    for h in c.empty_headers:
        argv += ["--empty-header", h]
    for r in c.relaxations:
        argv += ["--nvcc-relax", r]
    return argv


def score_case(backend, side: Side, root: Path, seed: int) -> dict:
    """Run `side` as `qconform racescan` would, with the detector's options of `backend` (an EmuBackend: its time
    limit, acquire rule and detector switch; the command makes its own backends)."""
    from harness.cli import build_parser
    from harness.cli.racescan import judge
    git_dir = _git_dir(root)
    argv = command_line(side, _tree(git_dir, side.rev, side.case.parts or side.project.parts), seed,
                        backend.timeout_s, backend.acquire, backend.race_check, backend.accesses, backend.warp_order)
    rec = {"file": side.name, "algorithm": group_of(side), "project": side.project.name, "label": label_of(side),
           "kernels": {}, "commit": _git(git_dir, "rev-parse", "--short=8", side.rev).strip(), "fix": side.fix.title,
           "reported": side.fix.reported, "kept": side.fix.kept,
           "replay": "qconform " + " ".join(shlex.quote(a) for a in argv)}
    args = build_parser().parse_args(argv)
    try:
        verdict = judge(args, echo=lambda *_: None).verdict
    except ValueError as exc:      # the tree's kernel does not take the case's arguments: nothing was judged
        verdict = Verdict("unsupported", type(exc).__name__, str(exc)[:300])
    rec["kernels"][side.case.kernel] = kernel_record(verdict, verdict.kind == "race")
    return file_verdict(rec)


def record_name(side: Side) -> str:
    return side.name


def group_of(side: Side) -> str:
    return side.fix.reported or side.fix.commit


def suite_name(sides: "list[Side]") -> str:
    return f"{sides[0].project.name}'s race fixes"
