// qconform-race: racy
// class: shared write-write by every thread on one slot whose value never reaches an output
// differential: missed (no schedule can see it: the values coincide or never reach an output)
// launch: k grid=2 block=64
// args: x:float32[128]=random(-4,4) y:float32[128]!out
__global__ void k(const float* x, float* y) {
  __shared__ int last;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  last = threadIdx.x;            // every thread, same barrier interval: write-write race
  y[i] = 2.0f * x[i];
}
