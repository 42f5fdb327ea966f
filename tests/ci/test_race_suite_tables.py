"""A file-scope table of device-function pointers that GPUVerify's preconditions fill
(`__requires(table[0] == twice)`, the SDK's FunctionPointers sample; its host program sets the table with
cudaMemcpyToSymbol): the adapter makes those entries the table's initializer (gpuverify.function_tables), so the
kernel calls through it as the verifier assumed; without the preconditions the table is null and the call
crashes."""
from __future__ import annotations


from ci.race_suites import gpuverify


HEAD = "//pass\n//--blockDim=32 --gridDim=2\n\n"
TABLE = HEAD + r"""typedef int (*op_t)(int);
__device__ int twice(int x) { return 2 * x; }
__device__ int negate(int x) { return -x; }
__device__ op_t table[4];
__global__ void apply(int* y, int which) {
  REQUIRES
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = table[which & 1](i);
}
"""
CASES = {"filled": TABLE.replace("REQUIRES", "__requires(table[0] == twice);\n  __requires(table[1] == negate);"),
         "empty": TABLE.replace("REQUIRES", "")}



def test_a_table_the_preconditions_fill_is_called_through(verdicts):
    rec = verdicts["filled"]
    assert rec["verdict"] == "clean" and rec["requires_not_honoured"] == [], rec


def test_without_the_preconditions_the_table_is_null(verdicts):
    rec = verdicts["empty"]            # the negative control
    assert rec["verdict"] == "fault" and rec["fault"] == "KernelCrash", rec


def test_the_declaration_keeps_its_line_and_other_conditions_are_not_honoured():
    code, honoured = gpuverify.function_tables(
        "__device__ int f(int);\n__device__ op_t t[3];\n__device__ op_t u[2];\n",
        ["t[2] == f", "t[0] == f", "u[0] == g", "n == 4"])
    assert code == "__device__ int f(int);\n__device__ op_t t[3] = {f, 0, f};\n__device__ op_t u[2];\n"
    assert honoured == ["t[2] == f", "t[0] == f"]          # g is no device function of the source
