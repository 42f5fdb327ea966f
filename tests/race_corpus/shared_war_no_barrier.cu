// qconform-race: racy
// class: shared write-after-read in one barrier interval (a thread overwrites a slot its neighbour still reads)
// launch: k grid=1 block=64
// args: x:int32[64]=random(0,1000) y:int32[64]!out
__global__ void k(const int* x, int* y) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = x[t];
  __syncthreads();
  int v = s[(t + 1) % 64];
  s[t] = v + 1;                  // missing __syncthreads() between the read above and this write
  __syncthreads();
  y[t] = s[t];
}
