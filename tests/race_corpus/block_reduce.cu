// qconform-race: race-free
// class: shared-memory tree reduction with a barrier per step, one atomic per block into the global sum
// launch: k grid=4 block=128
// args: x:int32[512]=random(0,100) sum:int32[1]=zeros
__global__ void k(const int* x, int* sum) {
  __shared__ int s[128];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (int d = 64; d > 0; d /= 2) {
    if (t < d) s[t] += s[t + d];
    __syncthreads();
  }
  if (t == 0) atomicAdd(sum, s[0]);
}
