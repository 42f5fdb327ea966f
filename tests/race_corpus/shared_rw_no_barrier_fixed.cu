// qconform-race: race-free
// class: twin of shared_rw_no_barrier: the barrier orders the writes before the reads
// launch: k grid=1 block=128
// args: x:int32[128]=random(0,1000) y:int32[128]!out
__global__ void k(const int* x, int* y) {
  __shared__ int s[128];
  int t = threadIdx.x;
  s[t] = x[t];
  __syncthreads();
  y[t] = s[(t + 1) % 128];
}
