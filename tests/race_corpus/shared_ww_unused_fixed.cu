// qconform-race: race-free
// class: twin of shared_ww_unused: one thread writes the slot
// launch: k grid=2 block=64
// args: x:float32[128]=random(-4,4) y:float32[128]!out
__global__ void k(const float* x, float* y) {
  __shared__ int last;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (threadIdx.x == blockDim.x - 1) last = threadIdx.x;
  y[i] = 2.0f * x[i];
}
