// qconform-race: race-free
// class: twin of shared_same_value: one thread writes, a barrier publishes
// launch: k grid=1 block=64
// args: x:int32[64]=random(0,100) y:int32[64]!out
__global__ void k(const int* x, int* y) {
  __shared__ int scale;
  if (threadIdx.x == 0) scale = 3;
  __syncthreads();
  y[threadIdx.x] = scale * x[threadIdx.x];
}
