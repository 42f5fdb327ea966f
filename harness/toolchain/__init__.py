"""The CUDA toolchain around the kernels, no GPU needed. In: CUDA source (emitted or extracted), the installed
toolkits. Out: where nvcc/ptxas and the SASS readers are (`finder`), compiled cubins with their resources and
SASS checks (`compile`), stand-ins for host libraries' headers that kernel files include (`host_libraries`), the golden locks and their diffs (`golden`), and the CUDA string literals of a Rust
emitter as .cu files (`rust_literals`)."""
