// qconform-race: racy
// class: shared read-write across a missing __syncthreads (a neighbour's slot read before it is written)
// launch: k grid=1 block=128
// args: x:int32[128]=random(0,1000) y:int32[128]!out
__global__ void k(const int* x, int* y) {
  __shared__ int s[128];
  int t = threadIdx.x;
  s[t] = x[t];
  // missing __syncthreads()
  y[t] = s[(t + 1) % 128];
}
