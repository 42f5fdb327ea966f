// qconform-race: race-free
// class: twin of memset_same_value: one thread clears, a barrier publishes
// launch: k grid=1 block=64
// args: x:int32[64]=random(0,100) y:int32[64]!out
__global__ void k(const int* x, int* y) {
  __shared__ int acc[2];
  if (threadIdx.x == 0) __builtin_memset(acc, 0, sizeof acc);
  __syncthreads();
  y[threadIdx.x] = x[threadIdx.x] + acc[threadIdx.x % 2];
}
