// qconform-race: race-free
// class: twin of shared_war_no_barrier: a barrier between the read and the overwrite
// launch: k grid=1 block=64
// args: x:int32[64]=random(0,1000) y:int32[64]!out
__global__ void k(const int* x, int* y) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = x[t];
  __syncthreads();
  int v = s[(t + 1) % 64];
  __syncthreads();
  s[t] = v + 1;
  __syncthreads();
  y[t] = s[t];
}
