// qconform-race: race-free
// class: the dead load after a barrier (twin of shared_dead_load)
// accesses: source
// launch: k grid=1 block=64
// args: x:int32[64]=random(0,100) y:int32[64]!out
__global__ void k(const int* x, int* y) {
  __shared__ int offset;
  if (threadIdx.x == 63) offset = x[0];
  __syncthreads();
  int unused = offset;             // every thread reads after thread 63's store
  (void)unused;
  y[threadIdx.x] = x[threadIdx.x];
}
