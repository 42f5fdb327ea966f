"""CUDA source, read as text: the C types of kernel parameters and the numpy dtypes they carry (`types`), and the
`__global__` signatures a .cu file declares (`signatures`). In: CUDA C source text or a C type spelling. Out:
`KernelSignature`s, normalized C types, dtypes and source hashes. It knows nothing of qconform's kernels, so the
emitters that write sources and the backends that run any source both build on it; it imports only numpy."""
