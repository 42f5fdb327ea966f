// qconform-race: race-free
// class: atomics only: every thread of every block counts into one global counter and a histogram
// launch: k grid=4 block=64
// args: x:int32[256]=random(0,8) count:uint32[1]=zeros hist:int32[8]=zeros
__global__ void k(const int* x, unsigned int* count, int* hist) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(count, 1);
  atomicAdd(&hist[x[i]], 1);
}
